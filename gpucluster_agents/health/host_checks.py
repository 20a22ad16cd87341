# pyright: strict
"""The node's other hardware and mounts: EFA devices and the shared file system.

EFA: every RDMA device under ``/sys/class/infiniband`` whose driver is ``efa`` counts; the count must be
the number of EFA interfaces the launch template attached (p5: 32). Where libfabric's ``fi_info`` is on
the PATH, the EFA provider must list the same devices (a device the kernel sees but libfabric cannot
open fails NCCL just the same). A missing device is a ``reboot``: the driver or an interface did not
come up; the agent replaces the node if it comes back.

Shared file system: the mount point must be mounted with the expected type (``lustre``; the NVMe RAID
volume's ``xfs``/``ext4`` on nodes without Lustre) in ``/proc/mounts``; jobs that write checkpoints to a
missing mount fill the root disk instead. An automount that nothing has read since boot (``autofs``) is
read once, which mounts it, before judging.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from ..contract.health import HealthConfig
from .verdict import Check, failed, passed, skipped


def efa_devices(sysfs_root: str) -> list[str]:
    """Names of RDMA devices bound to the efa driver (``rdmap16s27``…), sorted."""
    base = os.path.join(sysfs_root, "class", "infiniband")
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    found: list[str] = []
    for name in names:
        driver = os.path.join(base, name, "device", "driver")
        try:
            if os.path.basename(os.path.realpath(driver)) == "efa" and os.path.exists(driver):
                found.append(name)
        except OSError:
            continue
    return found


_DOMAIN_RE = re.compile(r"^\s*domain:\s*(\S+)", re.M)


def fi_info_devices(timeout: float) -> tuple[list[str] | None, str]:
    """Devices the libfabric EFA provider lists (``fi_info -p efa``), or None with why when not run."""
    exe = shutil.which("fi_info")
    if exe is None:
        return None, "fi_info not installed"
    try:
        proc = subprocess.run([exe, "-p", "efa"], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return [], f"fi_info -p efa did not finish in {timeout:.0f} s"
    except OSError as exc:
        return None, f"fi_info: {exc}"
    if proc.returncode != 0:
        return [], f"fi_info -p efa exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[:80]}"
    # one entry per endpoint type: rdmap16s27-rdm, rdmap16s27-dgrm -> rdmap16s27
    domains = {re.sub(r"-(rdm|dgrm)$", "", d) for d in _DOMAIN_RE.findall(proc.stdout)}
    return sorted(domains), "fi_info -p efa"


def check_efa(cfg: HealthConfig, timeout: float = 10.0) -> Check:
    want = cfg.efa_count
    if want == 0:
        return skipped("efa", "no EFA expected on this node", threshold=0)
    devices = efa_devices(cfg.sysfs_root)
    value: dict[str, object] = {"sysfs": len(devices)}
    if len(devices) < want:
        return failed("efa", "reboot", value, want, f"{len(devices)} of {want} EFA devices in sysfs")
    listed, source = fi_info_devices(timeout)
    if listed is None:
        return passed("efa", value, want, f"{source}: sysfs only")
    value["fi_info"] = len(listed)
    if len(listed) < want:
        return failed("efa", "reboot", value, want, f"{len(listed)} of {want} EFA devices in {source}")
    return passed("efa", value, want)


def _unescape(field: str) -> str:
    """/proc/mounts writes space, tab, newline and backslash as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _mounted_at(mounts_file: str, mount: str) -> list[list[str]]:
    with open(mounts_file, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    return [line.split() for line in lines if len(line.split()) >= 3 and _unescape(line.split()[1]) == mount.rstrip("/")]


def _trigger_automount(mount: str) -> None:
    try:
        os.listdir(mount)
    except OSError:
        pass  # not mounted: the second read still shows autofs, and the check says so


def check_shared_fs(cfg: HealthConfig) -> Check:
    mount = cfg.shared_fs_mount
    threshold = f"{cfg.shared_fs_type} at {mount}" if mount else None
    if not mount:
        return skipped("shared_fs", "no shared file system configured")
    try:
        at = _mounted_at(cfg.mounts_file, mount)
        if at and at[-1][2] == "autofs":
            # fstab's x-systemd.automount (the Lustre entry has it): after a reboot the file system is
            # mounted on first access, so touch it once, as a job would, and read the table again.
            _trigger_automount(mount)
            at = _mounted_at(cfg.mounts_file, mount)
    except OSError as exc:
        return skipped("shared_fs", f"{cfg.mounts_file}: {exc.strerror}", threshold=threshold)
    if not at:
        return failed("shared_fs", "reboot", None, threshold, f"{mount} not mounted")
    fstype = at[-1][2]  # the last mount on a path is the one in effect
    if fstype != cfg.shared_fs_type:
        return failed("shared_fs", "reboot", fstype, threshold, f"{mount} is {fstype}, not {cfg.shared_fs_type}")
    return passed("shared_fs", f"{fstype} {at[-1][0]}", threshold)
