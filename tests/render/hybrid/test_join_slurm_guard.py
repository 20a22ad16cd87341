"""The hybrid TaskProlog under real Slurm (Debian's slurmctld and slurmd 22.05, as root, in a temp dir): a cloud node
(``p5-1``) and two site nodes on one machine, each slurmd on its own port. A job in the cloud partition gets the EFA
environment, a job in the site's partition the RoCE one; a job whose nodes are on both sides (possible only through a
partition that mixes them, which the bundle never renders) fails before its program runs, and no node is drained."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gpucluster.render.compute.node import NCCL_ENV_PATH
from gpucluster.render.core import env_file
from gpucluster.render.hybrid.fabric import hybrid_task_prolog
from tests.conftest import IN_CI, require_tool
from tests.e2e import slurm_harness
from tests.e2e.slurm_harness import LocalSlurm, conf_lines, free_port, local_keys, node_line
from tests.render.hybrid.join_cases import hybrid_spec, p5

pytestmark = pytest.mark.slow  # starts slurmctld and slurmd

NODES = ("p5-1", "gpu1", "gpu2")


class MiniCluster(LocalSlurm):
    def __init__(self, tmp: Path):
        super().__init__(tmp, tmp / "etc" / "slurm.conf", subdirs=("state", "spool", "log", "pids", "etc", "out"))
        spec = hybrid_spec()
        nccl_env = tmp / "etc" / "nccl.env"
        nccl_env.write_text(env_file(dict(p5(spec).nccl_env)))
        prolog = tmp / "etc" / "task-prolog"
        prolog.write_text(hybrid_task_prolog(spec).replace(NCCL_ENV_PATH, str(nccl_env)))
        prolog.chmod(0o755)
        keys = {
            "ClusterName": "hybridguard",
            **local_keys(tmp, free_port()),
            "SelectType": "select/cons_tres",
            "SelectTypeParameters": "CR_Core",
            "ReturnToService": "2",
            "TaskProlog": str(prolog),
        }
        self.write_conf(
            [
                *conf_lines(keys),
                *(node_line(n, free_port(), memory_mb=256, State="UNKNOWN") for n in NODES),
                "PartitionName=aws-p5 Nodes=p5-1 MaxTime=5",
                "PartitionName=gpu Nodes=gpu1,gpu2 Default=YES MaxTime=5",
                # a site's mistake the bundle never makes: one partition over both sides
                "PartitionName=mixed Nodes=p5-1,gpu1,gpu2 Hidden=YES MaxTime=5",
            ]
        )

    def start(self) -> None:
        self.start_ctld()
        for node in NODES:
            self.start_slurmd(node)
        self.wait("three idle nodes", lambda: self.states() == {n: "IDLE" for n in NODES}, 60, interval=0.3)

    def states(self) -> dict[str, str]:
        return dict(re.findall(r"NodeName=(\S+) .*?State=(\S+)", self.scontrol("-o", "show", "nodes", check=False)))

    def run_job(self, *args: str) -> tuple[str, str]:
        """Run a batch job to its end: (its state, its output)."""
        output = self.dir / "out" / f"job-{len(list((self.dir / 'out').iterdir()))}.out"
        script = "#!/bin/sh\nsrun sh -c 'echo $SLURMD_NODENAME; env' | grep -E '^(p5-|gpu|FI_PROVIDER=|NCCL_)' | sort -u\n"
        sub = subprocess.run(
            ["sbatch", "--parsable", f"--output={output}", f"--chdir={self.dir}", *args],
            input=script,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        job_id = sub.stdout.strip().split(";")[0]
        state = ""

        def done() -> bool:
            nonlocal state
            line = self.scontrol("-o", "show", "job", job_id, check=False)
            m = re.search(r"JobState=(\S+)", line)
            state = m.group(1) if m else "GONE"
            return state in ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT", "GONE")

        self.wait(f"end of job {job_id}", done, 60, interval=0.3)
        return state, output.read_text() if output.exists() else ""


@pytest.fixture
def cluster(tmp_path):
    for tool in ("slurmctld", "slurmd", "sbatch", "scontrol"):
        require_tool(tool)
    if os.geteuid() != 0:  # slurmd runs jobs as their user: it needs root (CI runs as root)
        (pytest.fail if IN_CI else pytest.skip)("slurmd needs root here (SlurmdUser=root)")
    c = MiniCluster(slurm_harness.run_dir("gcguard-"))  # short: slurmd's socket path limit
    try:
        c.start()
        yield c
    finally:
        c.stop()
        leftover = c.leftover()
        shutil.rmtree(c.dir, ignore_errors=True)
        assert leftover == [], f"processes left running: {leftover}"


def test_task_prolog_keeps_jobs_on_one_fabric(cluster):
    state, out = cluster.run_job("-p", "aws-p5", "-N", "1")
    assert state == "COMPLETED", out
    assert "FI_PROVIDER=efa" in out and "NCCL_NET=IB" not in out

    state, out = cluster.run_job("-p", "gpu", "-N", "2")
    assert state == "COMPLETED", out
    assert {"gpu1", "gpu2", "NCCL_NET=IB", "NCCL_IB_GID_INDEX=3"} <= set(out.split()) and "FI_PROVIDER" not in out

    state, out = cluster.run_job("-p", "mixed", "-w", "p5-1,gpu1", "-N", "2")
    assert state == "FAILED", out
    assert re.search(r"gpucluster: job \d+ has nodes on onprem and in AWS", out), out
    assert "NCCL_" not in out and "FI_PROVIDER" not in out  # the program never ran
    cluster.wait("nodes back in service", lambda: cluster.states() == {n: "IDLE" for n in NODES}, 60, interval=0.3)
