"""The monitoring part of a cluster: an AMP workspace (its rules and Alertmanager), the SNS alert topic and its
subscribers, the CloudWatch log groups, the rights of the Slurm nodes that feed them, and on EKS the AMP managed
scraper and the nodes' Fluent Bit (:mod:`._eks_logs`); optionally a Managed Grafana workspace (:mod:`._grafana`).

Nothing here when ``monitoring`` resolved to ``None`` (off, or no scheduler): ``enabled: false`` leaves no resource.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from gpucluster.components.monitoring._wiring import MonitoringWiring
from gpucluster.config.naming import with_name
from gpucluster.render.iam import policy_json
from gpucluster.render.monitoring.alertmanager import alertmanager_definition
from gpucluster.render.monitoring.cloudwatch_alarms import fsx_alarms
from gpucluster.render.monitoring.logs import log_group_name, stream_patterns
from gpucluster.render.monitoring.policies import (
    log_shipping_policy,
    monitoring_key_policy,
    remote_write_policy,
    topic_policy,
)
from gpucluster.render.monitoring.rules import cluster_schedulers, rule_groups
from gpucluster.resolve.cluster import ResolvedCluster
from gpucluster.resolve.monitoring import subscribers

TOKEN = "gpucluster:index:Monitoring"
RULES_NAMESPACE = "gpucluster"
DASHBOARDS_COMMAND = "gpucluster dashboards --out <folder>"
"""Without provisioned dashboards: the command that writes them as JSON files, to import into any Grafana."""


@dataclass
class MonitoringParts:
    workspace_id: pulumi.Output[str]
    workspace_arn: pulumi.Output[str]
    prometheus_endpoint: pulumi.Output[str]
    topic_arn: pulumi.Output[str]
    log_group_name: pulumi.Output[str] | None
    grafana_endpoint: pulumi.Output[str] | None = None
    scraper_role_arn: pulumi.Output[str] | None = None
    dashboards: pulumi.Input[list[str]] = field(default_factory=lambda: [DASHBOARDS_COMMAND])
    """Where the dashboards open: their URLs in the cluster's Grafana, or the command that writes them to import."""


@dataclass
class MonitoringStore:
    """The store part, built before the schedulers (the Slurm head node's collector needs the workspace's id):
    the key, the workspace and its rules, the alert topic and its Alertmanager."""

    parent: pulumi.ComponentResource
    name: str
    workspace: aws.amp.Workspace
    topic_arn: pulumi.Output[str]
    key_arn: pulumi.Input[str]
    account: pulumi.Output[str]


def build_monitoring_store(
    parent: pulumi.ComponentResource, name: str, cluster: ResolvedCluster, tags: dict[str, str]
) -> MonitoringStore:
    """The key, the AMP workspace (its log group, rules and Alertmanager), the alert topic, its policy and
    subscribers of ``cluster`` (whose ``monitoring`` is resolved, not ``None``) under ``parent``: what the
    schedulers' parts need (the workspace's id) and need nothing of theirs."""
    monitoring = cluster.monitoring
    if monitoring is None:
        raise ValueError("build_monitoring_store: the cluster's monitoring is off")
    spec, region, prefix = monitoring.spec, cluster.region, cluster.name
    child = pulumi.ResourceOptions(parent=parent)
    invoke = pulumi.InvokeOutputOptions(parent=parent)
    partition = aws.get_partition_output(opts=invoke).partition
    account = aws.get_caller_identity_output(opts=invoke).account_id
    group = log_group_name(prefix)
    days, keep = spec.log_retention_days, _keep(parent, cluster)

    key_arn: pulumi.Input[str]
    if spec.kms_key_arn is not None:
        key_arn = spec.kms_key_arn
    else:
        key = aws.kms.Key(
            f"{name}-key",
            description=f"gpucluster {prefix}: monitoring log groups and alert topic",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            policy=pulumi.Output.all(partition, account).apply(
                lambda v: policy_json(monitoring_key_policy(partition=v[0], region=region, account=v[1], log_group_prefix=group))
            ),
            tags=with_name(tags, f"{prefix}-monitoring"),
            opts=keep,
        )
        key_arn = key.arn
    amp_logs = _log_group(name, days, key_arn, keep, tags, "amp-logs", f"{group}/amp")
    workspace = aws.amp.Workspace(
        f"{name}-workspace",
        alias=prefix,
        kms_key_arn=spec.kms_key_arn,
        logging_configuration={"log_group_arn": amp_logs.arn.apply(lambda a: f"{a}:*")},
        tags=with_name(tags, f"{prefix}-metrics"),
        opts=keep,
    )
    aws.amp.RuleGroupNamespace(
        f"{name}-rules",
        name=RULES_NAMESPACE,
        workspace_id=workspace.id,
        data=rule_groups(prefix, cluster_schedulers(cluster)),
        tags=tags,
        opts=child,
    )
    topic = aws.sns.Topic(
        f"{name}-alerts", name=f"{prefix}-alerts", kms_master_key_id=key_arn, tags=with_name(tags, f"{prefix}-alerts"), opts=child
    )
    aws.sns.TopicPolicy(
        f"{name}-alerts-policy",
        arn=topic.arn,
        policy=pulumi.Output.all(topic.arn, workspace.arn, account).apply(lambda v: policy_json(topic_policy(v[0], v[1], v[2]))),
        opts=child,
    )
    for sub in subscribers(spec):  # named by what it is, so removing one subscriber never renames the others
        digest = hashlib.sha256(f"{sub.protocol}:{sub.endpoint}".encode()).hexdigest()[:10]
        aws.sns.TopicSubscription(
            f"{name}-alerts-{sub.protocol}-{digest}", topic=topic.arn, protocol=sub.protocol, endpoint=sub.endpoint, opts=child
        )
    aws.amp.AlertManagerDefinition(
        f"{name}-alertmanager",
        workspace_id=workspace.id,
        definition=topic.arn.apply(lambda arn: alertmanager_definition(arn, region)),
        opts=child,
    )
    return MonitoringStore(parent, name, workspace, topic.arn, key_arn, account)


def _keep(parent: pulumi.Resource, cluster: ResolvedCluster) -> pulumi.ResourceOptions:
    """Logs and keys are the cluster's data: kept on delete where the cluster protects its data."""
    return pulumi.ResourceOptions(parent=parent, protect=cluster.protect_data, retain_on_delete=cluster.protect_data)


def _log_group(
    name: str, days: int, key_arn: pulumi.Input[str], keep: pulumi.ResourceOptions, tags: dict[str, str], suffix: str, path: str
) -> aws.cloudwatch.LogGroup:
    """A log group of the cluster's, encrypted with the monitoring key, kept ``days``."""
    return aws.cloudwatch.LogGroup(
        f"{name}-{suffix}", name=path, retention_in_days=days, kms_key_id=key_arn, tags=with_name(tags, path), opts=keep
    )


def build_monitoring(store: MonitoringStore, cluster: ResolvedCluster, wiring: MonitoringWiring) -> MonitoringParts:
    """The rest, once the schedulers are built (:func:`build_monitoring_store` first): the nodes' log group, the Slurm
    roles' rights and the EKS nodes' shipper, the EKS scraper, Grafana; under the store's parent."""
    monitoring = cluster.monitoring
    if monitoring is None:
        raise ValueError("build_monitoring: the cluster's monitoring is off")
    parent, name, workspace = store.parent, store.name, store.workspace
    tags, child = dict(wiring.tags), pulumi.ResourceOptions(parent=parent)

    def log_group(suffix: str, path: str) -> aws.cloudwatch.LogGroup:
        return _log_group(name, monitoring.spec.log_retention_days, store.key_arn, _keep(parent, cluster), tags, suffix, path)

    group = log_group_name(cluster.name)
    nodes_group = _slurm_rights(name, wiring, log_group, group, workspace.arn, monitoring.slurm_collector, child)
    if monitoring.eks_logs:
        from gpucluster.components.monitoring._eks_logs import eks_log_shipping

        nodes_group = nodes_group if nodes_group is not None else log_group("logs", group)
        eks_log_shipping(parent, name, cluster, wiring, nodes_group.arn, store.account, tags)
    parts = MonitoringParts(
        workspace_id=workspace.id,
        workspace_arn=workspace.arn,
        prometheus_endpoint=workspace.prometheus_endpoint,
        topic_arn=store.topic_arn,
        log_group_name=nodes_group.name if nodes_group is not None else None,
    )
    if wiring.lustre_file_system_id is not None:
        _fsx_alarms(name, cluster, wiring.lustre_file_system_id, store.topic_arn, tags, child)
    if monitoring.eks_scraper:
        from gpucluster.components.monitoring._eks_scraper import eks_scraper

        parts.scraper_role_arn = eks_scraper(parent, name, cluster, wiring, workspace.arn, tags)
    if monitoring.spec.grafana.enabled:
        from gpucluster.components.monitoring._grafana import grafana_workspace

        grafana = grafana_workspace(
            parent, name, cluster, wiring, workspace.arn, nodes_group.arn if nodes_group is not None else None, store.account
        )
        parts.grafana_endpoint = grafana.endpoint
        if monitoring.spec.grafana.provision_dashboards:
            from gpucluster.components.monitoring._grafana_dashboards import grafana_dashboards

            parts.dashboards = grafana_dashboards(parent, name, cluster, grafana, workspace.prometheus_endpoint)
    return parts


def _fsx_alarms(
    name: str,
    cluster: ResolvedCluster,
    file_system_id: pulumi.Input[str],
    topic_arn: pulumi.Input[str],
    tags: dict[str, str],
    child: pulumi.ResourceOptions,
) -> None:
    """The FSx for Lustre alarms (CloudWatch has their figures, Prometheus does not) on the alert topic, as the storage
    dashboard and docs/monitoring-aws.md name them; none for a file system whose size or tier the stack does not know
    (an existing one named by id without its capacity)."""
    storage = cluster.storage
    fs = storage.lustre.spec if storage is not None and storage.lustre is not None else None
    if fs is None or not fs.storage_capacity_gib or not fs.throughput_per_unit_storage:
        return
    alarms = fsx_alarms(cluster.name, file_system_id, fs.storage_capacity_gib, fs.throughput_per_unit_storage)
    for suffix, kwargs in alarms.items():
        queries = [
            aws.cloudwatch.MetricAlarmMetricQueryArgs(
                **{k: v for k, v in q.items() if k != "metric"},
                metric=aws.cloudwatch.MetricAlarmMetricQueryMetricArgs(**q["metric"]) if "metric" in q else None,
            )
            for q in kwargs.pop("metric_queries", [])
        ]
        aws.cloudwatch.MetricAlarm(
            f"{name}-{suffix}",
            aws.cloudwatch.MetricAlarmArgs(
                **kwargs,
                metric_queries=queries or None,
                alarm_actions=[topic_arn],
                ok_actions=[topic_arn],
                tags=with_name(tags, str(kwargs["name"])),
            ),
            opts=child,
        )


def _slurm_rights(
    name: str,
    wiring: MonitoringWiring,
    log_group: Callable[[str, str], aws.cloudwatch.LogGroup],
    group: str,
    workspace_arn: pulumi.Input[str],
    collector: bool,
    child: pulumi.ResourceOptions,
) -> aws.cloudwatch.LogGroup | None:
    """The Slurm nodes' log group and their roles' rights: the head node remote-writes and ships, compute and login
    nodes ship, each role into its own logs' streams only."""
    if wiring.head_role_id is None and wiring.node_role_id is None:
        return None
    nodes_group = log_group("logs", group)
    for who, role, streams in (
        ("head", wiring.head_role_id, stream_patterns("head")),
        ("node", wiring.node_role_id, stream_patterns("compute")),
        ("login", wiring.login_role_id, stream_patterns("login")),
    ):
        if role is not None:
            ship = nodes_group.arn.apply(lambda arn, streams=streams: policy_json(log_shipping_policy(arn, streams)))
            aws.iam.RolePolicy(f"{name}-{who}-logs", role=role, policy=ship, opts=child)
    if collector and wiring.head_role_id is not None:
        aws.iam.RolePolicy(
            f"{name}-head-remote-write",
            role=wiring.head_role_id,
            policy=pulumi.Output.from_input(workspace_arn).apply(lambda arn: policy_json(remote_write_policy(arn))),
            opts=child,
        )
    return nodes_group
