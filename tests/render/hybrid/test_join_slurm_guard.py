"""The hybrid TaskProlog under real Slurm (Debian's slurmctld and slurmd 22.05, as root, in a temp dir): a cloud node
(``p5-1``) and two site nodes on one machine, each slurmd on its own port. A job in the cloud partition gets the EFA
environment, a job in the site's partition the RoCE one; a job whose nodes are on both sides (possible only through a
partition that mixes them, which the bundle never renders) fails before its program runs, and no node is drained."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from gpucluster.render.core import env_file
from gpucluster.render.hybrid.fabric import cloud_nccl_environment, hybrid_task_prolog
from gpucluster.render.node import NCCL_ENV_PATH
from tests.conftest import IN_CI, require_tool
from tests.render.hybrid.join_cases import hybrid_spec, p5

NODES = ("p5-1", "gpu1", "gpu2")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MiniCluster:
    def __init__(self, tmp: Path):
        self.dir = tmp
        for sub in ("state", "spool", "log", "pids", "etc", "out"):
            (tmp / sub).mkdir()
        spec = hybrid_spec()
        nccl_env = tmp / "etc" / "nccl.env"
        nccl_env.write_text(env_file(cloud_nccl_environment(p5(spec))))
        prolog = tmp / "etc" / "task-prolog"
        prolog.write_text(hybrid_task_prolog(spec).replace(NCCL_ENV_PATH, str(nccl_env)))
        prolog.chmod(0o755)
        ctld = free_port()
        ports = {n: free_port() for n in NODES}
        d = tmp
        lines = [
            "ClusterName=hybridguard",
            "SlurmctldHost=localhost",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/none",
            "CredType=cred/none",
            f"SlurmctldPort={ctld}",
            f"StateSaveLocation={d / 'state'}",
            f"SlurmdSpoolDir={d / 'spool' / '%n'}",
            f"SlurmctldPidFile={d / 'pids' / 'slurmctld.pid'}",
            f"SlurmdPidFile={d / 'pids' / 'slurmd-%n.pid'}",
            f"SlurmctldLogFile={d / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={d / 'log' / 'slurmd-%n.log'}",
            "ProctrackType=proctrack/pgid",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MailProg=/bin/true",
            "ReturnToService=2",
            f"TaskProlog={prolog}",
            *(f"NodeName={n} NodeAddr=127.0.0.1 Port={ports[n]} CPUs=1 RealMemory=256 State=UNKNOWN" for n in NODES),
            "PartitionName=aws-p5 Nodes=p5-1 MaxTime=5",
            "PartitionName=gpu Nodes=gpu1,gpu2 Default=YES MaxTime=5",
            # a site's mistake the bundle never makes: one partition over both sides
            "PartitionName=mixed Nodes=p5-1,gpu1,gpu2 Hidden=YES MaxTime=5",
        ]
        self.conf = d / "etc" / "slurm.conf"
        self.conf.write_text("\n".join(lines) + "\n")
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        env["SLURM_CONF"] = str(self.conf)
        return env

    def start(self) -> None:
        out = open(self.dir / "log" / "daemons.out", "ab")
        self.procs.append(
            subprocess.Popen(["/usr/sbin/slurmctld", "-D", "-i"], env=self.env, stdout=out, stderr=subprocess.STDOUT)
        )
        self.wait(lambda: "is UP" in self.run("scontrol", "ping"), "slurmctld")
        for node in NODES:
            self.procs.append(
                subprocess.Popen(["/usr/sbin/slurmd", "-D", "-N", node], env=self.env, stdout=out, stderr=subprocess.STDOUT)
            )
        out.close()
        self.wait(lambda: self.states() == {n: "IDLE" for n in NODES}, "three idle nodes")

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    def run(self, *cmd: str) -> str:
        return subprocess.run(list(cmd), env=self.env, capture_output=True, text=True, timeout=30).stdout

    def states(self) -> dict[str, str]:
        out = self.run("scontrol", "-o", "show", "nodes")
        return dict(re.findall(r"NodeName=(\S+) .*?State=(\S+)", out))

    def wait(self, ok, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not ok():
            if time.monotonic() > deadline:
                logs = "".join(p.read_text()[-2000:] for p in sorted((self.dir / "log").iterdir()))
                raise AssertionError(f"no {what} after {timeout} s; {self.run('scontrol', '-o', 'show', 'nodes')}\n{logs}")
            time.sleep(0.3)

    def job(self, *args: str) -> tuple[str, str]:
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
            line = self.run("scontrol", "-o", "show", "job", job_id)
            m = re.search(r"JobState=(\S+)", line)
            state = m.group(1) if m else "GONE"
            return state in ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT", "GONE")

        self.wait(done, f"end of job {job_id}")
        return state, output.read_text() if output.exists() else ""


@pytest.fixture
def cluster(tmp_path):
    for tool in ("slurmctld", "slurmd", "sbatch", "scontrol"):
        require_tool(tool)
    if os.geteuid() != 0:  # slurmd runs jobs as their user: it needs root (CI runs as root)
        (pytest.fail if IN_CI else pytest.skip)("slurmd needs root here (SlurmdUser=root)")
    c = MiniCluster(tmp_path)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def test_task_prolog_keeps_jobs_on_one_fabric(cluster):
    state, out = cluster.job("-p", "aws-p5", "-N", "1")
    assert state == "COMPLETED", out
    assert "FI_PROVIDER=efa" in out and "NCCL_NET=IB" not in out

    state, out = cluster.job("-p", "gpu", "-N", "2")
    assert state == "COMPLETED", out
    assert {"gpu1", "gpu2", "NCCL_NET=IB", "NCCL_IB_GID_INDEX=3"} <= set(out.split()) and "FI_PROVIDER" not in out

    state, out = cluster.job("-p", "mixed", "-w", "p5-1,gpu1", "-N", "2")
    assert state == "FAILED", out
    assert re.search(r"gpucluster: job \d+ has nodes on onprem and in AWS", out), out
    assert "NCCL_" not in out and "FI_PROVIDER" not in out  # the program never ran
    cluster.wait(lambda: cluster.states() == {n: "IDLE" for n in NODES}, "nodes back in service")
