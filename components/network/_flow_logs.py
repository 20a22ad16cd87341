"""The VPC flow log of :class:`~gpucluster.components.network.network.Network`: the IAM documents it needs (the
role's trust and permissions, the bucket's delivery grant, each scoped to this account and region) and
the resources, to CloudWatch Logs or to S3."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.buckets import LifecycleRule, bucket_lifecycle, private_bucket
from gpucluster.config.network import FlowLogsSpec

FLOW_LOGS_SERVICE = "vpc-flow-logs.amazonaws.com"
LOG_DELIVERY_SERVICE = "delivery.logs.amazonaws.com"


def flow_log_group_name(cluster_name: str) -> str:
    return f"/gpucluster/{cluster_name}/vpc-flow-logs"


def flow_log_trust_policy(*, partition: str, region: str, account: str) -> dict[str, Any]:
    """Who may assume the flow-log role: VPC Flow Logs, and only for flow logs of this account and
    region (``aws:SourceAccount`` / ``aws:SourceArn`` stop another account's flow log from using
    the role: the confused-deputy guard AWS documents for this role)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "VpcFlowLogsOfThisAccount",
                "Effect": "Allow",
                "Principal": {"Service": FLOW_LOGS_SERVICE},
                "Action": "sts:AssumeRole",
                "Condition": {
                    "StringEquals": {"aws:SourceAccount": account},
                    "ArnLike": {"aws:SourceArn": f"arn:{partition}:ec2:{region}:{account}:vpc-flow-log/*"},
                },
            }
        ],
    }


def flow_log_role_policy(log_group_arn: str) -> dict[str, Any]:
    """What the flow-log role may do: write streams and events into the cluster's log group only.
    The group exists (this program makes it, with its retention), so no ``logs:CreateLogGroup``."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "WriteTheClustersFlowLogGroup",
                "Effect": "Allow",
                "Action": ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                "Resource": [log_group_arn, f"{log_group_arn}:log-stream:*"],
            },
            {
                # Flow Logs checks the destination with DescribeLogGroups, a list call that cannot be
                # narrowed to one group: the account's and region's groups.
                "Sid": "FindTheLogGroup",
                "Effect": "Allow",
                "Action": "logs:DescribeLogGroups",
                "Resource": log_group_arn.rsplit(":log-group:", 1)[0] + ":log-group:*",
            },
        ],
    }


def flow_log_bucket_statements(bucket_arn: str, *, partition: str, region: str, account: str) -> list[dict[str, Any]]:
    """Bucket-policy statements that let the log delivery service write this account's flow logs
    (and nobody else's: ``aws:SourceAccount`` and ``aws:SourceArn``) under ``AWSLogs/<account>/``."""
    source = {
        "StringEquals": {"aws:SourceAccount": account},
        "ArnLike": {"aws:SourceArn": f"arn:{partition}:logs:{region}:{account}:*"},
    }
    return [
        {
            "Sid": "FlowLogDeliveryWrite",
            "Effect": "Allow",
            "Principal": {"Service": LOG_DELIVERY_SERVICE},
            "Action": "s3:PutObject",
            "Resource": f"{bucket_arn}/AWSLogs/{account}/*",
            "Condition": {
                "StringEquals": {"aws:SourceAccount": account, "s3:x-amz-acl": "bucket-owner-full-control"},
                "ArnLike": source["ArnLike"],
            },
        },
        {
            "Sid": "FlowLogDeliveryCheck",
            "Effect": "Allow",
            "Principal": {"Service": LOG_DELIVERY_SERVICE},
            "Action": ["s3:GetBucketAcl", "s3:ListBucket"],
            "Resource": bucket_arn,
            "Condition": source,
        },
    ]


def create_flow_log(
    parent: pulumi.Resource,
    name: str,
    flow: FlowLogsSpec,
    *,
    vpc_id: pulumi.Input[str],
    cluster_name: str,
    region: str,
    tags: Callable[[str], dict[str, str]],
) -> pulumi.Output[str]:
    """The VPC's flow log, to a CloudWatch log group (with the role Flow Logs writes through) or to a
    private bucket that expires records; protected and retained unless ``flow.protect`` is false.
    ``tags(suffix)`` names each resource. Returns the flow log's id."""
    protect = flow.protect if flow.protect is not None else True
    keep = pulumi.ResourceOptions(parent=parent, protect=protect, retain_on_delete=protect)
    invoke = pulumi.InvokeOutputOptions(parent=parent)
    child = pulumi.ResourceOptions(parent=parent)
    account = aws.get_caller_identity_output(opts=invoke).account_id
    partition = aws.get_partition_output(opts=invoke).partition
    common: dict[str, Any] = {
        "vpc_id": vpc_id,
        "traffic_type": "ALL",
        "max_aggregation_interval": flow.max_aggregation_interval,
        "tags": tags("flow-log"),
    }
    if flow.destination == "cloudwatch":
        return _to_cloudwatch(name, flow, common, cluster_name=cluster_name, region=region, tags=tags,
                              partition=partition, account=account, keep=keep, child=child)  # fmt: skip

    def delivery(bucket_arn: str) -> pulumi.Output[list[dict[str, Any]]]:
        return pulumi.Output.all(partition, account).apply(
            lambda v: flow_log_bucket_statements(bucket_arn, partition=v[0], region=region, account=v[1])
        )

    bucket = private_bucket(
        f"{name}-flow-logs",
        f"{name}-flow-logs",
        bucket_prefix=f"{cluster_name[:27]}-flowlogs-",
        force_destroy=not protect,
        tags=tags("flow-logs"),
        bucket_opts=keep,
        child_opts=child,
        policy_statements=delivery,
    )
    bucket_lifecycle(
        f"{name}-flow-logs-expiry", bucket, [LifecycleRule("expire-flow-logs", expire_days=flow.retention_days)], child
    )
    # Flow Logs delivers to S3 through the log delivery service, which the bucket policy admits;
    # no IAM role is involved.
    log = aws.ec2.FlowLog(
        f"{name}-flow-log",
        log_destination_type="s3",
        log_destination=bucket.arn,
        opts=child,
        **common,
    )
    return log.id


def _to_cloudwatch(
    name: str,
    flow: FlowLogsSpec,
    common: dict[str, Any],
    *,
    cluster_name: str,
    region: str,
    tags: Callable[[str], dict[str, str]],
    partition: pulumi.Output[str],
    account: pulumi.Output[str],
    keep: pulumi.ResourceOptions,
    child: pulumi.ResourceOptions,
) -> pulumi.Output[str]:
    """The flow log to a CloudWatch log group with a retention, written through a role of its own: its id."""
    group = aws.cloudwatch.LogGroup(
        f"{name}-flow-logs",
        name=flow_log_group_name(cluster_name),
        retention_in_days=flow.retention_days,
        tags=tags("flow-logs"),
        opts=keep,
    )
    role = aws.iam.Role(
        f"{name}-flow-logs",
        assume_role_policy=pulumi.Output.all(partition, account).apply(
            lambda v: json.dumps(flow_log_trust_policy(partition=v[0], region=region, account=v[1]))
        ),
        description=f"VPC Flow Logs of {cluster_name}: write to its log group",
        tags=tags("flow-logs"),
        opts=child,
    )
    aws.iam.RolePolicy(
        f"{name}-flow-logs",
        role=role.id,
        policy=group.arn.apply(lambda arn: json.dumps(flow_log_role_policy(arn))),
        opts=child,
    )
    log = aws.ec2.FlowLog(
        f"{name}-flow-log",
        log_destination_type="cloud-watch-logs",
        log_destination=group.arn,
        iam_role_arn=role.arn,
        opts=child,
        **common,
    )
    return log.id
