"""The user data of a ``GpuNodeGroup`` used on its own: the node bootstrap a GpuCluster's node gets, and the mount of
the shared storage the program passes (``sharedStorage: [lustre.shared_storage]``).

The bootstrap is the stack's own parts (:mod:`gpucluster.render.compute.node`): the node facts, the NCCL/EFA environment and
the EFA check; for a group with NVIDIA GPUs the health program's thresholds (``/etc/gpucluster/health.json``,
:func:`gpucluster.resolve.compute.health.health_config`, with the Lustre mount for its ``shared_fs`` check), so an operator runs
``python -m gpucluster_agents.health`` on a node as on a Slurm node. A Lustre file system is mounted by the stack's
mount script and fstab entry (``nosuid,nodev`` whatever the options say). Everything is rendered first with stand-ins
of the file system's names (as long as real ones), so a bad mount or user data over EC2's 16 KB fails at the edge,
before any resource; the launch template gets the text once the file system's names are known.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

from gpucluster.components.storage.shared_storage import SharedStorage
from gpucluster.config.base import FIX_MARK
from gpucluster.config.errors import Finding, error
from gpucluster.config.storage.mounts import check_mount_options, check_mount_point
from gpucluster.render.compute.node import LustreMount, base_bootstrap, lustre_part, user_data_title
from gpucluster.render.core import CloudConfig, WriteFile, render_cloud_config
from gpucluster.render.slurm.health import HEALTH_CONFIG
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup, with_shared_fs
from gpucluster.resolve.storage import SharedFs
from gpucluster_agents.contract.health import to_json

STAND_IN_FS = "fs-00000000000000000"


def check_storage(storage: Sequence[SharedStorage], path: str = "args.sharedStorage") -> list[Finding]:
    """What a standalone group can mount: one Lustre file system (``LustreStorage.shared_storage``) with the stack's
    mount-point and mount-option rules."""
    findings: list[Finding] = []
    lustre = [i for i, s in enumerate(storage) if s.fs_type == "lustre"]
    for i, s in enumerate(storage):
        if s.fs_type != "lustre" or s.server is None or s.mount_name is None:
            findings.append(
                error(
                    f"{path}[{i}]", f"is {s.fs_type!r} storage without a server", "pass a LustreStorage's shared_storage", s.name
                )
            )
    if len(lustre) > 1:
        findings.append(error(f"{path}[{lustre[1]}]", "is a second Lustre file system", "mount one file system per node group"))
    for i in lustre:
        for field, value, check in (
            ("mountPoint", storage[i].mount_point, lambda v: check_mount_point(v, "mountPoint")),
            ("mountOptions", storage[i].mount_options, check_mount_options),
        ):
            try:
                check(str(value))
            except ValueError as exc:  # the stack's own rules (gpucluster.config.storage.mounts), with the field's path
                message, _, fix = str(exc).partition(FIX_MARK)
                findings.append(error(f"{path}[{i}].{field}", message, fix, value))
    return findings


def _config(cluster: str, group: ResolvedNodeGroup, lustre: SharedStorage | None, names: Sequence[str]) -> CloudConfig:
    """The node's parts: the bootstrap, the health thresholds (NVIDIA GPUs) and the Lustre mount (``names``: the file
    system's DNS name, mount name and id, real or stand-ins)."""
    config = base_bootstrap(cluster, group)
    # the health checks expect the Lustre file system passed in (a group of your own mounts nothing else)
    group = with_shared_fs(group, SharedFs(lustre.mount_point, "lustre") if lustre is not None else None)
    if group.health is not None:
        config += CloudConfig(
            write_files=(WriteFile.compressed(HEALTH_CONFIG, to_json(group.health)),), sections=("health config",)
        )
    if lustre is not None:
        mount = LustreMount(
            file_system=names[2] or STAND_IN_FS,
            dns_name=names[0],
            mount_name=names[1],
            mount_point=lustre.mount_point,
            mount_options=lustre.mount_options,
            efa=lustre.efa_enabled,
        )
        config += lustre_part(mount, group)
    return config


def check_bootstrap(cluster: str, group: ResolvedNodeGroup, storage: Sequence[SharedStorage], region: str) -> None:
    """Render the user data with stand-ins as long as the real names: raises ``ValueError`` when EC2 would refuse it."""
    lustre = storage[0] if storage else None
    names = (f"{STAND_IN_FS}.fsx.{region}.amazonaws.com", "xxxxxxxx", STAND_IN_FS)
    render_cloud_config(user_data_title(cluster, group), _config(cluster, group, lustre, names), gzipped=True)


def node_bootstrap(cluster: str, group: ResolvedNodeGroup, storage: Sequence[SharedStorage]) -> pulumi.Output[str]:
    """The group's user data (plain cloud-config; the launch template gzips it), once the file system's names are known."""
    lustre = storage[0] if storage else None

    def text(names: list[str]) -> str:
        return render_cloud_config(user_data_title(cluster, group), _config(cluster, group, lustre, names), gzipped=True)

    if lustre is None:
        return pulumi.Output.from_input(text(["", "", ""]))
    return pulumi.Output.all(lustre.server, lustre.mount_name, lustre.file_system_id or "").apply(
        lambda v: text([str(x) for x in v])
    )
