"""The storage setup host's user data: mount the Lustre file system as its admin host, create the teams'
directories, power off.

A new FSx for Lustre file system's root belongs to root, mode 0755, and root squash makes root on every node
nobody there: someone must keep root to create the directories users and teams write in. In a Slurm stack that is
the head node; otherwise (and for the teams' directories) a small instance of its own, whose address is the file
system's no-squash client. It mounts with the nodes' own script (``storage/mount-lustre.sh.j2``, ``nosuid,nodev``),
so the mount it checks is the mount the nodes make.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpucluster.config.storage import TEAMS_DIRECTORY
from gpucluster.render.compute.node import LUSTRE_MOUNT_SCRIPT, LustreMount, lustre_mount_script
from gpucluster.render.core import CloudConfig, WriteFile, render
from gpucluster.resolve.storage.team import TeamDirectory

SETUP_SCRIPT = "/usr/local/sbin/gpucluster-storage-setup"
PER_BOOT_HOOK = "/var/lib/cloud/scripts/per-boot/gpucluster-storage-setup"
"""cloud-init runs what is here at every boot (its ``scripts_per_boot`` module, after ``write_files`` and the
network): starting the stopped instance runs the setup again."""
LINGER_MINUTES = 1
"""Minutes between the end of the setup and the power-off: cloud-init finishes its own steps and logs."""


def storage_setup_script(cluster: str, mount: LustreMount, directories: Sequence[TeamDirectory]) -> str:
    return render(
        "storage/storage-setup.sh.j2",
        cluster=cluster,
        file_system=mount.file_system,
        mount_point=mount.mount_point,
        mount_script=LUSTRE_MOUNT_SCRIPT,
        linger_minutes=LINGER_MINUTES,
        teams_directory=TEAMS_DIRECTORY if any(d.team for d in directories) else None,
        directories=list(directories),
    )


def storage_setup_cloud_config(cluster: str, mount: LustreMount, directories: Sequence[TeamDirectory]) -> CloudConfig:
    """Write the Lustre mount script (over TCP: the setup host has no EFA), the setup script and the per-boot hook
    that runs it."""
    hook = f"#!/bin/bash\n# gpucluster: the storage setup, at every boot.\nexec {SETUP_SCRIPT}\n"
    return CloudConfig(
        write_files=(
            WriteFile(LUSTRE_MOUNT_SCRIPT, lustre_mount_script(mount, efa=False, gds=False), "0755"),
            WriteFile(SETUP_SCRIPT, storage_setup_script(cluster, mount, directories), "0755"),
            WriteFile(PER_BOOT_HOOK, hook, "0755"),
        ),
        sections=("lustre mount (admin host)", f"directories ({len(directories)})", "power off when done"),
    )


def storage_setup_title(cluster: str) -> str:
    return f"gpucluster {cluster} / storage setup host"
