"""Spot and capacity warnings for the node agent's ``spot-watch`` service (``gpucluster_agents/power/spot.py``): an
EventBridge rule for EC2 Spot Instance Interruption Warnings, Instance Rebalance Recommendations and Capacity Block
expiration warnings, into an encrypted SQS queue only that rule may send to (TLS only), which only the head node's
role may read and delete from. Made when a Slurm node group runs on spot or capacity-block capacity.

EventBridge cannot match an event on the instance's tags, so the rule takes every such event of the account and
region; the service keeps those of the cluster's instances (by the cluster tag) and drops the rest. Messages are kept
an hour: a warning older than that is about an instance long gone."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from gpucluster.config.naming import with_name
from gpucluster.render.iam import spot_queue_policy
from gpucluster_agents.contract.spot import DETAIL_TYPES, WAIT_SECONDS

RETENTION_SECONDS = 3600


def spot_events(name: str, cluster: str, tags: dict[str, str], child: pulumi.ResourceOptions) -> aws.sqs.Queue:
    """The queue, the rule, its target and the queue's policy; returns the queue."""
    queue = aws.sqs.Queue(
        f"{name}-spot-events",
        sqs_managed_sse_enabled=True,
        message_retention_seconds=RETENTION_SECONDS,
        receive_wait_time_seconds=WAIT_SECONDS,
        visibility_timeout_seconds=30,
        tags=with_name(tags, f"{cluster}-spot-events"),
        opts=child,
    )
    rule = aws.cloudwatch.EventRule(
        f"{name}-spot-events",
        description=f"Spot interruption, rebalance and capacity block warnings for the node agent of {cluster}",
        event_pattern=json.dumps({"source": ["aws.ec2"], "detail-type": list(DETAIL_TYPES)}),
        tags=with_name(tags, f"{cluster}-spot-events"),
        opts=child,
    )
    aws.cloudwatch.EventTarget(f"{name}-spot-events", rule=rule.name, arn=queue.arn, opts=child)
    aws.sqs.QueuePolicy(
        f"{name}-spot-events",
        queue_url=queue.url,
        policy=pulumi.Output.all(queue.arn, rule.arn).apply(lambda v: json.dumps(spot_queue_policy(str(v[0]), str(v[1])))),
        opts=child,
    )
    return queue
