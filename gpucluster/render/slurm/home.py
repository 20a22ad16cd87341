"""The shared ``/home`` on a Slurm node: an NFS 4.1 mount of the home file system's volume (FSx for OpenZFS), with
``nosuid,nodev``, mounted before Slurm's daemons and before the users program makes homes; a node without it runs
nothing of Slurm (a drop-in ``RequiresMountsFor=/home`` on slurmd, sackd and slurmctld)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpucluster.render.core import WriteFile, render

HOME_MOUNT_SCRIPT = "/usr/local/sbin/gpucluster-mount-home"
MOUNT_TRIES = 30  # × 10 s
_SAFE = re.compile(r"^[A-Za-z0-9._/:,=-]+$")


@dataclass(frozen=True)
class HomeMount:
    """Where ``/home`` comes from: the file system's DNS name, the volume's path, and the mount's options."""

    server: str
    path: str = "/fsx/home"
    mount_point: str = "/home"
    options: str = "nfsvers=4.1,nosuid,nodev,_netdev"

    def fstab_entry(self) -> str:
        for name, value in (
            ("server", self.server),
            ("path", self.path),
            ("mount point", self.mount_point),
            ("options", self.options),
        ):
            if not _SAFE.match(value):
                raise ValueError(f"home {name} {value!r} has characters an fstab line cannot hold")
        if not {"nosuid", "nodev"} <= set(self.options.split(",")):
            raise ValueError(f"home mount options {self.options!r} lack nosuid,nodev")
        return f"{self.server}:{self.path} {self.mount_point} nfs4 {self.options} 0 0"


def home_mount_script(home: HomeMount) -> str:
    return render(
        "storage/mount-home.sh.j2",
        server=home.server,
        path=home.path,
        mount_point=home.mount_point,
        fstab_entry=home.fstab_entry(),
        tries=MOUNT_TRIES,
    )


def requires_home(unit: str, home: HomeMount) -> WriteFile:
    """A drop-in that keeps ``unit`` (slurmd, sackd, slurmctld) off until ``/home`` is mounted."""
    return WriteFile(
        f"/etc/systemd/system/{unit}.d/gpucluster-home.conf",
        f"# gpucluster: no {unit.split('.')[0]} without the shared /home.\n[Unit]\nRequiresMountsFor={home.mount_point}\n",
    )


def home_files(home: HomeMount | None, units: tuple[str, ...]) -> tuple[WriteFile, ...]:
    if home is None:
        return ()
    return (WriteFile(HOME_MOUNT_SCRIPT, home_mount_script(home), "0755"), *(requires_home(u, home) for u in units))


def home_stand_in(region: str) -> HomeMount:
    """The home mount of a compute node's user data until the file system exists: node user data is rendered before
    any resource (and sized with this stand-in, of the real name's length); SlurmCluster puts the file system's DNS
    name in its place (:func:`with_home_server`)."""
    return HomeMount(f"fs-00000000000000000.fsx.{region}.amazonaws.com")


def with_home_server(user_data: str, region: str, dns_name: str) -> str:
    """A compute node's user data with the home file system's DNS name in place of its stand-in."""
    if not _SAFE.match(dns_name):
        raise ValueError(f"home file system DNS name {dns_name!r} has characters an fstab line cannot hold")
    return user_data.replace(home_stand_in(region).server, dns_name)
