"""The one shape every file system takes when it reaches a consumer.

Storage components (``LustreStorage``, NVMe scratch) produce :class:`SharedStorage`; node-group user
data, Slurm and Kubernetes (a PersistentVolume) consume it — the idea of Cluster Toolkit's
``network_storage``. Values may be Pulumi outputs (a file system's DNS name is only known once it
exists); resolve them with ``pulumi.Output.all`` where they are rendered.

Components whose Args list file systems (``EksCluster``, ``KubernetesPlatform``) type them as this class, so
the schema analyzer describes it to other languages (hence no postponed annotations here: it evaluates
them); the component provider hands such a value over as a dict, which :func:`as_shared_storage` turns back
into this class.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi


@dataclass(frozen=True)
class SharedStorage:
    name: str
    """Short name (``fsx``, ``scratch``), unique in the cluster."""

    fs_type: str
    """``lustre`` (FSx for Lustre) or ``nvme`` (local NVMe RAID 0, per node)."""

    mount_point: str
    """Where nodes mount it, e.g. ``/fsx``."""

    mount_options: str
    """Options for mount(8) / the PersistentVolume, e.g. ``noatime,flock``."""

    server: pulumi.Input[str] | None = None
    """Lustre: the file system's DNS name. ``None`` for node-local storage."""

    mount_name: pulumi.Input[str] | None = None
    """Lustre: the mount name (``/<mount_name>`` on the server). ``None`` for node-local storage."""

    file_system_id: pulumi.Input[str] | None = None
    """FSx: the file system id (``fs-…``), for the CSI driver's volume handle."""

    capacity_gib: int | None = None
    """Size, GiB, where known (the PersistentVolume's capacity)."""

    efa_enabled: bool = False
    """Lustre: the file system is EFA-enabled; clients set up EFA before mounting."""

    @property
    def shared(self) -> bool:
        """True for file systems every node sees (not node-local scratch)."""
        return self.server is not None


def as_shared_storage(items: Sequence[SharedStorage | Mapping[str, Any]]) -> list[SharedStorage]:
    """``items`` as :class:`SharedStorage`: a Python program passes instances, the component provider (a
    TypeScript or YAML caller) dicts with the same snake_case field names."""
    return [s if isinstance(s, SharedStorage) else SharedStorage(**s) for s in items]
