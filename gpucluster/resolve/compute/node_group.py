"""One node group resolved as a type: every choice made, stated without Optional.

:func:`resolve_group` fills the spec's "let gpucluster choose" fields (the spec keeps its Optional types);
:func:`resolve_node_group` states the decisions as a :class:`ResolvedNodeGroup` and carries the facts they
came from (the instance's catalog entry, its interface layout, its NCCL environment, what it mounts), so
renderers and components read values instead of re-deciding them. A Slurm node group of a cluster is a
:class:`SlurmGroup`: the same type with its Slurm settings and partition added.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Literal, TypeVar

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.effective import (
    effective_desired,
    effective_efa,
    effective_placement_group,
    effective_scheduler,
    partition_of,
)
from gpucluster.config.slurm import UBUNTU_RELEASE, SlurmNodeGroupSpec
from gpucluster.config.slurm.health import nvidia_gpus
from gpucluster.config.storage import NvmeScratchSpec
from gpucluster.facts.catalog import Catalog, InstanceFacts
from gpucluster.facts.efa import InterfaceSlot, efa_interface_count, interface_layout
from gpucluster.facts.images import DEFAULT_RELEASE, default_image_parameter
from gpucluster.facts.nccl import nccl_environment
from gpucluster.facts.slurm_releases import cloud_ubuntu_for
from gpucluster.resolve.compute.health import health_config
from gpucluster.resolve.storage import SharedFs
from gpucluster_agents.contract import node_names
from gpucluster_agents.contract.health import HealthConfig

Scheduler = Literal["slurm", "kubernetes", "none"]


@dataclass(frozen=True)
class ResolvedImage:
    """Where the AMI comes from: an AMI id, or an SSM parameter read at deploy time."""

    source: Literal["ami", "ssm-parameter"]
    value: str
    locked_from: str | None = None
    """With an ``imageLock``: the SSM parameter the AMI id (``value``) was read from, once, by ``gpucluster images
    lock``; the parameter is not read again."""


@dataclass(frozen=True)
class ResolvedNodeGroup:
    """A node group after resolution: the resolved spec plus the decisions stated without Optional."""

    spec: NodeGroupSpec
    """The resolved spec (sizes, volumes, capacity, labels and tags are read from it)."""
    facts: InstanceFacts
    interfaces: tuple[InterfaceSlot, ...]
    """The launch template's interfaces, primary first (EFA cards per ``efa_layout``)."""
    scheduler: Scheduler
    desired_size: int
    efa: bool
    """EFA asked for (or chosen): the launch template's interfaces are EFA ones."""
    create_placement_group: bool
    image: ResolvedImage
    nccl_env: Mapping[str, str]
    """The NCCL/EFA environment of the group's nodes (the group's ``ncclEnv`` winning)."""
    shared_fs: SharedFs | None = None
    """What the group's nodes mount and their health checks expect: the cluster's Lustre, else the NVMe volume."""
    nvme_scratch: NvmeScratchSpec | None = None
    """The NVMe RAID volume the group's nodes build, where the cluster gives it to the group."""
    mounts_lustre: bool = False
    """The group mounts the cluster's Lustre file system."""
    health: HealthConfig | None = None
    """The health program's thresholds for the group's nodes (``/etc/gpucluster/health.json``: GPU count and model,
    PCIe, NVLink, EFA devices of the interface layout, baselines, the ``shared_fs`` mount); ``None`` without NVIDIA
    GPUs, which the health program does not check."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def instance_type(self) -> str:
        return self.spec.instance_type

    @property
    def max_size(self) -> int:
        return self.spec.max_size

    @property
    def efa_interfaces(self) -> int:
        """The EFA devices a node of the group has (the layout's EFA interfaces, not the type's maximum)."""
        return efa_interface_count(self.interfaces)

    @property
    def uses_efa(self) -> bool:
        """EFA asked for and the instance type has it."""
        return self.efa and self.facts.efa_supported


@dataclass(frozen=True, kw_only=True)
class SlurmGroup(ResolvedNodeGroup):
    """A Slurm node group of a cluster: the resolved group with its Slurm settings and partition."""

    entry: SlurmNodeGroupSpec
    """The resolved Slurm settings of the group (mode, weights, default partition …)."""
    partition: str
    """The group's partition (:func:`gpucluster.config.effective.partition_of`, the one rule)."""
    baked: bool = False
    """The group's nodes boot the image the stack bakes (``slurm.images.bake``; never a hybrid site's burst group,
    which joins the site's controller): their user data installs and downloads nothing."""
    containers: bool = False
    """The group's jobs may run containers (``slurm.containers``, the group's ``containers``): its image builds pyxis
    and enroot, and its nodes get their configuration."""

    @property
    def static(self) -> bool:
        return self.entry.mode == "static"

    @property
    def node_names(self) -> list[str]:
        return node_names(self.name, self.spec.max_size)


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


def _scheduler(value: str | None) -> Scheduler:
    if value == "slurm" or value == "kubernetes":
        return value
    return "none"


def _image(group: NodeGroupSpec, facts: InstanceFacts) -> ResolvedImage:
    if group.image_id:
        return ResolvedImage("ami", group.image_id)
    parameter = group.image_ssm_parameter or default_image_parameter(facts, DEFAULT_RELEASE)
    lock = group.image_lock
    if lock is not None:  # a lock changes only when made again (a changed imageSsmParameter is refused at load)
        return ResolvedImage("ami", lock.image_id, locked_from=lock.ssm_parameter)
    return ResolvedImage("ssm-parameter", parameter)


def _storage_of(spec: ClusterSpec | None, name: str) -> tuple[SharedFs | None, NvmeScratchSpec | None, bool]:
    """What the cluster's (resolved) storage gives group ``name``: its shared fs, its NVMe volume, its Lustre mount."""
    storage = spec.storage if spec is not None else None
    if storage is None:
        return None, None, False
    lustre = storage.lustre is not None and name in (storage.lustre.node_groups or ())
    nvme = storage.nvme_scratch if storage.nvme_scratch and name in (storage.nvme_scratch.node_groups or ()) else None
    shared: SharedFs | None = None
    if lustre and storage.lustre is not None:
        shared = SharedFs(storage.lustre.mount_point, "lustre")
    elif nvme is not None:
        shared = SharedFs(nvme.mount_point, nvme.filesystem)
    return shared, nvme, lustre


def resolve_node_group(group: NodeGroupSpec, catalog: Catalog, spec: ClusterSpec | None = None) -> ResolvedNodeGroup:
    """``group`` resolved (see :func:`resolve_group`) and stated as a :class:`ResolvedNodeGroup`. ``group`` must be
    valid; ``spec``, when given, has its storage resolved (the node groups that mount each file system listed)."""
    group = resolve_group(group, catalog, spec)
    facts = catalog[group.instance_type]
    efa = bool(group.enable_efa_support)
    shared_fs, nvme_scratch, mounts_lustre = _storage_of(spec, group.name)
    interfaces = interface_layout(facts, efa, group.efa_layout)
    health = None
    if nvidia_gpus(facts):
        health = health_config(
            facts,
            efa_count=efa_interface_count(interfaces),
            shared_fs_mount=shared_fs.mount_point if shared_fs else None,
            shared_fs_type=shared_fs.fstype if shared_fs else "lustre",
        )
    return ResolvedNodeGroup(
        spec=group,
        facts=facts,
        interfaces=interfaces,
        scheduler=_scheduler(group.scheduler),
        desired_size=effective_desired(group),
        efa=efa,
        create_placement_group=bool(group.create_placement_group),
        image=_image(group, facts),
        nccl_env=nccl_environment(facts, efa, group.nccl_env),
        shared_fs=shared_fs,
        nvme_scratch=nvme_scratch,
        mounts_lustre=mounts_lustre,
        health=health,
    )


G = TypeVar("G", bound=ResolvedNodeGroup)


def with_shared_fs(group: G, shared_fs: SharedFs | None) -> G:
    """``group`` whose nodes mount ``shared_fs`` (a file system a program passes a component, not the cluster's
    storage): its ``shared_fs`` and its health thresholds' ``shared_fs`` check both name it."""
    health = group.health
    if health is not None:
        mount, fstype = (shared_fs.mount_point, shared_fs.fstype) if shared_fs else (None, "lustre")
        health = replace(health, shared_fs_mount=mount, shared_fs_type=fstype)
    return replace(group, shared_fs=shared_fs, health=health)


def as_slurm_group(
    group: ResolvedNodeGroup, entry: SlurmNodeGroupSpec, baked: bool = False, containers: bool = False
) -> SlurmGroup:
    """``group`` with its Slurm settings (already resolved: partition and default chosen)."""
    values = {f.name: getattr(group, f.name) for f in fields(ResolvedNodeGroup)}
    return SlurmGroup(**values, entry=entry, partition=partition_of(entry), baked=baked, containers=containers)


def bakes(spec: ClusterSpec, group: str) -> bool:
    """Whether Slurm group ``group`` boots a baked image: ``slurm.images.bake``, unless the group bursts into a hybrid
    site's own controller (its nodes join that site with the site's packages)."""
    if spec.slurm is None or not spec.slurm.images.bake:
        return False
    hybrid = spec.hybrid
    if hybrid is not None and hybrid.controller is not None:
        return not (not hybrid.burst_node_groups or group in hybrid.burst_node_groups)
    return True


__all__ = [
    "ResolvedImage",
    "ResolvedNodeGroup",
    "Scheduler",
    "SlurmGroup",
    "as_slurm_group",
    "bakes",
    "resolve_group",
    "resolve_node_group",
    "slurm_release",
    "with_shared_fs",
]
