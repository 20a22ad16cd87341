"""A one-node Slurm (Debian's 22.05) in a temp dir, enough to watch what Slurm does with the health
program: slurmctld and one slurmd (``gpu-1``) as root on private ports, no munge, no cgroups, with
HealthCheckProgram and/or Prolog set to wrappers that run ``python -m gpucluster_agents.health``.
Every process carries a marker in its environment, and :meth:`LocalSlurm.stop` ends exactly those."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT

SLURMCTLD, SLURMD, SCONTROL, SBATCH = "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/scontrol", "/usr/bin/sbatch"
MARKER = "GPUCLUSTER_HEALTH_E2E"
NODE = "gpu-1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wrapper(path: Path, mode: str, config: Path, scenario: Path, slurm_conf: Path) -> str:
    """What the node image would hold: an absolute-path script (slurmd runs it with an empty PATH). The
    local patch: SLURM_CONF, which a configless node's scontrol finds in slurmd's cache instead."""
    path.write_text(
        "#!/bin/sh\n"
        f"export PYTHONPATH={ROOT} PATH=/usr/bin:/bin SLURM_CONF={slurm_conf}\n"
        f"exec {sys.executable} -m gpucluster_agents.health {mode} --config {config} --fake-nvml {scenario}"
        f' --node "${{SLURMD_NODENAME:-{NODE}}}"\n'
    )
    path.chmod(0o755)
    return str(path)


class LocalSlurm:
    def __init__(self, run_dir: Path, settings: dict[str, str]) -> None:
        self.dir = run_dir
        self.marker = f"{run_dir}:{os.getpid()}"
        for sub in ("state", "spool", "log", "pids"):
            (run_dir / sub).mkdir(parents=True, exist_ok=True)
        port = free_port()
        conf = {
            "ClusterName": "health",
            "SlurmctldHost": "localhost",
            "SlurmUser": "root",
            "SlurmdUser": "root",
            "AuthType": "auth/none",
            "CredType": "cred/none",
            "AuthInfo": "cred_expire=10",
            "SlurmctldPort": str(port),
            "SlurmdPort": str(free_port()),
            "StateSaveLocation": str(run_dir / "state"),
            "SlurmdSpoolDir": str(run_dir / "spool" / "%n"),
            "SlurmctldPidFile": str(run_dir / "slurmctld.pid"),
            "SlurmdPidFile": str(run_dir / "pids" / "slurmd-%n.pid"),
            "SlurmctldLogFile": str(run_dir / "log" / "slurmctld.log"),
            "SlurmdLogFile": str(run_dir / "log" / "slurmd-%n.log"),
            "ProctrackType": "proctrack/pgid",
            "TaskPlugin": "task/none",
            "JobAcctGatherType": "jobacct_gather/none",
            "SelectType": "select/cons_tres",
            "SelectTypeParameters": "CR_Core",
            "SchedulerParameters": "sched_interval=2,bf_interval=2",
            "MailProg": "/bin/true",
            "ReturnToService": "2",
            "SlurmctldDebug": "debug",
            "SlurmdDebug": "debug",
            **settings,
        }
        lines = [f"{k}={v}" for k, v in conf.items()]
        lines.append(f"NodeName={NODE} NodeAddr=127.0.0.1 Port={free_port()} CPUs=1 RealMemory=256 State=UNKNOWN")
        lines.append(f"PartitionName=gpu Nodes={NODE} Default=YES State=UP MaxTime=INFINITE")
        self.conf = run_dir / "slurm.conf"
        self.conf.write_text("\n".join(lines) + "\n")
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "GPUCLUSTER_HEALTH"))}
        env.update(SLURM_CONF=str(self.conf), **{MARKER: self.marker})
        return env

    def _spawn(self, argv: list[str], log: str) -> None:
        with open(self.dir / "log" / log, "ab") as out:
            self.procs.append(
                subprocess.Popen(
                    argv, env=self.env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                )
            )

    def start(self) -> None:
        self._spawn([SLURMCTLD, "-D", "-i"], "slurmctld.out")
        self.wait(lambda: "is UP" in self.scontrol("ping"), 30, "slurmctld up")
        self._spawn([SLURMD, "-D", "-N", NODE], "slurmd.out")

    def scontrol(self, *args: str) -> str:
        return subprocess.run([SCONTROL, *args], env=self.env, capture_output=True, text=True, check=False).stdout

    def node(self) -> dict[str, str]:
        return dict(re.findall(r"(\w+)=(.*?)(?= \w+=|$)", self.scontrol("-o", "show", "node", NODE).strip()))

    def job(self, job_id: int) -> dict[str, str]:
        return dict(re.findall(r"(\w+)=(\S*)", self.scontrol("-o", "show", "job", str(job_id))))

    def sbatch(self, *args: str) -> int:
        out = subprocess.run(
            [SBATCH, "--parsable", f"--chdir={self.dir}", *args], env=self.env, capture_output=True, text=True, check=True
        )
        return int(out.stdout.strip().split(";")[0])

    def wait(self, cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return
            time.sleep(0.5)
        raise AssertionError(f"not {what} within {timeout} s: {self.node()}\n{self.debug()}")

    def debug(self) -> str:
        parts = []
        for name in ("slurmctld.log", f"slurmd-{NODE}.log"):
            p = self.dir / "log" / name
            if p.exists():
                parts.append(f"--- {name}\n" + "\n".join(p.read_text().splitlines()[-40:]))
        return "\n".join(parts)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        needle = f"{MARKER}={self.marker}".encode()
        for _ in range(3):  # jobs and slurmstepd this cluster started, found by the marker
            left = []
            for entry in os.listdir("/proc"):
                if entry.isdigit() and int(entry) != os.getpid():
                    try:
                        if needle in Path(f"/proc/{entry}/environ").read_bytes():
                            left.append(int(entry))
                    except OSError:
                        continue
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if not left:
                break
            time.sleep(0.3)
