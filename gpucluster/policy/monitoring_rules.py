"""The monitoring rules: log groups keep their logs for a stated time under a customer key, and no Grafana
workspace is open to the internet."""

from __future__ import annotations

from collections.abc import Sequence

from gpucluster.policy.model import UNKNOWN, Resource, Violation, violation

LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
FLOW_LOG = "aws:ec2/flowLog:FlowLog"
GRAFANA_WORKSPACE = "aws:grafana/workspace:Workspace"

LOG_GROUPS = "log-groups-encrypted-retained"
NO_PUBLIC_GRAFANA = "no-public-grafana"


def _flow_log_destination(group: Resource, flows: Sequence[Resource]) -> bool:
    """Whether a flow log writes to ``group`` (by reference, or by an ARN that ends with the group's name); true
    where a preview cannot tell yet (``pulumi up`` runs the rule again)."""
    name = group.get("name")
    for flow in flows:
        if flow.refers_to("logDestination", group, "arn") is not False:
            return True
        destination = flow.get("logDestination")
        if destination is UNKNOWN or (name is UNKNOWN and destination is not None):
            return True
        if isinstance(destination, str) and isinstance(name, str) and destination.endswith(f":log-group:{name}"):
            return True
    return False


def log_groups_encrypted_retained(resources: Sequence[Resource]) -> list[Violation]:
    """Every log group has a retention (logs are neither lost early nor kept forever by accident) and a KMS key
    (``kmsKeyId``: node logs name users, jobs and hosts). A VPC flow log's group is held to its retention only: the
    network part creates no key, and its records are addresses and ports (docs/monitoring-aws.md says so)."""
    flows = [r for r in resources if r.type == FLOW_LOG]
    out = []
    for group in resources:
        if group.type != LOG_GROUP:
            continue
        days = group.get("retentionInDays")
        if days is not UNKNOWN and not days:
            got = "not set (CloudWatch Logs then keeps them forever)" if days is None else "0 (never expire)"
            out.append(
                violation(
                    LOG_GROUPS,
                    group,
                    "retentionInDays",
                    f"is {got}",
                    "set retentionInDays, e.g. gpucluster:monitoring.logRetentionDays (default 180)",
                )
            )
        key = group.get("kmsKeyId")
        if key is not UNKNOWN and not key and not _flow_log_destination(group, flows):
            out.append(
                violation(
                    LOG_GROUPS,
                    group,
                    "kmsKeyId",
                    "is not set: the logs are under CloudWatch's own key only",
                    "set kmsKeyId to a key whose policy lets logs.<region>.amazonaws.com use it "
                    "(gpucluster:monitoring.kmsKeyArn, or the key gpucluster creates)",
                )
            )
    return out


def no_public_grafana(r: Resource) -> list[Violation]:
    """A Managed Grafana workspace is reachable only through the VPC endpoints or prefix lists it names
    (``networkAccessControl``); without it, anyone on the internet reaches its sign-in page."""
    if r.type != GRAFANA_WORKSPACE:
        return []
    control = r.get("networkAccessControl")
    if control is UNKNOWN or control:
        return []
    return [
        violation(
            NO_PUBLIC_GRAFANA,
            r,
            "networkAccessControl",
            "is not set: the workspace is reachable from the internet",
            "set networkAccessControl with the VPC endpoint (vpceIds) people reach it through (gpucluster does)",
        )
    ]
