"""The shared real-Slurm harness itself (``slurm_harness``): a teardown that leaves no process of the run behind (a
running job's slurmstepd and its program included), a restart that keeps the cluster's jobs, and a slurm.conf
slurmctld refuses failing the start loudly instead of hanging."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence

import pytest

from tests.conftest import IN_CI, require_tool
from tests.e2e.slurm_harness import (
    SBATCH,
    SCONTROL,
    SLURMCTLD,
    SLURMD,
    LocalSlurm,
    conf_lines,
    free_port,
    local_keys,
    node_line,
    run_dir,
)

pytestmark = pytest.mark.slow


def one_node(extra: Sequence[str] = ()) -> LocalSlurm:
    slurm = LocalSlurm(run_dir("gcharness-"))
    keys = {"ClusterName": "harness", **local_keys(slurm.dir, free_port()), "ReturnToService": "2"}
    slurm.write_conf(
        [
            *conf_lines(keys),
            *extra,
            node_line("n-1", free_port(), memory_mb=256, State="UNKNOWN"),
            "PartitionName=p Nodes=n-1 Default=YES MaxTime=INFINITE State=UP",
        ]
    )
    return slurm


@pytest.fixture
def slurm() -> Iterator[LocalSlurm]:
    for tool in (SLURMCTLD, SLURMD, SCONTROL, SBATCH):
        require_tool(tool)
    if os.geteuid() != 0:
        (pytest.fail if IN_CI else pytest.skip)("slurmd needs root here (SlurmdUser=root)")
    s = one_node()
    try:
        yield s
    finally:
        s.stop()
        shutil.rmtree(s.dir, ignore_errors=True)


def test_stop_ends_every_process_of_the_run_and_a_restart_keeps_its_jobs(slurm: LocalSlurm):
    slurm.start_ctld()
    slurm.start_slurmd("n-1")
    job = slurm.sbatch("--wrap", "sleep 300")
    slurm.wait("job running", lambda: slurm.job(job).get("JobState") == "RUNNING", 60)
    # slurmctld, slurmd, the job's slurmstepd and its sleep all carry the run's marker
    assert len(slurm.leftover()) >= 4, slurm.leftover()
    slurm.restart_ctld()
    assert slurm.job(job).get("JobState") == "RUNNING"
    slurm.stop()
    assert slurm.leftover() == []
    assert all(p.poll() is not None for p in slurm.procs)


def test_a_refused_conf_fails_the_start_with_slurmctlds_words():
    require_tool(SLURMCTLD)
    slurm = one_node(["NoSuchKey=1"])
    try:
        with pytest.raises(AssertionError):
            slurm.check_config()
        with pytest.raises(RuntimeError, match=r"(?s)slurmctld exited: .*NoSuchKey"):
            slurm.start_ctld()
    finally:
        slurm.stop()
        shutil.rmtree(slurm.dir, ignore_errors=True)
    assert slurm.leftover() == []
