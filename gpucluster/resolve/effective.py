"""Effective values: what an optional ("let gpucluster choose") field stands for.

Shared by the validators (which judge explicit choices only) and resolution (which applies them).
"""

from __future__ import annotations

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.node_group import NodeGroupSpec
from gpucluster.facts.catalog import InstanceFacts


def effective_efa(group: NodeGroupSpec, facts: InstanceFacts | None) -> bool:
    if group.enable_efa_support is not None:
        return group.enable_efa_support
    return bool(facts and facts.efa_supported)


def effective_placement_group(group: NodeGroupSpec, facts: InstanceFacts | None) -> bool:
    if group.create_placement_group is not None:
        return group.create_placement_group
    if group.placement_group_name or len(group.availability_zones) != 1:
        return False
    if facts is not None and not facts.supports_cluster_placement:
        return False
    return effective_efa(group, facts) and group.capacity.type in ("on-demand", "spot")


def effective_scheduler(group: NodeGroupSpec, spec: ClusterSpec) -> str:
    if group.scheduler is not None:
        return group.scheduler
    return spec.schedulers[0] if len(spec.schedulers) == 1 else "none"


def effective_desired(group: NodeGroupSpec) -> int:
    return group.min_size if group.desired_size is None else group.desired_size


def effective_protect_data(spec: ClusterSpec) -> bool:
    """Whether the cluster's data (and the keys and logs that go with it) is protected and retained:
    ``storage.protectData``, true when there is no storage section."""
    return spec.storage.protect_data if spec.storage is not None else True


def effective_flow_log_protect(spec: ClusterSpec) -> bool:
    flow_logs = spec.network.flow_logs
    return flow_logs.protect if flow_logs.protect is not None else effective_protect_data(spec)
