"""The boot helper writes files as root without following a link another user planted (docs/slurm.md,
"Root's own file writes"): ``apply-user-data`` rewrites the head node's files at every boot, one of them in the
slurm-owned ``/var/lib/gpucluster/slurm``, and ``munge-key`` writes into the munge-owned ``/etc/munge``.

Each test plants links as ``nobody`` (a forked child that drops to nobody:nogroup and makes the link through a
directory descriptor, so the test root's 0700 ancestors do not stand in its way) in a directory nobody owns — the
slurm user's stand-in — pointing at a root-owned 0440 file, the reviewer's ``/etc/sudoers.d`` target. Then the
helper's writer runs as root: the target must keep its bytes, mode and owner.
"""

from __future__ import annotations

import grp
import os
import pwd
import signal
import stat
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from gpucluster_agents.boot import helper as boot
from tests.conftest import IN_CI

SECRET = b"root ALL=(ALL) ALL\n"


@pytest.fixture
def nobody() -> tuple[int, int]:
    if os.geteuid() != 0:
        if IN_CI:
            pytest.fail("the link tests need root (a root writer, a nobody planter); run CI as root")
        pytest.skip("needs root (the helper runs as root; the links are planted as nobody)")
    user = pwd.getpwnam("nobody")
    try:
        gid = grp.getgrnam("nogroup").gr_gid
    except KeyError:
        gid = user.pw_gid
    return user.pw_uid, gid


def as_user(ids: tuple[int, int], directory: Path, action: Callable[[int], None], *, wait: bool = True) -> int:
    """Run ``action(dir_fd)`` in a child that has dropped to ``ids``; ``dir_fd`` is ``directory``, opened before the
    drop. Returns the child's pid (``wait``: after it exited 0)."""
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery from here on, only system calls and _exit
        code = 1
        try:
            os.setgroups([])
            os.setgid(ids[1])
            os.setuid(ids[0])
            action(dfd)
            code = 0
        finally:
            os._exit(code)
    os.close(dfd)
    if wait:
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"the child as {ids} failed: {status}"
    return pid


@pytest.fixture
def layout(tmp_path: Path, nobody: tuple[int, int]) -> tuple[Path, Path]:
    """``(slurm-owned directory, root-only target)`` under a test root, as on the head node."""
    target = tmp_path / "root" / "etc" / "sudoers.d" / "gpucluster"
    target.parent.mkdir(parents=True)
    target.write_bytes(SECRET)
    target.chmod(0o440)
    slurm_dir = tmp_path / "root" / "var" / "lib" / "gpucluster" / "slurm"
    slurm_dir.mkdir(parents=True)
    os.chown(slurm_dir, *nobody)
    slurm_dir.chmod(0o755)
    return slurm_dir, target


def assert_untouched(target: Path) -> None:
    st = target.stat()
    assert target.read_bytes() == SECRET, "root wrote through a link nobody planted"
    assert stat.S_IMODE(st.st_mode) == 0o440 and (st.st_uid, st.st_gid) == (0, 0), f"re-permissioned: {st}"


def test_a_planted_temporary_link_does_not_redirect_the_write(layout, nobody):
    """The reviewer's repro: topology.conf is missing (so the boot writes it) and nobody has put a link at the name of
    the helper's temporary file. Before the fix root wrote the topology through it and chmod-ed the target 0644."""
    slurm_dir, target = layout
    as_user(nobody, slurm_dir, lambda dfd: os.symlink(str(target), "topology.conf.gpucluster-new", dir_fd=dfd))
    planted = slurm_dir / "topology.conf.gpucluster-new"
    assert planted.is_symlink() and planted.lstat().st_uid == nobody[0]

    assert boot.write_file(str(slurm_dir / "topology.conf"), b"SwitchName=root Nodes=p5-1\n", 0o644)

    assert_untouched(target)
    written = slurm_dir / "topology.conf"
    assert not written.is_symlink() and written.read_bytes() == b"SwitchName=root Nodes=p5-1\n"
    assert stat.S_IMODE(written.stat().st_mode) == 0o644 and not planted.exists()


def test_a_link_at_the_file_itself_is_replaced_not_followed(layout, nobody):
    """A link at the destination (agent-owned files are skipped when present; the others are rewritten): the file
    replaces the link; the target keeps its bytes, mode and owner, which are not copied to the new file either."""
    slurm_dir, target = layout
    as_user(nobody, slurm_dir, lambda dfd: os.symlink(str(target), "other.conf", dir_fd=dfd))
    assert boot.write_file(str(slurm_dir / "other.conf"), b"x=1\n", 0o644)
    assert_untouched(target)
    written = slurm_dir / "other.conf"
    assert not written.is_symlink() and written.read_bytes() == b"x=1\n" and written.stat().st_uid == 0


def test_a_linked_directory_is_not_entered(layout, nobody):
    """A directory component that is a link a user made (here: nobody's own directory holding a link to /etc's
    stand-in) is refused instead of followed."""
    slurm_dir, target = layout
    as_user(nobody, slurm_dir, lambda dfd: os.symlink(str(target.parent), "conf.d", dir_fd=dfd))
    with pytest.raises(PermissionError, match=r"'conf\.d' is a link of uid"):
        boot.write_file(str(slurm_dir / "conf.d" / "gpucluster"), b"pwned\n", 0o644)
    assert_untouched(target)


def test_the_write_wins_a_race_against_a_link_planter(layout, nobody):
    """nobody keeps putting a link at the temporary name — and renaming the helper's own temporary file away to put
    one in its place — while root writes the file 300 times: the target never changes. (A write that loses the race
    fails with an error; in a directory of the slurm user's own, the slurm user can only spoil its own file.)"""
    slurm_dir, target = layout

    def plant(dfd: int) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.replace("topology.conf.gpucluster-new", "stolen", src_dir_fd=dfd, dst_dir_fd=dfd)
            except OSError:
                pass
            try:
                os.symlink(str(target), "topology.conf.gpucluster-new", dir_fd=dfd)
            except OSError:
                pass

    pid = as_user(nobody, slurm_dir, plant, wait=False)
    outcomes: Counter[str] = Counter()
    try:
        for i in range(300):
            try:
                boot.write_file(str(slurm_dir / "topology.conf"), f"SwitchName=s{i}\n".encode(), 0o644)
                outcomes["written"] += 1
            except FileExistsError:  # a link got in between the unlink and the exclusive create: refused, not followed
                outcomes["link refused"] += 1
            except FileNotFoundError:  # the temporary file was renamed away before the rename: the write fails loudly
                outcomes["file stolen"] += 1
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert_untouched(target)
    assert outcomes["written"] > 0 and outcomes["link refused"] + outcomes["file stolen"] > 0, outcomes  # it did race


def test_the_munge_key_is_not_written_through_a_link_of_the_munge_user(tmp_path, nobody, monkeypatch):
    """``munge-key`` writes into /etc/munge, the munge user's directory: a link there is not followed either."""
    munge_dir = tmp_path / "etc" / "munge"
    munge_dir.mkdir(parents=True)
    os.chown(munge_dir, *nobody)
    target = tmp_path / "shadow"
    target.write_bytes(SECRET)
    target.chmod(0o440)
    as_user(nobody, munge_dir, lambda dfd: os.symlink(str(target), "munge.key.gpucluster-new", dir_fd=dfd))
    assert boot.write_file(str(munge_dir / "munge.key"), b"k" * 1024, 0o400, nobody)
    assert_untouched(target)
    key = munge_dir / "munge.key"
    assert key.read_bytes() == b"k" * 1024 and stat.S_IMODE(key.stat().st_mode) == 0o400 and key.stat().st_uid == nobody[0]


def test_an_unchanged_file_is_left_alone_and_first_only_keeps_what_is_there(tmp_path):
    """What apply-user-data relies on: an identical file is not rewritten (False), an agent-owned one is written only
    when nothing is there, and a rewritten file keeps its owner unless one is given."""
    path = tmp_path / "etc" / "x.conf"
    assert boot.write_file(str(path), b"a\n", 0o600)
    inode = path.stat().st_ino
    assert not boot.write_file(str(path), b"a\n", 0o600) and path.stat().st_ino == inode
    assert not boot.write_file(str(path), b"b\n", 0o600, first_only=True) and path.read_bytes() == b"a\n"
    assert boot.write_file(str(path), b"b\n", 0o640) and stat.S_IMODE(path.stat().st_mode) == 0o640


def test_apply_user_data_writes_the_missing_topology_without_following_the_planted_link(layout, nobody, monkeypatch):
    """The reviewer's repro through ``apply-user-data`` itself (its user data and the agent install stubbed): the
    agent-owned topology.conf is missing, so the boot writes it, and nobody's link at the temporary name is ignored."""
    slurm_dir, target = layout
    root = slurm_dir.parents[3]
    as_user(nobody, slurm_dir, lambda dfd: os.symlink(str(target), "topology.conf.gpucluster-new", dir_fd=dfd))
    user_data = (
        "#cloud-config\nwrite_files:\n"
        "- {path: /var/lib/gpucluster/slurm/topology.conf, permissions: '0644', content: 'SwitchName=root Nodes=p5-1'}\n"
        "- {path: /etc/slurm/slurm.conf, permissions: '0644', content: 'ClusterName=demo'}\n"
    )
    monkeypatch.setattr(boot, "ROOT", str(root))
    monkeypatch.setattr(boot, "current_user_data", lambda: user_data)
    monkeypatch.setattr(boot, "install_agent", lambda cfg: None)
    cfg = boot.BootConfig("demo", "us-east-1", "s", "/p.json", ("/var/lib/gpucluster/slurm/topology.conf",))
    boot.apply_user_data(cfg)
    assert_untouched(target)
    assert (slurm_dir / "topology.conf").read_text() == "SwitchName=root Nodes=p5-1"
    assert (root / "etc/slurm/slurm.conf").read_text() == "ClusterName=demo"
