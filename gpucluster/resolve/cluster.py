"""Resolve a validated spec: fill every "let gpucluster choose" field with the value it stands for.

After this the spec is fully defaulted — components read plain values and never decide policy.
"""

from __future__ import annotations

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.effective import (
    effective_desired,
    effective_efa,
    effective_flow_log_protect,
    effective_placement_group,
    effective_scheduler,
)
from gpucluster.config.node_group import NodeGroupSpec
from gpucluster.config.slurm import UBUNTU_RELEASE
from gpucluster.facts.catalog import Catalog
from gpucluster.facts.images import DEFAULT_RELEASE, default_image_parameter
from gpucluster.facts.slurm_releases import cloud_ubuntu_for
from gpucluster.resolve.slurm import resolve_slurm
from gpucluster.resolve.storage import resolve_storage


def resolve_group(group: NodeGroupSpec, catalog: Catalog, spec: ClusterSpec | None = None) -> NodeGroupSpec:
    """``group`` with every choice made. Without ``spec`` (a group used on its own) the scheduler is ``none``."""
    facts = catalog[group.instance_type]
    scheduler = effective_scheduler(group, spec) if spec is not None else (group.scheduler or "none")
    already = (
        group.enable_efa_support is not None
        and group.desired_size is not None
        and group.create_placement_group is not None
        and bool(group.image_id or group.image_ssm_parameter)
        and group.scheduler == scheduler
    )
    if already:
        return group
    update: dict[str, object] = {
        "scheduler": scheduler,
        "desired_size": effective_desired(group),
        "enable_efa_support": effective_efa(group, facts),
        "create_placement_group": effective_placement_group(group, facts),
    }
    if group.image_id is None and group.image_ssm_parameter is None:
        release = slurm_release(spec, group) if scheduler == "slurm" and spec is not None else DEFAULT_RELEASE
        update["image_ssm_parameter"] = default_image_parameter(facts, release)
    return group.model_copy(update=update)


def slurm_release(spec: ClusterSpec, group: NodeGroupSpec) -> str:
    """The Ubuntu release of a Slurm node group's default image. Slurm nodes run the head node's release, so slurmd
    and slurmctld are one Slurm version; a hybrid site's burst nodes run the release whose archive slurmd the
    site's controller accepts (a controller none fits is refused at load: checks.hybrid_slurm)."""
    hybrid = spec.hybrid
    if hybrid is not None and hybrid.controller is not None:
        if not hybrid.burst_node_groups or group.name in hybrid.burst_node_groups:
            return cloud_ubuntu_for(hybrid.controller.slurm_version) or UBUNTU_RELEASE
    return UBUNTU_RELEASE


def resolve(spec: ClusterSpec, catalog: Catalog) -> ClusterSpec:
    """``spec`` with node-group choices made and the network's zones listed. ``spec`` must be valid."""
    groups = tuple(resolve_group(g, catalog, spec) for g in spec.node_groups)
    flow_logs = spec.network.flow_logs.model_copy(update={"protect": effective_flow_log_protect(spec)})
    network = spec.network.model_copy(update={"availability_zones": tuple(spec.zones), "flow_logs": flow_logs})
    resolved = spec.model_copy(update={"node_groups": groups, "network": network})
    resolved = resolved.model_copy(update={"storage": resolve_storage(resolved, catalog)})
    return resolved.model_copy(update={"slurm": resolve_slurm(resolved, catalog)})
