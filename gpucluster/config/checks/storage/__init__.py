"""Storage validators (pure), the sizing they rely on, and storage resolution."""

from __future__ import annotations

from collections.abc import Iterator

from gpucluster.config.checks.storage.access import check_admin_host, check_root_squash
from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.effective import effective_efa, lustre_groups, lustre_zone, storage_sizing
from gpucluster.config.errors import Finding, error, warning
from gpucluster.config.storage import LustreSpec, StorageSpec, WorkloadSpec
from gpucluster.config.storage.sizing import (
    EFA_STEP_GIB,
    MAX_DATA_REPOSITORIES,
    METADATA_IOPS,
    TIERS,
    metadata_iops_for,
    nearest_capacities,
    valid_capacity,
)
from gpucluster.facts.catalog import Catalog

LUSTRE = "gpucluster:storage.lustre"
GDS_TYPES_HINT = "p5.48xlarge, p5e.48xlarge, p5en.48xlarge, p6-b200.48xlarge"


def check_storage(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    storage: StorageSpec | None = getattr(spec, "storage", None)
    if storage is None:
        return
    group_names = [g.name for g in spec.node_groups]
    if storage.lustre is not None:
        yield from _check_lustre(spec, catalog, storage, storage.lustre, group_names)
    if storage.nvme_scratch is not None:
        scratch = storage.nvme_scratch
        names = list(scratch.node_groups) if scratch.node_groups is not None else group_names
        for name in names:
            if name not in group_names:
                yield error(
                    "gpucluster:storage.nvmeScratch.nodeGroups",
                    f"no node group is named {name!r}",
                    f"use one of {', '.join(group_names)}",
                    name,
                    "unknown-node-group",
                )
                continue
            g = spec.node_group(name)
            facts = catalog.get(g.instance_type)
            if facts is not None and facts.nvme_disk_count == 0:
                with_nvme = [t for t in catalog if catalog[t].nvme_disk_count and catalog[t].accelerator_count]
                yield error(
                    "gpucluster:storage.nvmeScratch",
                    f"node group {name!r} runs {g.instance_type}, which has no local NVMe disks to build scratch from",
                    f"leave {name!r} out of nvmeScratch.nodeGroups, or use a type with instance storage "
                    f"({', '.join(with_nvme[:6])} …)",
                    g.instance_type,
                    "nvme-unavailable",
                )
        if storage.lustre is not None and storage.lustre.mount_point == scratch.mount_point:
            yield error(
                "gpucluster:storage.nvmeScratch.mountPoint",
                f"{scratch.mount_point} is also the Lustre mount point",
                "give NVMe scratch its own mount point, e.g. /scratch",
                scratch.mount_point,
                "mount-point-clash",
            )


def _check_lustre(
    spec: ClusterSpec, catalog: Catalog, storage: StorageSpec, fs: LustreSpec, group_names: list[str]
) -> Iterator[Finding]:
    names = lustre_groups(spec, fs)
    for name in names:
        if name not in group_names:
            yield error(
                f"{LUSTRE}.nodeGroups",
                f"no node group is named {name!r}",
                f"use one of {', '.join(group_names)}",
                name,
                "unknown-node-group",
            )
    yield from _lustre_zone(spec, fs)
    yield from check_lustre_settings(fs, storage.workload, has_bucket=storage.bucket is not None)
    yield from check_admin_host(spec, fs, LUSTRE)
    net = spec.network
    subnet_zones = sorted({s.availability_zone for s in net.subnets}) if net.vpc_id else list(spec.zones)
    if fs.availability_zone and fs.availability_zone not in subnet_zones:
        yield error(
            f"{LUSTRE}.availabilityZone",
            f"zone {fs.availability_zone!r} has no subnet of the cluster to put the file system in",
            f"use one of {', '.join(subnet_zones)}, or add the zone to network.availabilityZones"
            + (" and network.subnets" if net.vpc_id else ""),
            fs.availability_zone,
            "file-system-zone",
        )
    yield from _lustre_clients(spec, catalog, fs, names)
    yield from _lustre_sizing(spec, catalog)


def _lustre_zone(spec: ClusterSpec, fs: LustreSpec) -> Iterator[Finding]:
    """The file system's zone has a subnet to put it in."""
    if fs.availability_zone:
        byo = bool(spec.network.vpc_id)
        zones = list(dict.fromkeys(s.availability_zone for s in spec.network.subnets)) if byo else spec.zones
        if fs.availability_zone not in zones:
            where = "network.subnets lists no subnet" if byo else "the cluster has no node group or subnet"
            yield error(
                f"{LUSTRE}.availabilityZone",
                f"{where} in {fs.availability_zone}, so the file system has no subnet to go in",
                f"use one of {', '.join(zones)}"
                + (", or list a subnet of that zone in network.subnets" if byo else "")
                + " (or leave availabilityZone out: the first Lustre node group's zone)",
                fs.availability_zone,
                "zone-without-subnet",
            )


def _lustre_clients(spec: ClusterSpec, catalog: Catalog, fs: LustreSpec, names: list[str]) -> Iterator[Finding]:
    """The node groups that mount the file system: GPUDirect Storage clients, EFA groups in its zone."""
    zone = lustre_zone(spec, fs)
    for g in spec.node_groups:
        if g.name not in names:
            continue
        facts = catalog.get(g.instance_type)
        if fs.enable_gpudirect_storage and facts is not None and not facts.gds_supported:
            yield error(
                f"{LUSTRE}.enableGpudirectStorage",
                f"node group {g.name!r} runs {g.instance_type}, which is not a GPUDirect Storage client of FSx",
                f"mount from GDS-capable types ({GDS_TYPES_HINT}), leave {g.name!r} out of lustre.nodeGroups, "
                "or set enableGpudirectStorage: false",
                g.instance_type,
                "gds-unsupported",
            )
        if effective_efa(g, facts) and zone is not None and zone not in g.availability_zones:
            yield error(
                f"{LUSTRE}.availabilityZone",
                f"the file system is in {zone} but EFA node group {g.name!r} is in {', '.join(g.availability_zones)}: "
                "EFA traffic does not cross zones and cross-zone Lustre traffic is slow and billed",
                f"put the file system in {g.availability_zones[0]}, or leave {g.name!r} out of lustre.nodeGroups",
                zone,
                "file-system-zone",
            )


def _lustre_sizing(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """The workload's sizing: a file system that falls short of it, clients that cannot take their share."""
    sizing = storage_sizing(spec, catalog)
    if sizing is not None:
        if not sizing.chosen.meets:
            yield warning(
                f"{LUSTRE}",
                f"the file system delivers {sizing.chosen.delivered_mbps:,.0f} MB/s and {sizing.chosen.capacity_gib:,} GiB; "
                f"the workload needs {sizing.required_mbps:,.0f} MB/s and {sizing.data_gib:,.0f} GiB",
                "raise throughputPerUnitStorage or storageCapacityGib, or leave them to the sizing",
                None,
                "undersized",
            )
        for c in sizing.clients:
            if c.capped:
                fix = (
                    "enable EFA on the file system (enableEfa: true) and on the node group"
                    if c.client == "plain"
                    else "enable GPUDirect Storage (enableGpudirectStorage: true)"
                    if c.client == "efa"
                    else "spread the work over more nodes"
                )
                yield warning(
                    f"{LUSTRE}",
                    f"each {c.instance_type} node of {c.node_group!r} has a {c.share_mbps:,.0f} MB/s share of the file system, "
                    f"but a {c.client} Lustre client reads at most about {c.limit_mbps:,.0f} MB/s",
                    fix,
                    None,
                    "client-limit",
                )


def check_lustre_settings(
    fs: LustreSpec,
    workload: WorkloadSpec | None,
    *,
    has_bucket: bool,
    path: str = LUSTRE,
    workload_path: str = "gpucluster:storage.workload",
) -> Iterator[Finding]:
    """The rules a Lustre section obeys on its own (tiers, capacities, EFA, backups, repositories), with
    no node group or zone to look at: the stack and a standalone ``LustreStorage`` share them, each
    naming fields its own way (``path``)."""
    yield from check_root_squash(fs, path)
    if fs.file_system_id:
        yield from _existing_file_system(fs, path)
    else:
        yield from _new_tier_and_efa(fs, path)
        yield from _new_capacity(fs, workload, path)
        yield from _new_metadata(fs, workload, path, workload_path)
        if fs.deployment_type == "SCRATCH_2" and fs.automatic_backup_retention_days:
            yield error(
                f"{path}.automaticBackupRetentionDays",
                "SCRATCH_2 file systems have no automatic backups",
                "remove automaticBackupRetentionDays or use PERSISTENT_2",
                fs.automatic_backup_retention_days,
                "scratch-backups",
            )
    yield from _data_repositories(fs, has_bucket, path)
    if fs.enable_gpudirect_storage and not fs.enable_efa:
        yield error(
            f"{path}.enableGpudirectStorage",
            "GPUDirect Storage runs over EFA: the file system must be EFA-enabled",
            "set enableEfa: true (PERSISTENT_2)",
            True,
            "gds-needs-efa",
        )


def _existing_file_system(fs: LustreSpec, path: str) -> Iterator[Finding]:
    """An existing file system (``fileSystemId``): nothing that shapes a new one may be set."""
    fixed = [k for k in ("storage_capacity_gib", "throughput_per_unit_storage", "metadata_iops") if getattr(fs, k) is not None]
    if fs.enable_efa:
        fixed.append("enable_efa")
    if fixed:
        yield error(
            f"{path}.fileSystemId",
            f"fileSystemId attaches the existing file system {fs.file_system_id}; its {', '.join(fixed)} cannot be set from here",
            "remove those fields, or remove fileSystemId to create a new file system",
            fs.file_system_id,
            "existing-file-system-settings",
        )


def _new_tier_and_efa(fs: LustreSpec, path: str) -> Iterator[Finding]:
    """A new file system's throughput tier and what EFA asks of it."""
    tiers = TIERS[fs.deployment_type]
    tier = fs.throughput_per_unit_storage
    if tier is not None and tier not in tiers:
        yield error(
            f"{path}.throughputPerUnitStorage",
            f"{tier} MB/s/TiB is not a {fs.deployment_type} throughput tier",
            f"use one of {', '.join(map(str, tiers))}"
            + (" (or deploymentType PERSISTENT_2 for 125-1000)" if fs.deployment_type != "PERSISTENT_2" else ""),
            tier,
            "invalid-tier",
        )
    if fs.enable_efa and fs.deployment_type != "PERSISTENT_2":
        yield error(
            f"{path}.enableEfa",
            f"EFA-enabled file systems must be PERSISTENT_2, not {fs.deployment_type}",
            "set deploymentType: PERSISTENT_2, or enableEfa: false",
            True,
            "efa-needs-persistent-2",
        )
    if fs.enable_efa and fs.deployment_type == "PERSISTENT_2" and not fs.metadata_configuration:
        yield error(
            f"{path}.metadataConfiguration",
            "EFA-enabled file systems need a metadata configuration",
            "set metadataConfiguration: true (automatic), or give metadataIops",
            False,
            "efa-needs-metadata",
        )


def _new_capacity(fs: LustreSpec, workload: WorkloadSpec | None, path: str) -> Iterator[Finding]:
    """A new file system's capacity: a valid step, or a workload to size it from."""
    tier = fs.throughput_per_unit_storage
    cap = fs.storage_capacity_gib
    if cap is not None and not valid_capacity(cap, tier, fs.enable_efa):
        below, above = nearest_capacities(cap, tier, fs.enable_efa)
        rule = (
            f"multiples of {EFA_STEP_GIB[tier]} GiB for an EFA-enabled {tier} MB/s/TiB file system"
            if fs.enable_efa and tier in EFA_STEP_GIB
            else "1200 GiB, then multiples of 2400 GiB"
        )
        yield error(
            f"{path}.storageCapacityGib",
            f"{cap} GiB is not a valid capacity ({rule})",
            f"use {above}" + (f" or {below}" if below else "") + " GiB",
            cap,
            "invalid-capacity",
        )
    if workload is None and (cap is None or (tier is None and fs.deployment_type != "SCRATCH_2")):
        yield error(
            f"{path}",
            "a new file system needs a size: give storage.workload to size it from, or "
            "storageCapacityGib and throughputPerUnitStorage",
            "add storage.workload (datasetSizeTib, readMbPerSecondPerGpu, checkpointSizeGib, checkpointWriteSeconds)",
            None,
            "unsized",
        )


def _new_metadata(fs: LustreSpec, workload: WorkloadSpec | None, path: str, workload_path: str) -> Iterator[Finding]:
    """A new file system's metadata IOPS, given or asked by the workload."""
    if fs.metadata_iops is not None:
        if fs.deployment_type != "PERSISTENT_2":
            yield error(
                f"{path}.metadataIops",
                f"metadata IOPS are only provisioned for PERSISTENT_2, not {fs.deployment_type}",
                "remove metadataIops",
                fs.metadata_iops,
                "metadata-iops-type",
            )
        elif fs.metadata_iops not in METADATA_IOPS:
            ok = metadata_iops_for(fs.metadata_iops)
            yield error(
                f"{path}.metadataIops",
                f"{fs.metadata_iops} is not a valid metadata IOPS setting "
                "(1500, 3000, 6000, 12000, then multiples of 12000 up to 192000)",
                f"use {ok}" if ok else "use 192000 at most",
                fs.metadata_iops,
                "invalid-metadata-iops",
            )
    if workload and workload.metadata_operations_per_second and fs.metadata_iops is None:
        if metadata_iops_for(workload.metadata_operations_per_second) is None:
            yield error(
                f"{workload_path}.metadataOperationsPerSecond",
                f"{workload.metadata_operations_per_second} metadata operations per second is above "
                "what one file system provides (192000 IOPS)",
                "split the data over several file systems",
                workload.metadata_operations_per_second,
                "metadata-too-high",
            )


def _data_repositories(fs: LustreSpec, has_bucket: bool, path: str) -> Iterator[Finding]:
    """The data repository associations: how many, and a bucket prefix only with the cluster's bucket."""
    if len(fs.data_repositories) > MAX_DATA_REPOSITORIES:
        yield error(
            f"{path}.dataRepositories",
            f"{len(fs.data_repositories)} data repository associations; a file system takes at most {MAX_DATA_REPOSITORIES}",
            "link fewer prefixes (a parent prefix covers its children)",
            len(fs.data_repositories),
            "too-many-data-repositories",
        )
    for j, repo in enumerate(fs.data_repositories):
        if repo.bucket_prefix is not None and not has_bucket:
            yield error(
                f"{path}.dataRepositories[{j}].bucketPrefix",
                "bucketPrefix refers to the cluster's data bucket, but storage.bucket is not configured",
                "add storage.bucket: {}, or give s3Path instead",
                repo.bucket_prefix,
                "no-bucket",
            )
