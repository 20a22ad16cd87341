"""Storage section of the spec: FSx for Lustre sized from the workload, a data bucket, NVMe scratch."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from gpucluster.config.base import SpecModel
from gpucluster.config.mounts import NO_PRIVILEGE_OPTIONS, check_mount_options, check_mount_point

DeploymentType = Literal["PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2"]
ImportEvent = Literal["NEW", "CHANGED", "DELETED"]


class WorkloadSpec(SpecModel):
    """What the GPUs read and what the checkpoints write: the file system is sized from this."""

    dataset_size_tib: float = Field(gt=0)
    """Size of the training data the file system holds, TiB. Required."""

    read_mb_per_second_per_gpu: float = Field(ge=0)
    """How fast each GPU consumes data while training, MB/s (data loading). Required."""

    checkpoint_size_gib: float = Field(ge=0)
    """Size of one full checkpoint (weights + optimizer state), GiB. Required. For a model of P
    parameters trained with Adam in mixed precision that is about 14 × P bytes."""

    checkpoint_write_seconds: float = Field(gt=0)
    """How fast a checkpoint must be written, seconds. Required: GPUs stall for this long."""

    checkpoints_kept: int = Field(default=3, ge=0)
    """Checkpoints kept on the file system at once. Default 3."""

    metadata_operations_per_second: int | None = Field(default=None, gt=0)
    """File opens/creates/stats per second at peak (many small files need more). Default: none —
    FSx provisions metadata IOPS automatically."""

    gpu_count: int | None = Field(default=None, gt=0)
    """GPUs reading at once. Default: the accelerators of every node group that mounts the file
    system, at maximum size."""

    free_space_fraction: float = Field(default=0.2, ge=0, lt=0.9)
    """Space kept free on top of dataset and checkpoints (Lustre slows down when full). Default 0.2."""


class DataRepositorySpec(SpecModel):
    """An S3 data repository association: a directory of the file system linked to an S3 prefix."""

    file_system_path: str = Field(pattern=r"^/[A-Za-z0-9_./-]*$")
    """Directory on the file system, e.g. ``/datasets``. Required."""

    s3_path: str | None = Field(default=None, pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$")
    """``s3://bucket/prefix/`` to link. Give this or ``bucketPrefix``."""

    bucket_prefix: str | None = None
    """A prefix of the cluster's own data bucket (``storage.bucket``), e.g. ``datasets/``."""

    import_events: tuple[ImportEvent, ...] = ("NEW", "CHANGED", "DELETED")
    """S3 changes imported automatically. Default: NEW, CHANGED, DELETED. Empty: no auto import."""

    export_events: tuple[ImportEvent, ...] = ()
    """File-system changes exported to S3 automatically (e.g. checkpoints). Default: none."""

    batch_import_metadata_on_create: bool = True
    """Import the prefix's file listing when the association is created. Default true."""

    @model_validator(mode="after")
    def _one_source(self) -> DataRepositorySpec:
        if bool(self.s3_path) == bool(self.bucket_prefix):
            raise ValueError("give exactly one of s3Path (s3://bucket/prefix/) or bucketPrefix (a prefix of storage.bucket)")
        return self


class LustreSpec(SpecModel):
    """An FSx for Lustre file system, new or existing."""

    file_system_id: str | None = Field(default=None, pattern=r"^fs-[0-9a-f]{8,17}$")
    """Use this existing file system instead of creating one (``fs-…``). Default: create one."""

    deployment_type: DeploymentType = "PERSISTENT_2"
    """``PERSISTENT_2`` (default: replicated, backups, metadata IOPS, EFA), ``PERSISTENT_1`` or ``SCRATCH_2``."""

    throughput_per_unit_storage: int | None = None
    """MB/s per TiB. PERSISTENT_2: 125, 250, 500, 1000; PERSISTENT_1: 50, 100, 200. Default: the cheapest
    tier that meets the workload (``storage.workload``)."""

    storage_capacity_gib: int | None = Field(default=None, gt=0)
    """Capacity, GiB: 1200, then multiples of 2400 (EFA-enabled: multiples of 4800/9600/19200/38400
    for the 1000/500/250/125 tiers). Default: sized from the workload."""

    metadata_iops: int | None = None
    """PERSISTENT_2 metadata IOPS: 1500, 3000, 6000, 12000, then multiples of 12000 up to 192000.
    Default: from ``workload.metadataOperationsPerSecond``, else automatic."""

    enable_efa: bool = False
    """EFA-enabled file system (PERSISTENT_2 only, set at creation): up to 700 Gbps per EFA client,
    1200 Gbps with GPUDirect Storage. Recommended above 10 GB/s. Default false."""

    enable_gpudirect_storage: bool = False
    """Set up GPUDirect Storage on clients that support it (P5, P5e, P5en, P6-B200); needs ``enableEfa``.
    Default false."""

    data_compression: Literal["LZ4", "NONE"] = "LZ4"
    """Compression. Default LZ4 (cheaper storage, usually faster)."""

    kms_key_id: str | None = None
    """KMS key ARN (``arn:aws:kms:<region>:<account>:key/<id>``, the cluster's region; FSx takes no
    alias) for encryption at rest. Default: a key created for the cluster (rotation on)."""

    automatic_backup_retention_days: int | None = Field(default=None, ge=0, le=90)
    """Daily automatic backups kept. Default 7 for persistent file systems (scratch ones have none);
    0 disables."""

    metadata_configuration: bool = True
    """Give a PERSISTENT_2 file system a metadata configuration (automatic, or ``metadataIops``).
    Default true; EFA-enabled file systems require it."""

    availability_zone: str | None = None
    """Zone of the file system. Default: the zone of the node groups that mount it (EFA groups must
    share it)."""

    mount_point: str = Field(default="/fsx", pattern=r"^/[A-Za-z0-9_./-]*$")
    """Where nodes mount it: an absolute path in normal form (no ``.`` or ``..``), never a system directory
    (``/etc``, ``/usr``, ``/var``, ``/home``, ``/tmp`` …), a directory the nodes' own software lives in
    (``/opt/gpucluster`` …), one under those, or a parent of one. Default ``/fsx``."""

    mount_options: str = "noatime,flock"
    """mount(8) options, comma-separated with no spaces (they go into /etc/fstab and the Kubernetes
    PersistentVolume). ``nosuid,nodev`` are always added; ``suid``, ``dev``, ``defaults``, ``exec``, ``user``,
    ``users``, ``owner`` and ``group`` are refused. Default ``noatime,flock``."""

    data_repositories: tuple[DataRepositorySpec, ...] = ()
    """S3 data repository associations (at most 8). Default: none."""

    node_groups: tuple[str, ...] | None = None
    """Node groups that mount it. Default: all."""

    @field_validator("mount_options")
    @classmethod
    def _mount_options(cls, value: str) -> str:
        return check_mount_options(value)

    @field_validator("mount_point")
    @classmethod
    def _mount_point(cls, value: str) -> str:
        return check_mount_point(value, "mountPoint")

    @field_validator("data_repositories")
    @classmethod
    def _distinct_paths(cls, value: tuple[DataRepositorySpec, ...]) -> tuple[DataRepositorySpec, ...]:
        paths = [r.file_system_path.rstrip("/") or "/" for r in value]
        for i, a in enumerate(paths):
            for b in paths[i + 1 :]:
                if a == b or b.startswith(a + "/") or a.startswith(b + "/") or "/" in (a, b):
                    raise ValueError(f"data repository paths {a!r} and {b!r} overlap; each association needs its own directory")
        return value


class BucketSpec(SpecModel):
    """An S3 bucket for datasets and checkpoints: versioned, KMS-encrypted, never public."""

    name_prefix: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9-]{2,36}$")
    """Bucket name prefix (a random suffix is added). Default: ``<cluster>-data-``."""

    noncurrent_version_days: int = Field(default=30, ge=1)
    """Days an overwritten or deleted object version is kept before it expires. Default 30."""

    abort_incomplete_upload_days: int = Field(default=7, ge=1)
    """Days after which unfinished multipart uploads are removed. Default 7."""


class NvmeScratchSpec(SpecModel):
    """The instances' local NVMe disks as one RAID 0 volume on every node."""

    mount_point: str = Field(default="/scratch", pattern=r"^/[A-Za-z0-9_./-]*$")
    """Where the RAID volume is mounted (``noatime,nosuid,nodev``), with the same rules as the Lustre
    ``mountPoint``. Default ``/scratch``."""

    filesystem: Literal["xfs", "ext4"] = "xfs"
    """File system. Default xfs."""

    node_groups: tuple[str, ...] | None = None
    """Node groups that get it. Default: all (each must have local NVMe)."""

    @field_validator("mount_point")
    @classmethod
    def _mount_point(cls, value: str) -> str:
        return check_mount_point(value, "mountPoint")


NVME_MOUNT_OPTIONS = ",".join(("noatime", *NO_PRIVILEGE_OPTIONS))
"""How the NVMe scratch volume is mounted: it holds users' files, so no setuid or device file there counts."""


class StorageSpec(SpecModel):
    """Shared and local storage. Every part is optional."""

    workload: WorkloadSpec | None = None
    """The workload the file system is sized for. Default: none (give capacity and tier yourself)."""

    lustre: LustreSpec | None = None
    """An FSx for Lustre file system. Default: none."""

    bucket: BucketSpec | None = None
    """A dataset/checkpoint bucket. Default: none."""

    nvme_scratch: NvmeScratchSpec | None = None
    """Local NVMe RAID 0 on every node. Default: none."""

    protect_data: bool = True
    """Protect file systems, buckets and keys: ``pulumi destroy`` refuses and deleting the stack
    leaves them in the account. Default true; set false only for throwaway stacks."""
