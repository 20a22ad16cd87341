"""The stack program: config → spec → GpuCluster → exports. ``__main__.py`` calls :func:`main`.

It runs the same under ``pulumi up`` and under the offline plan's mock engine.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.build import part
from gpucluster.components.gpu_cluster import TOKEN, ClusterParts, build_gpu_cluster, user_data_findings
from gpucluster.components.hybrid._parts import hybrid_outputs, hybrid_secrets
from gpucluster.components.kubernetes.eks_cluster import EksParts
from gpucluster.components.monitoring.monitoring import MonitoringParts
from gpucluster.components.slurm.slurm_cluster import SlurmParts
from gpucluster.config.checks.images import unpinned_images
from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.errors import ConfigError, Finding, error, errors_in
from gpucluster.config.kubernetes import KubernetesSpec
from gpucluster.facts.catalog import Catalog, load_catalog
from gpucluster.load import LoadResult, load_spec
from gpucluster.resolve.cluster import ResolvedSlurm


def _setup_host(cluster: ClusterParts, fs_type: str) -> dict[str, object]:
    """The Lustre file system's storage setup host (its admin host where no head node is): start the instance to
    run the setup again (docs/storage.md, "The storage setup host")."""
    host = cluster.storage_setup
    if fs_type != "lustre" or host is None:
        return {}
    return {"setupHost": {"instanceId": host.instance_id, "privateIp": host.private_ip}}


def read_config() -> dict[str, Any]:
    """Every config key Pulumi passed to this program (``namespace:key``)."""
    from pulumi.runtime import config as runtime_config

    merged: dict[str, Any] = dict(runtime_config.get_config_env())
    merged.update(runtime_config.CONFIG.get())
    return merged


def verify_against_ec2(spec: ClusterSpec, catalog: Catalog) -> list[Finding]:
    """Ask EC2 (``getInstanceType``, ``getAvailabilityZones``) whether the catalog and zones still hold.

    EFA interfaces are laid out from the catalog; if EC2 now says otherwise, stop before creating
    anything rather than launch nodes with the wrong interfaces.
    """
    findings: list[Finding] = []
    zones = set(aws.get_availability_zones(state="available").names)
    for i, group in enumerate(spec.node_groups):
        for zone in group.availability_zones:
            if zone not in zones:
                findings.append(
                    error(
                        f"gpucluster:nodeGroups[{i}].availabilityZones",
                        f"zone {zone!r} is not an available zone of {spec.region} for this account",
                        f"use one of {', '.join(sorted(zones))}",
                        zone,
                        "zone-unavailable",
                    )
                )
    for instance_type in sorted({g.instance_type for g in spec.node_groups}):
        facts = catalog[instance_type]
        live = aws.ec2.get_instance_type(instance_type=instance_type)
        live_gpus = sum(int(g.count) for g in live.gpuses or [])
        checks = [
            ("network cards", len(facts.network_cards), len(live.network_cards or [])),
            ("maximum EFA interfaces", facts.max_efa_interfaces, int(live.efa_maximum_interfaces or 0)),
            ("GPUs", facts.gpu_count, live_gpus),
        ]
        for what, ours, theirs in checks:
            if ours != theirs:
                findings.append(
                    error(
                        "gpucluster:nodeGroups",
                        f"the instance catalog says {instance_type} has {ours} {what}, EC2 in {spec.region} says {theirs}",
                        "refresh the catalog: `gpucluster catalog refresh --region " + spec.region + "`",
                        instance_type,
                        "catalog-stale",
                    )
                )
    return findings


def load_checked(catalog: Catalog) -> tuple[LoadResult, list[Finding]]:
    """The stack's config loaded, checked, resolved, its user data sized and the catalog checked against EC2; every
    error a :class:`pulumi.RunError` (Pulumi prints the message alone, without a traceback)."""
    try:
        loaded = load_spec(read_config(), stack=pulumi.get_stack(), catalog=catalog)
        too_large = user_data_findings(loaded.cluster)
        if too_large:
            raise ConfigError(list(loaded.findings) + too_large, f"stack {pulumi.get_stack()!r}")
        live = verify_against_ec2(loaded.spec, catalog)
        if errors_in(live):
            raise ConfigError(list(loaded.findings) + live, f"stack {pulumi.get_stack()!r}")
    except ConfigError as exc:
        raise pulumi.RunError(str(exc)) from exc
    return loaded, list(loaded.findings) + unpinned_images(loaded.spec) + live


def main() -> ClusterParts:
    catalog = load_catalog()
    loaded, findings = load_checked(catalog)
    for finding in findings:
        pulumi.log.warn(finding.render())
    spec = loaded.spec
    cluster = build_gpu_cluster(part(TOKEN, spec.name), spec.name, loaded.cluster)  # loaded, checked, resolved
    pulumi.export("clusterName", spec.name)
    pulumi.export("region", spec.region)
    pulumi.export("vpcId", cluster.network.vpc_id)
    pulumi.export("nodeGroups", node_group_outputs(cluster))
    pulumi.export("estimate", cluster.estimate.as_dict())
    if loaded.sizing is not None:
        pulumi.export("storageSizing", loaded.sizing.as_dict())
    if cluster.shared_storage:
        pulumi.export("storage", storage_outputs(cluster))
    if cluster.bucket is not None:
        pulumi.export("dataBucket", cluster.bucket.bucket_name)
    if cluster.slurm is not None and loaded.cluster.slurm is not None:
        pulumi.export("slurm", slurm_outputs(cluster.slurm, loaded.cluster.slurm, spec.region))
    if cluster.hybrid is not None and spec.hybrid is not None:
        pulumi.export("hybrid", hybrid_outputs(cluster.hybrid, cluster.slurm, spec, cluster.subnets_for))
        for key, secret in hybrid_secrets(cluster.hybrid).items():
            pulumi.export(key, secret)
    if cluster.eks is not None and cluster.kubernetes is not None and spec.kubernetes is not None:
        pulumi.export("kubernetes", kubernetes_outputs(cluster.eks, spec, spec.kubernetes))
    if cluster.eks is not None and cluster.eks.hybrid_nodes is not None:
        # EKS Hybrid Nodes: what the site's servers install (nodeConfig.yaml, install.sh) and the ARNs in it.
        nodes = cluster.eks.hybrid_nodes
        profile = nodes.profile.arn if nodes.profile is not None else None
        pulumi.export("hybridNodes", {"roleArn": nodes.role.arn, "profileArn": profile, "files": nodes.bundle})
    if cluster.monitoring is not None:
        pulumi.export("monitoring", monitoring_outputs(cluster.monitoring))
    pulumi.export("findings", [f.as_dict() for f in findings])
    return cluster


def monitoring_outputs(parts: MonitoringParts) -> dict[str, Any]:
    """The ``monitoring`` output: the AMP workspace (its id and endpoint, for a Grafana data source or ``awscurl``), the
    alert topic, the Grafana endpoint where one is made, and where the dashboards open (their URLs in that Grafana, or
    the command that writes them as files to import). The log group is
    ``/gpucluster/<cluster>`` (docs/monitoring-aws.md)."""
    out: dict[str, Any] = {
        "workspaceId": parts.workspace_id,
        "prometheusEndpoint": parts.prometheus_endpoint,
        "alertTopicArn": parts.topic_arn,
        "dashboards": parts.dashboards,
    }
    if parts.grafana_endpoint is not None:
        out["grafanaEndpoint"] = parts.grafana_endpoint
    return out


def node_group_outputs(cluster: ClusterParts) -> dict[str, dict[str, Any]]:
    """The ``nodeGroups`` output: the plain (``scheduler: none``) groups' launch templates and Auto Scaling groups."""
    return {
        name: {
            "instanceType": cluster.spec.node_group(name).instance_type,
            "launchTemplateId": ng.launch_template_id,
            "launchTemplateVersion": ng.launch_template_version,
            "autoScalingGroupName": ng.auto_scaling_group_name,
            "placementGroupName": ng.placement_group_name,
            "efaInterfaces": sum(s.is_efa for s in ng.interfaces),
        }
        for name, ng in cluster.node_groups.items()
    }


def storage_outputs(cluster: ClusterParts) -> list[dict[str, Any]]:
    """The ``storage`` output: each file system the nodes mount, in the shape Slurm and Kubernetes share."""
    return [
        {
            "name": s.name,
            "type": s.fs_type,
            "mountPoint": s.mount_point,
            "server": s.server,
            "mountName": s.mount_name,
            "fileSystemId": s.file_system_id,
            "capacityGiB": s.capacity_gib,
            "efa": s.efa_enabled,
            **_setup_host(cluster, s.fs_type),
        }
        for s in cluster.shared_storage
    ]


def slurm_outputs(slurm: SlurmParts, resolved: ResolvedSlurm, region: str) -> dict[str, Any]:
    """The ``slurm`` output: the controller, the head node, and each partition with its node group's launch target."""
    return {
        "controller": slurm.controller_address,
        "headInstanceId": slurm.head_instance_id,
        "headPrivateIp": slurm.head_private_ip,
        "headDataVolumeId": slurm.data_volume_id,
        "mungeKeySecretArn": slurm.munge_secret_arn,
        "partitions": {
            g.partition: {
                "nodeGroup": g.name,
                "mode": g.entry.mode,
                "default": bool(g.entry.default),
                "launchTemplateId": slurm.node_groups[g.name].launch_template_id,
                "autoScalingGroupName": slurm.node_groups[g.name].auto_scaling_group_name,
            }
            for g in resolved.node_groups
        },
        "connect": _connect(slurm, resolved, region),
        **_people_outputs(slurm),
    }


def _connect(slurm: SlurmParts, resolved: ResolvedSlurm, region: str) -> pulumi.Output[Any] | None:
    """How an administrator opens a shell on the head node. Without people: Session Manager's default document (who
    may is the account's IAM). With people the default document is refused by the session policies, so one command
    per document that may reach the head node: each declared administrator's own, and the shared one (``*``: for
    principals whose session carries ``SSMSessionRunAs``, with the exported admin policy)."""
    head = slurm.head_instance_id
    if head is None:
        return None
    if not slurm.session_documents:
        return head.apply(lambda i: f"aws ssm start-session --target {i} --region {region}")
    identity = resolved.spec.identity
    group = identity.admin_group if identity is not None else None
    admins = {u.name for u in (identity.users if identity is not None else ()) if group is not None and group in u.groups}
    documents = {k: d for k, d in slurm.session_documents.items() if k == "*" or k in admins}
    if group is None:
        return None  # nobody administers: no document reaches the head node
    return head.apply(
        lambda i: {k: f"aws ssm start-session --document-name {d} --target {i} --region {region}" for k, d in documents.items()}
    )


def _people_outputs(slurm: SlurmParts) -> dict[str, Any]:
    """Sessions, login nodes and home, only where configured: a cluster without people keeps its outputs."""
    out: dict[str, Any] = {}
    if slurm.session_documents:
        out.update(
            sessionDocuments=slurm.session_documents,
            sessionPolicyArns=slurm.session_policy_arns,
            sessionCommands=slurm.session_commands,
        )
    if slurm.login_asg_name is not None:
        out.update(loginAsgName=slurm.login_asg_name, sshEndpoint=slurm.ssh_endpoint)
    return out


def kubernetes_outputs(eks: EksParts, spec: ClusterSpec, kubernetes: KubernetesSpec) -> dict[str, Any]:
    """The ``kubernetes`` output: the EKS cluster, its managed node groups, the teams' namespaces and queues."""
    return {
        "clusterName": eks.cluster_name,
        "version": kubernetes.version,
        "endpoint": eks.endpoint,
        "oidcIssuer": eks.oidc_issuer,
        "nodeGroups": {n: ng.node_group_name for n, ng in eks.managed_node_groups.items()},
        "teams": {t.name: {"namespace": t.effective_namespace, "queue": t.name} for t in kubernetes.teams},
        "updateKubeconfig": f"aws eks update-kubeconfig --name {spec.name} --region {spec.region}",
    }
