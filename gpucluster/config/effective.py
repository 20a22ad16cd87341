"""Effective values: what an optional ("let gpucluster choose") field stands for.

Shared by the validators (which judge explicit choices only) and resolution (which applies them):
the node groups Slurm runs, a partition's name, what protects data, where the head node and the file
system go, and the storage sizing of a workload.
"""

from __future__ import annotations

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.slurm import SlurmNodeGroupSpec
from gpucluster.config.storage import LustreSpec, StorageSpec
from gpucluster.config.storage.sizing import (
    Mounter,
    Sizing,
    size_lustre,
)
from gpucluster.facts.catalog import Catalog, InstanceFacts


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


def burst_group_names(spec: ClusterSpec) -> tuple[str, ...]:
    """The Slurm node groups a hybrid site bursts into: those ``hybrid.burstNodeGroups`` names that are Slurm groups
    of the cluster (the checks name the others), in its order; without the list, every Slurm group, in config order.
    The one rule: the checks, the renderers (``ResolvedCluster.burst_groups``) and the components come through it."""
    slurm = [g.name for g in spec.node_groups if effective_scheduler(g, spec) == "slurm"]
    named = spec.hybrid.burst_node_groups if spec.hybrid is not None else ()
    return tuple(n for n in named if n in slurm) if named else tuple(slurm)


def effective_desired(group: NodeGroupSpec) -> int:
    return group.min_size if group.desired_size is None else group.desired_size


def effective_protect_data(spec: ClusterSpec) -> bool:
    """Whether the cluster's data (and the keys and logs that go with it) is protected and retained:
    ``storage.protectData``, true when there is no storage section."""
    return spec.storage.protect_data if spec.storage is not None else True


def effective_flow_log_protect(spec: ClusterSpec) -> bool:
    flow_logs = spec.network.flow_logs
    return flow_logs.protect if flow_logs.protect is not None else effective_protect_data(spec)


def lustre_groups(spec: ClusterSpec, lustre: LustreSpec) -> list[str]:
    names = [g.name for g in spec.node_groups]
    return list(lustre.node_groups) if lustre.node_groups is not None else names


def mounters(spec: ClusterSpec, catalog: Catalog, names: list[str]) -> list[Mounter]:
    out = []
    for g in spec.node_groups:
        facts = catalog.get(g.instance_type)
        if g.name in names and facts is not None:
            out.append(Mounter(g.name, facts, g.max_size, effective_efa(g, facts)))
    return out


def storage_sizing(spec: ClusterSpec, catalog: Catalog) -> Sizing | None:
    """The sizing of a new Lustre file system when the storage section has a workload."""
    storage: StorageSpec | None = getattr(spec, "storage", None)
    if storage is None or storage.lustre is None or storage.workload is None or storage.lustre.file_system_id:
        return None
    return size_lustre(storage.workload, storage.lustre, mounters(spec, catalog, lustre_groups(spec, storage.lustre)))


def lustre_zone(spec: ClusterSpec, lustre: LustreSpec) -> str | None:
    if lustre.availability_zone:
        return lustre.availability_zone
    names = lustre_groups(spec, lustre)
    for g in spec.node_groups:
        if g.name in names:
            return g.availability_zones[0]
    return spec.zones[0] if spec.zones else None


def slurm_groups(spec: ClusterSpec, catalog: Catalog) -> list[tuple[int, NodeGroupSpec, InstanceFacts | None]]:
    """``(index, group, facts)`` of every node group Slurm runs, in config order."""
    return [
        (i, g, catalog.get(g.instance_type)) for i, g in enumerate(spec.node_groups) if effective_scheduler(g, spec) == "slurm"
    ]


def partition_of(entry: SlurmNodeGroupSpec) -> str:
    """A Slurm node group's partition: the one its Slurm settings name, else the group's own name. The one rule:
    the checks, resolution (``SlurmGroup.partition``), the renderers and the stack's outputs all come through it."""
    return entry.partition or entry.name


def effective_protect(spec: ClusterSpec) -> bool:
    slurm = spec.slurm
    if slurm is not None and slurm.protect_data is not None:
        return slurm.protect_data
    return spec.storage.protect_data if spec.storage is not None else True


def head_zone(spec: ClusterSpec, catalog: Catalog) -> str | None:
    slurm = spec.slurm
    if slurm is None:
        return None
    if slurm.head_node.availability_zone:
        return slurm.head_node.availability_zone
    groups = slurm_groups(spec, catalog)
    if groups:
        return groups[0][1].availability_zones[0]
    return spec.zones[0] if spec.zones else None


def head_node_mounts_lustre(spec: ClusterSpec) -> bool:
    """The stack has a Slurm head node (not a site's own controller) that mounts its Lustre file system: that head node
    is the file system's admin host, a no-squash client."""
    slurm, hybrid, storage = spec.slurm, spec.hybrid, spec.storage
    if slurm is None or storage is None or storage.lustre is None:
        return False
    return (hybrid is None or hybrid.controller is None) and slurm.head_node.mount_shared_storage
