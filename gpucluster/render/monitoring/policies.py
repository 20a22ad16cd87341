"""The IAM and resource policies of monitoring, as documents (pure: the components fill in the ARNs).

Each grants one thing on one resource: the head node writes to its cluster's AMP workspace only and may list EC2
instances (``DescribeInstances`` has no resource-level permissions) to find the GPU nodes; a node writes log streams
into its cluster's log group only, events only into its role's own logs' streams; AMP may publish to the alert topic only for this workspace of this account.
"""

from __future__ import annotations

from typing import Any


def _doc(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def remote_write_policy(workspace_arn: str) -> dict[str, Any]:
    """The Slurm head node's collector: ``aps:RemoteWrite`` on the workspace, EC2 discovery."""
    return _doc(
        {"Sid": "RemoteWriteToTheClusterWorkspace", "Effect": "Allow", "Action": "aps:RemoteWrite", "Resource": workspace_arn},
        {"Sid": "DiscoverTheGpuNodes", "Effect": "Allow", "Action": "ec2:DescribeInstances", "Resource": "*"},
    )


def log_shipping_policy(log_group_arn: str, streams: tuple[str, ...]) -> dict[str, Any]:
    """A node's log shipper (gpucluster-logs): streams in the cluster's log group, and events into the streams named
    ``streams`` (its role's own logs, :func:`gpucluster.render.monitoring.logs.stream_patterns`) only; nothing else
    (no log group creation, no retention change, no deletion)."""
    if not streams:
        raise ValueError("a log shipping policy names at least one stream pattern")
    return _doc(
        {
            "Sid": "MakeStreamsInTheClusterLogGroup",
            "Effect": "Allow",
            "Action": ["logs:CreateLogStream", "logs:DescribeLogStreams"],
            "Resource": [log_group_arn, f"{log_group_arn}:log-stream:*"],
        },
        {
            "Sid": "WriteOnlyThisRolesLogStreams",
            "Effect": "Allow",
            "Action": "logs:PutLogEvents",
            "Resource": [f"{log_group_arn}:log-stream:{s}" for s in streams],
        },
    )


def topic_policy(topic_arn: str, workspace_arn: str, account: str) -> dict[str, Any]:
    """The alert topic's policy: the account owns it; AMP (``aps.amazonaws.com``) publishes only on behalf of this
    workspace of this account (the confused-deputy conditions)."""
    return _doc(
        {
            "Sid": "AccountOwnsTheTopic",
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:{_partition(topic_arn)}:iam::{account}:root"},
            "Action": [
                "sns:GetTopicAttributes",
                "sns:SetTopicAttributes",
                "sns:Subscribe",
                "sns:ListSubscriptionsByTopic",
                "sns:Publish",
                "sns:DeleteTopic",
            ],
            "Resource": topic_arn,
        },
        {
            "Sid": "AmpAlertmanagerPublishes",
            "Effect": "Allow",
            "Principal": {"Service": "aps.amazonaws.com"},
            "Action": ["sns:Publish", "sns:GetTopicAttributes"],
            "Resource": topic_arn,
            "Condition": {"ArnEquals": {"aws:SourceArn": workspace_arn}, "StringEquals": {"aws:SourceAccount": account}},
        },
        {
            "Sid": "TlsOnly",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "sns:Publish",
            "Resource": topic_arn,
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        },
    )


def monitoring_key_policy(*, partition: str, region: str, account: str, log_group_prefix: str) -> dict[str, Any]:
    """The key gpucluster creates when none is given: the account administers it; CloudWatch Logs encrypts the
    cluster's log groups with it; AMP and SNS use it for the alert topic (an SNS topic under the AWS-managed
    ``alias/aws/sns`` key cannot take messages from a service such as AMP: that key's policy cannot be changed)."""
    log_groups = f"arn:{partition}:logs:{region}:{account}:log-group:{log_group_prefix}*"
    return _doc(
        {
            "Sid": "AccountAdministers",
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:{partition}:iam::{account}:root"},
            "Action": "kms:*",
            "Resource": "*",
        },
        {
            "Sid": "CloudWatchLogsEncryptsTheClusterLogGroups",
            "Effect": "Allow",
            "Principal": {"Service": f"logs.{region}.amazonaws.com"},
            "Action": ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
            "Resource": "*",
            "Condition": {"ArnLike": {"kms:EncryptionContext:aws:logs:arn": log_groups}},
        },
        {
            "Sid": "AmpPublishesToTheEncryptedTopic",
            "Effect": "Allow",
            "Principal": {"Service": "aps.amazonaws.com"},
            "Action": ["kms:GenerateDataKey*", "kms:Decrypt"],
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:SourceAccount": account}},
        },
    )


def grafana_policy(workspace_arn: str, log_group_arn: str | None) -> dict[str, Any]:
    """The Grafana workspace's role: query the cluster's AMP workspace, read CloudWatch metrics (FSx, EC2) and the
    cluster's logs."""
    statements: list[dict[str, Any]] = [
        {
            "Sid": "QueryTheClusterWorkspace",
            "Effect": "Allow",
            "Action": ["aps:QueryMetrics", "aps:GetSeries", "aps:GetLabels", "aps:GetMetricMetadata", "aps:DescribeWorkspace"],
            "Resource": workspace_arn,
        },
        {"Sid": "ListWorkspaces", "Effect": "Allow", "Action": "aps:ListWorkspaces", "Resource": "*"},
        {
            "Sid": "ReadCloudWatchMetrics",
            "Effect": "Allow",
            "Action": ["cloudwatch:GetMetricData", "cloudwatch:ListMetrics", "cloudwatch:DescribeAlarms", "ec2:DescribeRegions"],
            "Resource": "*",
        },
    ]
    if log_group_arn is not None:
        statements.append(
            {
                "Sid": "ReadTheClusterLogs",
                "Effect": "Allow",
                "Action": ["logs:StartQuery", "logs:GetQueryResults", "logs:GetLogEvents", "logs:DescribeLogStreams"],
                "Resource": [log_group_arn, f"{log_group_arn}:*"],
            }
        )
    return _doc(*statements)


# The AMP managed scraper's Kubernetes rights (Amazon Managed Service for Prometheus User Guide, "Configuring your
# Amazon EKS cluster": a ClusterRole bound to the user its access entry maps the scraper's role to).
SCRAPER_USER = "aps-collector-user"
SCRAPER_CLUSTER_ROLE_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": [""],
        "resources": ["nodes", "nodes/proxy", "nodes/metrics", "services", "endpoints", "pods", "ingresses", "configmaps"],
        "verbs": ["describe", "get", "list", "watch"],
    },
    {
        "apiGroups": ["extensions", "networking.k8s.io"],
        "resources": ["ingresses/status", "ingresses"],
        "verbs": ["describe", "get", "list", "watch"],
    },
    {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
]


def _partition(arn: str) -> str:
    parts = arn.split(":")
    return parts[1] if len(parts) > 1 and parts[1] else "aws"
