"""The cluster-level runner of the validators (:func:`validate_cluster`, :data:`CLUSTER_CHECKS`,
:data:`GROUP_CHECKS`) and of a node group on its own (:func:`validate_node_group`). The validators are
pure functions over a parsed (not yet resolved) spec and the catalog.

Each returns findings (level, config path, message, fix). ``None`` in an optional field means "let
gpucluster choose", so a validator that depends on such a field uses the ``effective_*`` helpers —
the same ones :func:`gpucluster.resolve.cluster.resolve` applies — and complains about an explicit
choice only where the user made one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from gpucluster.config.checks.compute.node_group import (
    GroupCheck,
    check_addresses,
    check_capacity,
    check_efa,
    check_instance_type,
    check_placement,
    check_public_ip,
    check_scheduler,
    check_sizes,
    check_subnets,
    check_tag_count,
    check_zones,
)
from gpucluster.config.checks.deploy import (
    check_capacity_block_start,
    check_cluster_tags,
    check_duplicate_names,
    check_group_kms,
    check_group_names,
    check_group_tags,
    check_head_kms,
    check_lustre_zone,
    check_region,
    check_secrets_kms,
    check_storage_kms,
    check_workload_read,
)
from gpucluster.config.checks.hybrid import check_hybrid
from gpucluster.config.checks.images import check_hooks, check_image_pinned
from gpucluster.config.checks.kubernetes import check_kubernetes
from gpucluster.config.checks.monitoring import check_monitoring
from gpucluster.config.checks.network import check_flow_logs, check_network
from gpucluster.config.checks.slurm import check_slurm
from gpucluster.config.checks.storage import check_storage
from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.errors import Finding, group_path
from gpucluster.facts.catalog import Catalog

GROUP_CHECKS: tuple[GroupCheck, ...] = (
    check_scheduler,
    check_instance_type,
    check_efa,
    check_zones,
    check_subnets,
    check_placement,
    check_capacity,
    check_sizes,
    check_public_ip,
    check_addresses,
    check_tag_count,
    check_group_tags,
    check_group_kms,
    check_group_names,
    check_capacity_block_start,
    check_image_pinned,
)


ClusterCheck = Callable[[ClusterSpec, Catalog], Iterable[Finding]]
CLUSTER_CHECKS: list[ClusterCheck] = [
    check_region,
    check_duplicate_names,
    check_cluster_tags,
    check_network,
    check_flow_logs,
    check_lustre_zone,
    check_storage,
    check_workload_read,
    check_storage_kms,
    check_slurm,
    check_hooks,
    check_head_kms,
    check_kubernetes,
    check_secrets_kms,
    check_hybrid,
    check_monitoring,
]


# The checks that need nothing but the node group itself: what a GpuNodeGroup used on its own runs.
STANDALONE_CHECKS: tuple[GroupCheck, ...] = (
    check_instance_type,
    check_efa,
    check_placement,
    check_capacity,
    check_sizes,
    check_group_tags,
    check_group_kms,
    check_group_names,
    check_capacity_block_start,
)


def validate_node_group(group: NodeGroupSpec, catalog: Catalog, path: str = "node_group") -> list[Finding]:
    """Findings for one node group outside any cluster (paths start with ``path``)."""
    from gpucluster.config.network import NetworkSpec

    context = ClusterSpec.model_construct(name="standalone", region="", network=NetworkSpec(), node_groups=(group,), tags={})
    facts = catalog.get(group.instance_type)
    out: list[Finding] = []
    for check in STANDALONE_CHECKS:
        for f in check(0, group, facts, context, catalog):
            out.append(replace(f, path=f.path.replace(group_path(0), path, 1)))
    return out


def validate_cluster(spec: ClusterSpec, catalog: Catalog) -> list[Finding]:
    """Every finding for ``spec`` (errors and warnings), in config order."""
    findings: list[Finding] = []
    for check in CLUSTER_CHECKS:
        findings.extend(check(spec, catalog))
    for i, group in enumerate(spec.node_groups):
        facts = catalog.get(group.instance_type)
        for group_check in GROUP_CHECKS:
            findings.extend(group_check(i, group, facts, spec, catalog))
    return findings
