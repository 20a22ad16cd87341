"""Slurm 24.11 for the version tests: Debian trixie's slurmctld in a debootstrap root (FACTS.md).

``.ci/run`` builds the root once (``debootstrap --variant=minbase --include=slurmctld,slurmd,munge trixie``,
about 285 MB) at ``$GPUCLUSTER_SLURM_TRIXIE_ROOT`` (default ``/var/cache/gpucluster/slurm-trixie``). The fixture
mounts ``/proc`` inside it for the session (slurmctld reads it) and unmounts what it mounted once no test
process on this machine uses the root any more (``proc_mounted``). In CI a missing
root fails the test instead of skipping it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import IN_CI, machine_lock, path_key

TRIXIE_ROOT = Path(os.environ.get("GPUCLUSTER_SLURM_TRIXIE_ROOT", "/var/cache/gpucluster/slurm-trixie"))
TRIXIE_VERSION = "24.11"


@pytest.fixture(scope="session")
def trixie_root() -> Iterator[Path]:
    if not (TRIXIE_ROOT / "usr" / "sbin" / "slurmctld").is_file():
        message = f"no Slurm {TRIXIE_VERSION} root at {TRIXIE_ROOT} (.ci/run builds it with debootstrap)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    version = subprocess.run(["chroot", str(TRIXIE_ROOT), "slurmctld", "-V"], capture_output=True, text=True, check=True)
    assert version.stdout.split()[-1].startswith(TRIXIE_VERSION), version.stdout
    with proc_mounted(TRIXIE_ROOT):
        yield TRIXIE_ROOT


@pytest.fixture
def trixie_tmp(trixie_root: Path) -> Iterator[Path]:
    """A fresh directory inside the root (the chrooted slurmctld sees it as ``/tmp/...``), removed after the test:
    never one another worker or test run uses."""
    d = Path(tempfile.mkdtemp(prefix="gpucluster-check-", dir=trixie_root / "tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def proc_mounted(root: Path) -> Iterator[None]:
    """``/proc`` mounted inside ``root`` while any process on this machine needs it: pytest-xdist workers and
    other test runs share one root. Holders are counted (by pid, under a machine-wide lock); the last one out
    unmounts, and only a mount a holder made (one that was there before stays)."""
    proc = root / "proc"
    name = f"trixie-proc-{path_key(root)}"
    state_file = Path(tempfile.gettempdir()) / f"gpucluster-test-{name}.json"
    with machine_lock(name):
        state = _holders(state_file)
        if not os.path.ismount(proc):
            subprocess.run(["mount", "-t", "proc", "proc", str(proc)], check=True)
            state["mounted"] = True
        state["holders"].append(os.getpid())
        state_file.write_text(json.dumps(state))
    try:
        yield
    finally:
        with machine_lock(name):
            state = _holders(state_file)
            state["holders"] = [pid for pid in state["holders"] if pid != os.getpid()]
            if not state["holders"] and state["mounted"]:
                if os.path.ismount(proc):
                    subprocess.run(["umount", str(proc)], check=False)
                state["mounted"] = False
            state_file.write_text(json.dumps(state))


def _holders(state_file: Path) -> dict[str, Any]:
    """The state file's holders that are still alive, and whether a holder mounted /proc."""
    try:
        state = json.loads(state_file.read_text())
    except (OSError, ValueError):
        state = {}
    alive = []
    for pid in state.get("holders", []):
        try:
            os.kill(pid, 0)
            alive.append(pid)
        except ProcessLookupError:
            continue  # a run that was killed before it let go
        except PermissionError:
            alive.append(pid)
    return {"holders": alive, "mounted": bool(state.get("mounted"))}
