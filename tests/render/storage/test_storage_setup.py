"""The storage setup host's user data, run for real: directories created with their owner and mode (real mkdir,
chown, chmod and stat, as root: the host is a no-squash client, root there is root on the file system), again and
again without touching what is inside them, and a power-off scheduled whatever happens.

There is no Lustre server here: the file system is a directory, ``mountpoint``, ``shutdown`` and (where a test says
so) ``chown`` are stubs that record their calls, and the mount script is a stub the setup script is pointed at
(``GPUCLUSTER_MOUNT_SCRIPT``). A root-squashed chown is what a host that is not a no-squash client gets: EPERM.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from gpucluster.config.kubernetes import TeamSpec
from gpucluster.config.storage import LustreSpec
from gpucluster.render.compute.node import LustreMount
from gpucluster.render.core import render_cloud_config
from gpucluster.render.storage.setup import PER_BOOT_HOOK, SETUP_SCRIPT, storage_setup_cloud_config, storage_setup_script
from gpucluster.resolve.storage.team import setup_directories, team_owner
from tests.conftest import IN_CI, require_tool

TEAMS = (TeamSpec(name="research"), TeamSpec(name="applied"), TeamSpec(name="guests", mount_shared_storage=False))
FS = LustreSpec(
    directories=({"path": "/checkpoints", "owner": "65534:65534", "mode": "0755"}, {"path": "/projects", "mode": "1777"})
)  # type: ignore[arg-type]


def mount(root: Path) -> LustreMount:
    return LustreMount("fs-0abc", "fs-0abc.fsx.us-east-1.amazonaws.com", "abcdefgh", str(root), "noatime,flock")


@pytest.fixture
def as_root():
    if os.geteuid() != 0:  # the host runs it as root (a no-squash client): chown to other users needs root here too
        (pytest.fail if IN_CI else pytest.skip)("the setup script chowns to the teams' ids: it needs root (CI runs as root)")


def run(tmp: Path, *, mounted: bool = True, chown: str | None = None, mount_exit: int = 0) -> subprocess.CompletedProcess[str]:
    """Render the setup script for a file system "mounted" at tmp/fsx and run it with stubs on PATH."""
    root = tmp / "fsx"
    root.mkdir(exist_ok=True)
    script = tmp / "setup.sh"
    script.write_text(storage_setup_script("c", mount(root), setup_directories(FS, TEAMS)))
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    stubs = {"mountpoint": "exit 0" if mounted else "exit 1", "shutdown": "exit 0", "mount-lustre": f"exit {mount_exit}"}
    if chown is not None:
        stubs["chown"] = chown
    for name, body in stubs.items():
        (bin_dir / name).write_text(f'#!/bin/bash\necho "{name} $*" >> {tmp}/calls.log\n{body}\n')
        (bin_dir / name).chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "GPUCLUSTER_LOG": str(tmp / "log"),
        "GPUCLUSTER_MOUNT_SCRIPT": str(bin_dir / "mount-lustre"),
    }
    return subprocess.run([require_tool("bash"), str(script)], env=env, capture_output=True, text=True, timeout=60)


def calls(tmp: Path) -> list[str]:
    log = tmp / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def owner_mode(path: Path) -> tuple[int, int, str]:
    st = path.stat()
    return st.st_uid, st.st_gid, f"{stat.S_IMODE(st.st_mode):o}"


def test_directories_get_their_owner_and_mode_and_the_host_powers_off(tmp_path, as_root):
    result = run(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    root = tmp_path / "fsx"
    research, applied = team_owner(TEAMS[0]), team_owner(TEAMS[1])
    assert owner_mode(root / "teams") == (0, 0, "755")
    assert owner_mode(root / "teams" / "research") == (*research, "2770")
    assert owner_mode(root / "teams" / "applied") == (*applied, "2770")
    assert not (root / "teams" / "guests").exists()  # a team that does not mount shared storage gets none
    assert owner_mode(root / "checkpoints") == (65534, 65534, "755")
    assert owner_mode(root / "projects") == (0, 0, "1777")
    assert calls(tmp_path)[-1] == "shutdown -h +1 gpucluster storage setup done"
    assert not any(c.startswith("mount-lustre") for c in calls(tmp_path))  # already mounted: not again


def test_a_second_run_changes_nothing_inside_and_puts_back_owner_and_mode(tmp_path, as_root):
    assert run(tmp_path).returncode == 0
    research = tmp_path / "fsx" / "teams" / "research"
    data = research / "model.pt"
    data.write_text("weights")
    os.chown(data, 1234, 1234)
    os.chmod(research, 0o777)  # someone widened it
    again = run(tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert owner_mode(research)[2] == "2770"
    assert data.read_text() == "weights" and owner_mode(data)[:2] == (1234, 1234)  # never recursive


def test_a_squashed_chown_is_reported_and_the_host_still_powers_off(tmp_path, as_root):
    """What a host that is not a no-squash client sees: root is nobody on the file system, chown fails."""
    result = run(tmp_path, chown="echo \"chown: changing ownership of '$2': Operation not permitted\" >&2; exit 1")
    assert result.returncode == 1
    log = (tmp_path / "log" / "storage-setup.log").read_text()
    assert "ERROR:" in log and "is this host's address in the file system's NoSquashNids?" in log
    assert calls(tmp_path)[-1].startswith("shutdown -h +1")


def test_a_failed_mount_creates_nothing_and_the_host_still_powers_off(tmp_path, as_root):
    result = run(tmp_path, mounted=False, mount_exit=32)
    assert result.returncode == 1
    assert "mount-lustre " in calls(tmp_path) and calls(tmp_path)[-1].startswith("shutdown -h +1")
    assert not (tmp_path / "fsx" / "teams").exists()
    assert "could not mount" in (tmp_path / "log" / "storage-setup.log").read_text()


def test_user_data_runs_at_every_boot_and_passes_cloud_init_and_bash(tmp_path):
    config = storage_setup_cloud_config("c", mount(Path("/fsx")), setup_directories(FS, TEAMS))
    text = render_cloud_config("gpucluster c / storage setup host", config)
    files = {f["path"]: f for f in yaml.safe_load(text)["write_files"]}
    assert files[PER_BOOT_HOOK]["permissions"] == "0755" and f"exec {SETUP_SCRIPT}" in files[PER_BOOT_HOOK]["content"]
    mount_script = files["/usr/local/sbin/gpucluster-mount-lustre"]["content"]
    assert " /fsx lustre noatime,flock,nosuid,nodev,_netdev," in mount_script  # the nodes' own mount, nosuid,nodev
    assert "configure_efa" not in mount_script  # the setup host mounts over TCP
    path = tmp_path / "user-data.yaml"
    path.write_text(text)
    result = subprocess.run([require_tool("cloud-init"), "schema", "-c", str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    for name in (SETUP_SCRIPT, PER_BOOT_HOOK, "/usr/local/sbin/gpucluster-mount-lustre"):
        script = tmp_path / "s.sh"
        script.write_text(files[name]["content"])
        assert subprocess.run([require_tool("bash"), "-n", str(script)], capture_output=True).returncode == 0, name
