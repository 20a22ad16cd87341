"""Resolution of the storage section: the file system's node groups, zone and subnet, its admin hosts, backups,
the sizing applied, protection — stated as a :class:`ResolvedStorage` the components place."""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.effective import effective_protect_data, lustre_groups, lustre_zone, storage_sizing
from gpucluster.config.storage import LustreSpec, StorageSpec
from gpucluster.config.storage.sizing import Sizing
from gpucluster.facts.catalog import Catalog
from gpucluster.resolve.storage.team import LustreAdmins, lustre_admins_of


@dataclass(frozen=True)
class SharedFs:
    """The file system a node's health checks expect mounted (``shared_fs`` check): mount point and type."""

    mount_point: str
    fstype: str


@dataclass(frozen=True)
class ResolvedLustre:
    """The stack's FSx for Lustre file system with its placement decided."""

    spec: LustreSpec
    """The resolved file system (sizing, tier, backups, the node groups that mount it)."""
    zone: str
    """The zone it lives in (``storage.lustre.availabilityZone``, else the first zone of the groups that mount it)."""
    subnet_id: str | None
    """Your own VPC's first listed subnet in ``zone``; ``None`` when the stack creates the VPC (its private subnet
    there)."""
    admins: LustreAdmins
    """Its no-squash clients besides ``noSquashClients``: the Slurm head node, or a setup host for team directories."""


@dataclass(frozen=True)
class ResolvedStorage:
    """The storage section resolved: what the components create, and whether they keep it on delete."""

    spec: StorageSpec
    """The resolved section (the bucket and NVMe scratch as the components read them)."""
    lustre: ResolvedLustre | None
    protect: bool
    """Protected and retained on delete (``storage.protectData``, on by default)."""


def resolved_storage(spec: ClusterSpec) -> ResolvedStorage | None:
    """The storage of resolved ``spec`` (:func:`resolve_storage` applied) stated as a :class:`ResolvedStorage`."""
    storage = spec.storage
    if storage is None:
        return None
    lustre = None
    if storage.lustre is not None:
        fs = storage.lustre
        zone = fs.availability_zone
        if zone is None:  # resolve_storage chose one: a valid spec has a zone
            raise ValueError(f"cluster {spec.name!r}: no zone for the Lustre file system; set storage.lustre.availabilityZone")
        subnet = next((s.id for s in spec.network.subnets if s.availability_zone == zone), None)
        lustre = ResolvedLustre(fs, zone, subnet, lustre_admins_of(spec, fs))
    return ResolvedStorage(storage, lustre, effective_protect_data(spec))


def resolve_storage(spec: ClusterSpec, catalog: Catalog) -> StorageSpec | None:
    """The storage section with sizing applied and defaults chosen (``spec``'s groups already resolved)."""
    storage: StorageSpec | None = getattr(spec, "storage", None)
    if storage is None:
        return None
    update: dict[str, object] = {}
    if storage.lustre is not None:
        fs = storage.lustre
        sizing = storage_sizing(spec, catalog)
        update["lustre"] = resolve_lustre(
            fs, sizing, node_groups=tuple(lustre_groups(spec, fs)), availability_zone=lustre_zone(spec, fs)
        )
    if storage.nvme_scratch is not None and storage.nvme_scratch.node_groups is None:
        update["nvme_scratch"] = storage.nvme_scratch.model_copy(update={"node_groups": tuple(g.name for g in spec.node_groups)})
    return storage.model_copy(update=update)


def resolve_lustre(fs: LustreSpec, sizing: Sizing | None, **placement: object) -> LustreSpec:
    """``fs`` with the defaults the stack chooses: backups (7 days, none for scratch), the sizing's tier,
    capacity and metadata IOPS, scratch's 200 MB/s/TiB tier.

    One function for the stack and a standalone ``LustreStorage``, so both get the same file system;
    ``placement`` adds what only the stack decides (the node groups that mount it, its zone).
    """
    update: dict[str, object] = dict(placement)
    if fs.automatic_backup_retention_days is None:
        update["automatic_backup_retention_days"] = 0 if fs.deployment_type == "SCRATCH_2" else 7
    if sizing is not None:
        update["throughput_per_unit_storage"] = sizing.chosen.tier
        update["storage_capacity_gib"] = sizing.chosen.capacity_gib
        update["metadata_iops"] = sizing.metadata_iops
    elif fs.deployment_type == "SCRATCH_2" and fs.throughput_per_unit_storage is None:
        update["throughput_per_unit_storage"] = 200
    return fs.model_copy(update=update)
