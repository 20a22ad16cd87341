"""Slurm 24.11 for the version tests: Debian trixie's slurmctld in a debootstrap root (FACTS.md).

``.ci/run`` builds the root once (``debootstrap --variant=minbase --include=slurmctld,slurmd,munge trixie``,
about 285 MB) at ``$GPUCLUSTER_SLURM_TRIXIE_ROOT`` (default ``/var/cache/gpucluster/slurm-trixie``). The fixture
mounts ``/proc`` inside it for the session (slurmctld reads it) and unmounts what it mounted. In CI a missing
root fails the test instead of skipping it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import IN_CI

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
    proc = TRIXIE_ROOT / "proc"
    mounted = False
    if not os.path.ismount(proc):
        subprocess.run(["mount", "-t", "proc", "proc", str(proc)], check=True)
        mounted = True
    try:
        yield TRIXIE_ROOT
    finally:
        if mounted:
            subprocess.run(["umount", str(proc)], check=False)
