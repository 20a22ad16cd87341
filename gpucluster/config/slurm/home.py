"""The shared ``/home`` of a Slurm cluster (``gpucluster:slurm.home``): a volume of an FSx for OpenZFS file system in
the head node's zone, mounted over NFS v4.1 (``nosuid,nodev``) on head, login and compute nodes, with per-user quotas.

OpenZFS rather than EFS (no per-user quotas) or Lustre (kept for data and checkpoints): home directories are
small-file, metadata-heavy work (conda, pip, git). Valid throughputs per deployment type: FSx for OpenZFS's
CreateFileSystemOpenZFSConfiguration (``ThroughputCapacity``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpucluster.config.base import SpecModel

DeploymentType = Literal["SINGLE_AZ_1", "SINGLE_AZ_2", "SINGLE_AZ_HA_1", "SINGLE_AZ_HA_2"]
THROUGHPUTS: dict[str, tuple[int, ...]] = {
    "SINGLE_AZ_1": (64, 128, 256, 512, 1024, 2048, 3072, 4096),
    "SINGLE_AZ_HA_1": (64, 128, 256, 512, 1024, 2048, 3072, 4096),
    "SINGLE_AZ_2": (160, 320, 640, 1280, 2560, 3840, 5120, 7680, 10240),
    "SINGLE_AZ_HA_2": (160, 320, 640, 1280, 2560, 3840, 5120, 7680, 10240),
}
"""MB/s values FSx for OpenZFS accepts per deployment type."""


class HomeSpec(SpecModel):
    """``/home`` on FSx for OpenZFS, shared by every Slurm node; made when ``identity`` is set."""

    enabled: bool = True
    """Make the shared ``/home`` (with ``identity``). False: each node's own ``/home``. Default true."""

    deployment_type: DeploymentType = "SINGLE_AZ_1"
    """FSx for OpenZFS deployment type (one zone: the head node's). Default ``SINGLE_AZ_1``."""

    storage_capacity_gib: int = Field(default=128, ge=64, le=524288)
    """File system size, GiB. Default 128."""

    throughput_capacity: int = Field(default=64, ge=64, le=10240)
    """Throughput, MB/s: 64–4096 (``SINGLE_AZ_1``/``SINGLE_AZ_HA_1``) or 160–10240 (``…_2``) in the steps FSx
    accepts. Default 64."""

    default_user_quota_gib: int | None = Field(default=50, ge=1, le=524288)
    """Each declared user's quota on ``/home``, GiB (a user's ``homeQuotaGib`` wins). None: no quota. Default 50."""

    automatic_backup_retention_days: int = Field(default=7, ge=0, le=90)
    """Days FSx keeps daily backups (0: none). Default 7."""

    kms_key_id: str | None = Field(default=None, pattern=r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+$")
    """KMS key ARN for encryption at rest. Default: the account's ``aws/fsx`` key. Always encrypted."""

    protect: bool | None = None
    """Protect the file system: ``pulumi destroy`` refuses and deleting the stack leaves it. Default: the
    ``slurm.protectData`` rule (``storage.protectData``, true without a storage section)."""
