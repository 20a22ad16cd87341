"""Storage section of the spec: FSx for Lustre sized from the workload, a data bucket, NVMe scratch."""

from __future__ import annotations

import posixpath
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from gpucluster.config.base import FIX_MARK, SpecModel
from gpucluster.config.storage.mounts import NO_PRIVILEGE_OPTIONS, check_mount_options, check_mount_point

DeploymentType = Literal["PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2"]

MAX_NO_SQUASH_NIDS = 64
"""FSx's limit on ``NoSquashNids`` (API reference, LustreRootSquashConfiguration)."""
AUTOMATIC_NO_SQUASH_NIDS = 2
"""The most admin hosts gpucluster adds itself: the Slurm head node and the storage setup host."""
_NID_PART = re.compile(r"^(?:(?P<n>[0-9]{1,3})|\[(?P<lo>[0-9]{1,3})-(?P<hi>[0-9]{1,3})\])$")
_UID_MAX = 4294967294
TEAMS_DIRECTORY = "/teams"
"""Where the teams' directories live on the file system (from its root): :mod:`gpucluster.resolve.storage.team`."""
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


class DirectorySpec(SpecModel):
    """A directory on the file system that the storage setup host creates and keeps with this owner and mode."""

    path: str = Field(pattern=r"^/[A-Za-z0-9_./-]*$")
    """From the file system's root (``/checkpoints``): normal form, not ``/``, not ``/teams`` or under it (the teams'
    directories are made from ``kubernetes.teams``). Required."""

    owner: str = Field(default="0:0", pattern=r"^[0-9]{1,10}:[0-9]{1,10}$")
    """``UID:GID`` that own it. With root squash, root on the nodes is ``rootSquash`` (65534:65534) on the file system:
    give it that owner for jobs that run as root. Default ``0:0``."""

    mode: str = Field(default="0755", pattern=r"^0?[0-7]{3,4}$")
    """Octal permissions, e.g. ``2770`` (setgid: new files get the directory's group) or ``1777`` (anyone may create,
    only the owner removes). No setuid bit. Default ``0755``."""

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if value == "/" or posixpath.normpath(value) != value or "/../" in value + "/" or "/./" in value + "/":
            raise ValueError(f"directory path {value!r} is not a directory below the file system's root in normal form."
                             f"{FIX_MARK}write it without '.', '..', '//' or a trailing '/', e.g. /checkpoints")  # fmt: skip
        if value == TEAMS_DIRECTORY or value.startswith(TEAMS_DIRECTORY + "/"):
            raise ValueError(f"directory path {value!r} is in {TEAMS_DIRECTORY}, which holds the teams' own directories."
                             f"{FIX_MARK}add a team to kubernetes.teams for its directory, or use another path")  # fmt: skip
        return value

    @field_validator("owner")
    @classmethod
    def _owner(cls, value: str) -> str:
        if any(int(i) > _UID_MAX for i in value.split(":")):
            raise ValueError(f"owner {value!r} is out of range.{FIX_MARK}give UID:GID, each 0 to {_UID_MAX}")
        return value

    @field_validator("mode")
    @classmethod
    def _mode(cls, value: str) -> str:
        if int(value, 8) & 0o4000:
            raise ValueError(f"mode {value!r} has the setuid bit.{FIX_MARK}leave it out (e.g. 2770 or 1777)")
        return f"{int(value, 8):o}"


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

    root_squash: str = Field(default="65534:65534", pattern=r"^[0-9]{1,10}:[0-9]{1,10}$")
    """FSx root squash, ``UID:GID``: what root on a client becomes on the file system, so a root process (a team's
    root container, a setuid program) cannot read, change or chown what it does not own. Both non-zero.
    Default ``65534:65534`` (nobody:nogroup). Admin hosts keep root: ``noSquashClients``, and the Slurm head node
    or the storage setup host, added by gpucluster."""

    no_squash_clients: tuple[str, ...] = ()
    """Lustre NIDs of further admin hosts that keep root on the file system: an address (``10.0.1.6@tcp``) or a
    range (``10.0.[2-10].[1-255]@tcp``), at most 62 (FSx takes 64; gpucluster adds the head node or the setup
    host). Every host listed is root over every team's data. Default: none."""

    unsafe_disable_root_squash: bool = False
    """Turn root squash off (``rootSquash`` 0:0): root on any client, including any container that runs as root
    on a node that mounts it, then reads and rewrites every file, every team's included. Default false."""

    data_repositories: tuple[DataRepositorySpec, ...] = ()
    """S3 data repository associations (at most 8). Default: none."""

    directories: tuple[DirectorySpec, ...] = Field(default=(), max_length=32)
    """Directories the storage setup host creates (at most 32), with their owner and mode, set again each time it
    runs, never deleted and never recursively; where users and jobs write, since root squash leaves the file
    system's root to root. Default: none."""

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

    @field_validator("root_squash")
    @classmethod
    def _root_squash(cls, value: str) -> str:
        ids = [int(x) for x in value.split(":")]
        if any(i > _UID_MAX for i in ids):
            raise ValueError(
                f"rootSquash {value!r} is out of range.{FIX_MARK}give UID:GID, each 1 to {_UID_MAX}, e.g. 65534:65534"
            )
        if 0 in ids:
            raise ValueError(
                f"rootSquash {value!r} maps root to root: FSx then does not squash root, and root on any client owns "
                f"every file.{FIX_MARK}keep the default 65534:65534 (nobody:nogroup); to turn root squash off on "
                "purpose, set unsafeDisableRootSquash: true instead"
            )
        return value

    @field_validator("no_squash_clients")
    @classmethod
    def _no_squash_clients(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        limit = MAX_NO_SQUASH_NIDS - AUTOMATIC_NO_SQUASH_NIDS
        if len(value) > limit:
            raise ValueError(
                f"noSquashClients lists {len(value)} clients; FSx takes {MAX_NO_SQUASH_NIDS} and gpucluster keeps "
                f"{AUTOMATIC_NO_SQUASH_NIDS} for its admin hosts.{FIX_MARK}list at most {limit}, or cover neighbours "
                "with a range such as 10.0.1.[10-20]@tcp"
            )
        for nid in value:
            check_nid(nid)
        if len(set(value)) != len(value):
            raise ValueError(f"noSquashClients lists a client twice.{FIX_MARK}list each NID once")
        return value

    @model_validator(mode="after")
    def _squash_or_not(self) -> LustreSpec:
        if self.unsafe_disable_root_squash and ({"root_squash", "no_squash_clients"} & self.model_fields_set):
            raise ValueError(
                "unsafeDisableRootSquash turns root squash off, so rootSquash and noSquashClients mean nothing"
                f"{FIX_MARK}remove unsafeDisableRootSquash (keeping root squash), or remove rootSquash and noSquashClients"
            )
        return self

    @field_validator("directories")
    @classmethod
    def _distinct_directories(cls, value: tuple[DirectorySpec, ...]) -> tuple[DirectorySpec, ...]:
        paths = [d.path for d in value]
        twice = sorted({p for p in paths if paths.count(p) > 1})
        if twice:
            raise ValueError(f"directory {twice[0]!r} is listed twice.{FIX_MARK}list each path once")
        return value

    @field_validator("data_repositories")
    @classmethod
    def _distinct_paths(cls, value: tuple[DataRepositorySpec, ...]) -> tuple[DataRepositorySpec, ...]:
        paths = [r.file_system_path.rstrip("/") or "/" for r in value]
        for i, a in enumerate(paths):
            for b in paths[i + 1 :]:
                if a == b or b.startswith(a + "/") or a.startswith(b + "/") or "/" in (a, b):
                    raise ValueError(f"data repository paths {a!r} and {b!r} overlap; each association needs its own directory")
        return value


def check_nid(nid: str) -> str:
    """A Lustre NID as FSx's ``NoSquashNids`` takes it (``^([0-9\\[\\]\\-]*\\.){3}([0-9\\[\\]\\-]*)@tcp$``, 11-43
    characters), and an IPv4 address or range that means something: each part 0-255 or ``[low-high]``."""
    address, at, net = nid.rpartition("@")
    parts = address.split(".")
    good = at and net == "tcp" and len(parts) == 4 and 11 <= len(nid) <= 43
    for part in parts if good else ():
        m = _NID_PART.match(part)
        if m is None or (m["n"] and int(m["n"]) > 255):
            good = False
        elif m["lo"] and not int(m["lo"]) <= int(m["hi"]) <= 255:
            good = False
    if not good:
        raise ValueError(
            f"noSquashClients entry {nid!r} is not a Lustre NID of a TCP client.{FIX_MARK}write the client's private "
            "IPv4 address followed by @tcp (10.0.1.6@tcp), each part 0-255 or a range [low-high] "
            "(10.0.[2-10].[1-255]@tcp)"
        )
    return nid


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
