"""The people tests' private mount namespace (``namespace.py``): what is bound there is seen there, and the host's
own files are neither changed nor shadowed outside it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import IN_CI, require_tool
from tests.e2e.namespace import MountNamespace, run_in_namespace

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _root() -> None:
    require_tool("unshare")
    require_tool("nsenter")
    if os.geteuid() != 0:
        (pytest.fail if IN_CI else pytest.skip)("bind mounts in a mount namespace need root")


def fingerprint(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return hashlib.sha256(path.read_bytes()).hexdigest(), st.st_mtime_ns, st.st_ino


def test_a_bound_passwd_is_seen_inside_only_and_the_hosts_file_is_untouched(tmp_path: Path):
    host = Path("/etc/passwd")
    before = fingerprint(host)
    fake = tmp_path / "passwd"
    fake.write_text(host.read_text() + "zed-e2e:x:42424:42424::/home/zed-e2e:/bin/sh\n")
    with MountNamespace({host: fake}) as ns:
        inside = ns.run(["getent", "passwd", "zed-e2e"])
        assert inside.returncode == 0 and inside.stdout.split(":")[2] == "42424", inside
        # a write inside lands in the temp copy, not in the host's file
        wrote = ns.run(["sh", "-c", "echo amy-e2e:x:42425:42425::/:/bin/sh >> /etc/passwd"])
        assert wrote.returncode == 0, wrote.stderr
        outside = run_in_namespace({}, ["getent", "passwd", "zed-e2e"])
        assert outside.returncode == 2, outside  # not found: the bind is the namespace's own
    assert "amy-e2e:x:42425" in fake.read_text()
    assert fingerprint(host) == before
    assert "zed-e2e" not in host.read_text() and "amy-e2e" not in host.read_text()


def test_a_target_missing_on_the_host_is_refused_before_anything_is_made(tmp_path: Path):
    missing = Path("/etc/gpucluster-e2e-no-such-file")
    source = tmp_path / "x"
    source.write_text("x\n")
    with pytest.raises(ValueError, match="does not exist on the host"):
        MountNamespace({missing: source})
    assert not missing.exists()
    with pytest.raises(ValueError, match="one is a directory"):
        MountNamespace({Path("/etc"): source})


def test_close_ends_the_holder_by_its_pid(tmp_path: Path):
    ns = MountNamespace({})
    pid = ns.pid
    assert Path(f"/proc/{pid}").exists()
    assert os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")  # a namespace of its own
    ns.close()
    assert not Path(f"/proc/{pid}").exists()


def test_kill_members_ends_every_process_that_entered_by_its_pid():
    ns = MountNamespace({})
    try:
        sleeper = subprocess.Popen(ns.argv("sleep", "300"), start_new_session=True)
        deadline = time.monotonic() + 10
        while sleeper.pid not in ns.members() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sleeper.pid in ns.members()
        assert os.getpid() not in ns.members()
        ns.kill_members()
        assert sleeper.wait(timeout=10) == -9
        assert ns.members() == []
    finally:
        ns.close()
