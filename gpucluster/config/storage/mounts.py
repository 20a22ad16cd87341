"""Where and how storage is mounted on a node: the one place for the mount-point and mount-option rules.

A file system mounted over a directory a node runs programs from as root (``/usr/local/sbin``, ``/etc``,
``/opt/gpucluster`` …) hands whoever can write that file system root on every node that mounts it: the next
boot step or agent run executes their file. And a file on shared storage must never carry privilege: every
Lustre client mount (fstab on Slurm, plain and hybrid nodes and the head node, the FSx CSI driver's
PersistentVolumes) and the NVMe scratch mount get ``nosuid,nodev``, and the options that undo them or let
users mount and unmount are refused when the config is loaded.
"""

from __future__ import annotations

import posixpath

from gpucluster.config.base import FIX_MARK, MOUNT_OPTION_RE
from gpucluster.config.hybrid.access import check_abs_path

SYSTEM_DIRECTORIES = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/snap",
    "/sys",
    "/tmp",
    "/usr",
    "/var",
)
"""The operating system's own directories. ``/home`` is one of them today: the default user's home (its SSH keys,
Session Manager's ``ssm-user``) lives there and a mount would hide it; shared home directories need a directory per
user created by an admin host, which is a later change, not a mount point. ``/tmp`` holds every service's
node-local temporary files; ``/snap`` holds Ubuntu's snaps (the SSM agent is one)."""

INSTALL_DIRECTORIES = (
    "/opt/amazon",  # the EFA installer's libfabric and fi_info, which the EFA check runs as root
    "/opt/aws",  # AWS agents and the Neuron SDK
    "/opt/dlami",  # the Deep Learning AMI's instance-store mount
    "/opt/gpucluster",  # the node agent package (render.slurm.names.AGENT_LIB / AGENT_BIN)
    "/opt/nccl-tests",  # the health program's deep checks (gpucluster_agents.health.deep_checks)
    "/srv/slurm",  # the head node's data volume: slurmctld state, the agent's journal (render.slurm.names.DATA_DIR)
)
"""Directories the project or the images it boots install into outside :data:`SYSTEM_DIRECTORIES` (gpucluster's
own files under ``/usr/local/sbin``, ``/etc/gpucluster`` and ``/var/lib/gpucluster`` are covered there)."""

PROTECTED_DIRECTORIES = SYSTEM_DIRECTORIES + INSTALL_DIRECTORIES

MOUNT_POINT_EXAMPLE = "/fsx"

NO_PRIVILEGE_OPTIONS = ("nosuid", "nodev")
"""What every client mount of shared storage (and the NVMe scratch mount) carries, whatever the config says."""

FORBIDDEN_OPTIONS = {
    "suid": "runs setuid and setgid files with their owner's rights, so a root-owned setuid file on it is root on the node",
    "dev": "opens device files on it, so a device node written there reaches the node's disks and memory",
    "defaults": "means rw,suid,dev,exec,auto,nouser,async: it turns setuid files and device files back on",
    "exec": "only matters to undo the noexec of user, users, owner or group, which are refused",
    "user": "lets any user mount it (and the user who mounted it unmount it)",
    "users": "lets any user mount and unmount it, e.g. unmount it under running jobs",
    "owner": "lets the owner of the device mount it",
    "group": "lets members of the device's group mount it",
}
"""Options refused in ``mountOptions``: each undoes ``nosuid``/``nodev`` or hands mounting to users."""


def check_mount_point(value: str, field: str) -> str:
    """A mount point is a plain absolute path in normal form (no ``.``, ``..``, ``//`` or trailing ``/``), and never
    a protected directory, a directory under one, or a parent of one (which would hide it)."""
    check_abs_path(value, field)
    if posixpath.normpath(value) != value or any(part in (".", "..") for part in value.split("/")):
        raise ValueError(
            f"{field} {value!r} is not in normal form: '.', '..', '//' or a trailing '/' make the directory "
            f"something other than it reads.{FIX_MARK}write the directory itself, without '.' or '..' "
            f"(e.g. {MOUNT_POINT_EXAMPLE})"
        )
    for protected in PROTECTED_DIRECTORIES:
        if value == protected or value.startswith(protected + "/"):
            where = "is" if value == protected else f"is under {protected}, which is"
            raise ValueError(
                f"{field} {value!r} {where} a directory nodes run or keep their own files in: a file system mounted "
                f"there hides them, and whoever writes the file system replaces what runs as root from it."
                f"{FIX_MARK}mount it at a directory of its own, e.g. {MOUNT_POINT_EXAMPLE}"
            )
        if value == "/" or protected.startswith(value + "/"):
            raise ValueError(
                f"{field} {value!r} is a parent of {protected}, which nodes run or keep their own files in: a file "
                f"system mounted there hides it.{FIX_MARK}mount it at a directory of its own, e.g. {MOUNT_POINT_EXAMPLE}"
            )
    return value


def check_mount_options(value: str) -> str:
    """mount(8) options: ``noatime,flock``, ``name=value`` pairs, no blanks or empty entries, and none that give
    files on the file system privilege or let users mount it (:data:`FORBIDDEN_OPTIONS`)."""
    for option in value.split(","):
        if not MOUNT_OPTION_RE.fullmatch(option):
            raise ValueError(
                f"mount option {option!r} in {value!r} is not a mount option (it would break the /etc/fstab line)."
                f"{FIX_MARK}separate options with ',' and no spaces, each a name or name=value of letters, digits "
                "and '_.+-' (e.g. noatime,flock)"
            )
        name = option.split("=", 1)[0]
        if name in FORBIDDEN_OPTIONS:
            raise ValueError(
                f"mount option {option!r} in {value!r} is refused: it {FORBIDDEN_OPTIONS[name]}. gpucluster mounts "
                f"shared storage {','.join(NO_PRIVILEGE_OPTIONS)}.{FIX_MARK}remove {option!r} (e.g. noatime,flock)"
            )
    return value


def client_mount_options(options: str) -> str:
    """``options`` with :data:`NO_PRIVILEGE_OPTIONS` added where missing, last, so they win over anything before
    them (mount(8) applies options left to right). Every renderer of a client mount goes through here."""
    parts = [o for o in options.split(",") if o]
    return ",".join(parts + [o for o in NO_PRIVILEGE_OPTIONS if o not in parts])
