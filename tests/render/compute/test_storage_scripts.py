"""The node-side storage scripts, run for real against stand-in commands and a fake sysfs.

There are no NVMe disks, EFA devices or Lustre servers here, so mdadm, mkfs, mount, lnetctl and
friends are replaced by stubs on PATH that record how they were called; the scripts' own logic
(disk discovery, array reuse, fstab, EFA fallback) runs unchanged.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.storage import NvmeScratchSpec
from gpucluster.facts.catalog import load_catalog
from gpucluster.render.compute.node import LustreMount, lustre_part, nvme_scratch_part
from gpucluster.resolve.compute.node_group import resolve_node_group
from tests.conftest import require_tool

CATALOG = load_catalog()


def stubs(tmp: Path, names: dict[str, str]) -> Path:
    """Executables that append their argv to calls.log, then run ``body``."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in names.items():
        path = bin_dir / name
        path.write_text(f'#!/bin/bash\necho "{name} $*" >> {tmp}/calls.log\n{body}\n')
        path.chmod(0o755)
    return bin_dir


def run(script: str, tmp: Path, bin_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    path = tmp / "script.sh"
    path.write_text(script)
    full_env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "GPUCLUSTER_LOG": str(tmp / "log"), **env}
    return subprocess.run([require_tool("bash"), str(path)], env=full_env, capture_output=True, text=True, timeout=60)


def calls(tmp: Path) -> list[str]:
    log = tmp / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def fake_nvme(sys_dir: Path, instance_disks: int, ebs: int = 1) -> None:
    for i in range(ebs + instance_disks):
        dev = sys_dir / "block" / f"nvme{i}n1" / "device"
        dev.mkdir(parents=True)
        model = "Amazon Elastic Block Store" if i < ebs else "Amazon EC2 NVMe Instance Storage"
        (dev / "model").write_text(model + "\n")


def nvme_script(itype: str = "p5.48xlarge") -> str:
    part = nvme_scratch_part(NvmeScratchSpec(), CATALOG[itype])
    return part.write_files[0].content


NVME_STUBS = {"mountpoint": "exit 1", "mdadm": "", "blkid": "exit 2", "mkfs.xfs": "", "mount": "", "chmod": ""}


def test_nvme_builds_raid0_over_instance_store_only(tmp_path):
    fake_nvme(tmp_path / "sys", instance_disks=8)
    result = run(
        nvme_script(), tmp_path, stubs(tmp_path, NVME_STUBS), GPUCLUSTER_SYS=str(tmp_path / "sys"), GPUCLUSTER_DEV="/dev"
    )
    assert result.returncode == 0, result.stderr
    log = calls(tmp_path)
    create = next(c for c in log if c.startswith("mdadm --create"))
    assert "--level=0 --raid-devices=8" in create
    assert "/dev/nvme0n1" not in create  # the EBS root volume is left alone
    assert all(f"/dev/nvme{i}n1" in create for i in range(1, 9))
    assert "mkfs.xfs /dev/md/gpucluster-scratch" in log
    assert "mount -o noatime,nosuid,nodev /dev/md/gpucluster-scratch /scratch" in log  # users' files: no privilege


def test_nvme_reuses_an_existing_array_after_reboot(tmp_path):
    sys_dir = tmp_path / "sys"
    fake_nvme(sys_dir, instance_disks=8)
    (sys_dir / "block" / "md127" / "slaves" / "nvme1n1").mkdir(parents=True)
    result = run(nvme_script(), tmp_path, stubs(tmp_path, {**NVME_STUBS, "blkid": "echo xfs"}), GPUCLUSTER_SYS=str(sys_dir))
    assert result.returncode == 0, result.stderr
    log = calls(tmp_path)
    assert not any(c.startswith("mdadm") for c in log) and not any(c.startswith("mkfs") for c in log)
    assert "mount -o noatime,nosuid,nodev /dev/md127 /scratch" in log


def test_nvme_without_disks_does_nothing(tmp_path):
    fake_nvme(tmp_path / "sys", instance_disks=0)
    result = run(nvme_script(), tmp_path, stubs(tmp_path, NVME_STUBS), GPUCLUSTER_SYS=str(tmp_path / "sys"))
    assert result.returncode == 0
    assert [c for c in calls(tmp_path) if not c.startswith("mountpoint")] == []
    assert "no instance-store NVMe disks found (expected 8)" in (tmp_path / "log" / "nvme-raid.log").read_text()


def lustre_script(efa: bool, gds: bool = False, itype: str = "p5.48xlarge") -> str:
    g = resolve_node_group(NodeGroupSpec(name="g", instance_type=itype, availability_zones=("us-east-1a",), max_size=1), CATALOG)
    mount = LustreMount("fs-0abc", "fs-0abc.fsx.us-east-1.amazonaws.com", "abcdefgh", "/fsx", "noatime,flock", efa=efa, gds=gds)
    return lustre_part(mount, g).write_files[0].content


LUSTRE_STUBS = {"mount.lustre": "", "mount": "", "modprobe": "", "lnetctl": "", "sleep": ""}


def test_lustre_mount_writes_fstab_and_mounts(tmp_path):
    fstab = tmp_path / "fstab"
    fstab.write_text("LABEL=root / ext4 defaults 0 1\n")
    result = run(lustre_script(efa=False), tmp_path, stubs(tmp_path, LUSTRE_STUBS), GPUCLUSTER_FSTAB=str(fstab))
    assert result.returncode == 0, result.stderr
    lines = fstab.read_text().splitlines()
    assert lines[1] == (
        "fs-0abc.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh /fsx lustre noatime,flock,nosuid,nodev,_netdev,"
        "x-systemd.automount,x-systemd.requires=network.service 0 0"
    )
    assert "mount /fsx" in calls(tmp_path) and not any(c.startswith("lnetctl") for c in calls(tmp_path))
    again = run(lustre_script(efa=False), tmp_path, stubs(tmp_path, LUSTRE_STUBS), GPUCLUSTER_FSTAB=str(fstab))
    assert again.returncode == 0 and len(fstab.read_text().splitlines()) == 2  # idempotent


def test_lustre_over_efa_adds_an_lnet_efa_network(tmp_path):
    sys_dir = tmp_path / "sys"
    for dev in ("rdmap16s27", "rdmap32s27"):
        (sys_dir / "class" / "infiniband" / dev).mkdir(parents=True)
    bin_dir = stubs(tmp_path, {**LUSTRE_STUBS, "modinfo": "echo 2.13.0"})
    result = run(
        lustre_script(efa=True, gds=True),
        tmp_path,
        bin_dir,
        GPUCLUSTER_FSTAB=str(tmp_path / "fstab"),
        GPUCLUSTER_SYS=str(sys_dir),
    )
    assert result.returncode == 0, result.stderr
    log = calls(tmp_path)
    assert "lnetctl net add --net efa --if rdmap16s27,rdmap32s27 --peer-credits 32" in log
    assert "modprobe nvidia_fs" in log  # GPUDirect Storage on a GDS-capable p5


def test_old_efa_driver_falls_back_to_tcp(tmp_path):
    (tmp_path / "sys" / "class" / "infiniband" / "rdmap16s27").mkdir(parents=True)
    bin_dir = stubs(tmp_path, {**LUSTRE_STUBS, "modinfo": "echo 2.10.0"})
    result = run(
        lustre_script(efa=True), tmp_path, bin_dir, GPUCLUSTER_FSTAB=str(tmp_path / "fstab"), GPUCLUSTER_SYS=str(tmp_path / "sys")
    )
    assert result.returncode == 0, result.stderr
    assert not any(c.startswith("lnetctl") for c in calls(tmp_path)) and "mount /fsx" in calls(tmp_path)
    assert "older than 2.12.1" in (tmp_path / "log" / "lustre.log").read_text()


def test_no_efa_or_gds_for_clients_that_lack_them():
    assert "configure_efa" not in lustre_script(efa=True, itype="g6e.xlarge")  # no EFA on the node
    p4d = lustre_script(efa=True, gds=True, itype="p4d.24xlarge")
    assert "configure_efa" in p4d and "configure_gds" not in p4d  # EFA yes, GDS no (not a GDS client)


def test_mount_failure_is_reported(tmp_path):
    bin_dir = stubs(tmp_path, {**LUSTRE_STUBS, "mount": "exit 32"})
    result = run(lustre_script(efa=False), tmp_path, bin_dir, GPUCLUSTER_FSTAB=str(tmp_path / "fstab"))
    assert result.returncode == 1
    assert sum(c == "mount /fsx" for c in calls(tmp_path)) == 10


@pytest.mark.parametrize("script", [nvme_script(), lustre_script(True, True)])
def test_scripts_parse(script, tmp_path):
    path = tmp_path / "s.sh"
    path.write_text(script)
    assert subprocess.run([require_tool("bash"), "-n", str(path)], capture_output=True).returncode == 0


def test_fstab_line_keeps_every_value_in_its_field(tmp_path):
    """Defence in depth: blanks, '#', '\\' and newlines in the values are written as fstab's
    octal escapes, so util-linux reads back one line of six fields with the values intact."""
    from gpucluster.render.compute.node import lustre_fstab_entry

    hostile = LustreMount("fs-0abc", "fs.example.com", "abc", "/fsx dir#1", "noatime, flock\n/dev/x / xfs defaults 0 0\\")
    line = lustre_fstab_entry(hostile)
    assert "\n" not in line and len(line.split()) == 6
    fstab = tmp_path / "fstab"
    fstab.write_text(line + "\n")
    out = subprocess.run(
        [require_tool("findmnt"), "--fstab", "--tab-file", str(fstab), "-J", "-o", "SOURCE,TARGET,FSTYPE,OPTIONS"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    import json

    (entry,) = json.loads(out)["filesystems"]
    assert entry["source"] == "fs.example.com@tcp:/abc" and entry["target"] == "/fsx dir#1" and entry["fstype"] == "lustre"
    assert entry["options"].startswith("noatime, flock\n/dev/x / xfs defaults 0 0\\,nosuid,nodev,_netdev,")


@pytest.mark.parametrize("options", ["noatime,flock", "", "noatime,suid,dev", "nosuid,noatime"])
def test_fstab_line_is_nosuid_nodev_as_libmount_reads_it(options, tmp_path):
    """Whatever the options given (the load refuses suid and dev; a program passing them to a component still
    gets nosuid,nodev last, and mount(8) applies options left to right), libmount classes nosuid and nodev as the
    line's VFS options, which is what the kernel enforces (build 3)."""
    from gpucluster.render.compute.node import lustre_fstab_entry

    line = lustre_fstab_entry(LustreMount("fs-0abc", "fs-0abc.fsx.us-east-1.amazonaws.com", "abcdefgh", "/fsx", options))
    vfs = libmount_vfs_options(line, tmp_path)
    for on, off in (("suid", "nosuid"), ("dev", "nodev")):
        last = [o for o in vfs if o in (on, off)][-1]  # mount(8) applies options left to right: the last one holds
        assert last == off, vfs


def libmount_vfs_options(line: str, tmp_path: Path) -> list[str]:
    """The VFS options of one fstab line as ``findmnt --verify`` (libmount) classifies them. The target and source
    checks depend on this machine, so only the parse and the options are read."""
    fstab = tmp_path / "fstab"
    fstab.write_text(line + "\n")
    out = subprocess.run(
        [require_tool("findmnt"), "--verify", "--verbose", "--tab-file", str(fstab)], capture_output=True, text=True
    )
    text = out.stdout + out.stderr
    assert "0 parse errors" in text, text
    (vfs,) = [ln.split("VFS options:", 1)[1].strip() for ln in text.splitlines() if "VFS options:" in ln]
    return vfs.split(",")
