"""A real slurmctld (Debian's Slurm 22.05) in a temp dir, with cloud node groups whose
Resume/Suspend/ResumeFail programs run the agent against moto.

Two layers, so the project's own renderer can replace the first one later:
- ``render_slurm_conf``: a slurm.conf as a real cluster would have it (partitions per node group,
  CLOUD nodes, power saving, topology/tree). Stands in for the project's rendered slurm.conf.
- ``local_overrides``: the small patch that makes any such slurm.conf run unprivileged-ish on one
  machine: private ports and paths, SlurmUser=root, no munge, one NodeAddr=127.0.0.1/Port per node,
  node sizes of this machine, fake GPU device files, short timers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moto_env import free_port

from gpucluster_agents import hostlist
from gpucluster_agents.slurm import NodeState, parse_show_nodes

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SLURMCTLD = "/usr/sbin/slurmctld"
SLURMD = "/usr/sbin/slurmd"
SCONTROL = "/usr/bin/scontrol"
SBATCH = "/usr/bin/sbatch"
MARKER_KEY = "GPUCLUSTER_E2E_RUN"


@dataclass(frozen=True)
class GroupSpec:
    name: str
    nodes: int
    gpus: int
    cpus: int
    memory_mb: int
    priority_tier: int


# ---------------------------------------------------------------------------- the "rendered" config
def render_slurm_conf(cluster: str, groups: list[GroupSpec]) -> str:
    """What the project's renderer produces for a head node (paths and ports of a real install)."""
    lines = [
        f"ClusterName={cluster}",
        "SlurmctldHost=head",
        "SlurmUser=slurm",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        "SlurmctldPort=6817",
        "SlurmdPort=6818",
        "StateSaveLocation=/var/spool/slurmctld",
        "SlurmdSpoolDir=/var/spool/slurmd",
        "SlurmctldPidFile=/run/slurmctld.pid",
        "SlurmdPidFile=/run/slurmd.pid",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
        "SlurmdLogFile=/var/log/slurm/slurmd.log",
        "ProctrackType=proctrack/cgroup",
        "TaskPlugin=task/affinity,task/cgroup",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "GresTypes=gpu",
        "TopologyPlugin=topology/tree",
        "ReturnToService=2",
        "# power saving: every node is a cloud node launched by gpucluster_agents",
        "ResumeProgram=/opt/gpucluster/bin/slurm-resume",
        "SuspendProgram=/opt/gpucluster/bin/slurm-suspend",
        "ResumeFailProgram=/opt/gpucluster/bin/slurm-resume-fail",
        "ResumeTimeout=1800",
        "SuspendTime=600",
        "SuspendTimeout=120",
        "ResumeRate=0",
        "SuspendRate=0",
        "TreeWidth=65533",
        "SlurmctldParameters=cloud_reg_addrs,idle_on_node_suspend",
        "PrivateData=cloud",
    ]
    for g in groups:
        lines.append(
            f"NodeName={g.name}-[1-{g.nodes}] State=CLOUD CPUs={g.cpus} RealMemory={g.memory_mb} "
            f"Gres=gpu:{g.gpus} Feature={g.name}"
        )
    for i, g in enumerate(groups):
        default = " Default=YES" if i == 0 else ""
        lines.append(
            f"PartitionName={g.name} Nodes={g.name}-[1-{g.nodes}] State=UP MaxTime=INFINITE "
            f"PriorityTier={g.priority_tier}{default}"
        )
    return "\n".join(lines) + "\n"


def render_gres_conf(groups: list[GroupSpec]) -> str:
    lines = ["AutoDetect=off"]
    for g in groups:
        lines.append(f"NodeName={g.name}-[1-{g.nodes}] Name=gpu File=/dev/nvidia[0-{g.gpus - 1}]")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- local overrides
@dataclass
class Local:
    run_dir: Path
    ctld_port: int
    node_ports: dict[str, int]
    programs: dict[str, str]  # ResumeProgram etc. -> wrapper path
    cpus: int = 1
    memory_mb: int = 512
    gpus: int = 2
    timers: dict[str, str] | None = None


LOCAL_TIMERS = {
    "ResumeTimeout": "120",
    "SuspendTime": "8",
    "SuspendTimeout": "5",
    "AuthInfo": "cred_expire=10",  # a requeued job waits cred_expire before it may start again (default 120 s)
    "SchedulerParameters": "sched_interval=2,bf_interval=2",  # start the requeued job soon (defaults 60 s / 30 s)
}


def local_overrides(conf: str, local: Local) -> str:
    """Patch a rendered slurm.conf to run on this machine as root, in ``local.run_dir``."""
    d = local.run_dir
    set_keys: dict[str, str] = {
        "SlurmctldHost": "localhost",
        "SlurmUser": "root",
        "SlurmdUser": "root",
        "AuthType": "auth/none",
        "CredType": "cred/none",
        "SlurmctldPort": str(local.ctld_port),
        "SlurmdPort": str(local.ctld_port + 1),
        "StateSaveLocation": str(d / "state"),
        "SlurmdSpoolDir": str(d / "spool" / "%n"),
        "SlurmctldPidFile": str(d / "slurmctld.pid"),
        "SlurmdPidFile": str(d / "pids" / "slurmd-daemon-%n.pid"),
        "SlurmctldLogFile": str(d / "log" / "slurmctld.log"),
        "SlurmdLogFile": str(d / "log" / "slurmd-%n.log"),
        "ProctrackType": "proctrack/pgid",
        "TaskPlugin": "task/none",
        "SelectTypeParameters": "CR_Core",
        "MailProg": "/bin/true",
        "SlurmctldDebug": "debug",
        **local.programs,
        **(local.timers or LOCAL_TIMERS),
    }
    # values appended to a comma-separated key the rendered config already sets
    append_keys = {"SlurmctldParameters": "power_save_interval=1"}
    out: list[str] = []
    seen: set[str] = set()
    for line in conf.splitlines():
        key = line.split("=", 1)[0] if "=" in line and not line.startswith("#") else ""
        if key == "NodeName":
            # one line per node: its own address and port, and a size slurmd on this machine reports
            fields = dict(f.split("=", 1) for f in line.split())
            if fields["NodeName"] == "DEFAULT":
                fields.update(CPUs=str(local.cpus), RealMemory=str(local.memory_mb))
                out.append(" ".join(f"{k}={v}" for k, v in fields.items()))
                continue
            for node in hostlist.expand(fields["NodeName"]):
                f = dict(fields)
                f.update(
                    NodeName=node,
                    NodeAddr="127.0.0.1",
                    Port=str(local.node_ports[node]),
                    CPUs=str(local.cpus),
                    RealMemory=str(local.memory_mb),
                    Gres=f"gpu:{local.gpus}",
                )
                out.append(" ".join(f"{k}={v}" for k, v in f.items()))
            continue
        if key in set_keys:
            out.append(f"{key}={set_keys[key]}")
            seen.add(key)
            continue
        if key in append_keys:
            out.append(f"{line},{append_keys[key]}")
            seen.add(key)
            continue
        out.append(line)
    extra = [f"{k}={v}" for k, v in {**set_keys, **append_keys}.items() if k not in seen]
    nodes_at = next((i for i, line in enumerate(out) if line.startswith("NodeName=")), len(out))
    return "\n".join(out[:nodes_at] + extra + out[nodes_at:]) + "\n"


def local_gres_conf(gres: str, dev_dir: Path, gpus: int) -> str:
    return re.sub(r"File=/dev/nvidia\[0-\d+\]", f"File={dev_dir}/nvidia[0-{gpus - 1}]", gres)


# ---------------------------------------------------------------------------- the running cluster
def build_uptime_shim(out_dir: Path) -> Path:
    """LD_PRELOAD library making sysinfo() report uptime 0, so a slurmd started after the resume
    request looks freshly booted to slurmctld."""
    so = out_dir / "uptime_shim.so"
    if not so.exists():
        gcc = shutil.which("gcc") or "/usr/bin/gcc"
        subprocess.run(
            [gcc, "-shared", "-fPIC", "-O2", "-o", str(so), str(HERE / "uptime_shim.c"), "-ldl"],
            check=True,
            capture_output=True,
        )
    return so


class SlurmCluster:
    def __init__(
        self,
        run_dir: Path,
        cluster: str,
        groups: list[GroupSpec],
        agent_config: dict[str, Any],
        moto_url: str,
        shim: Path,
    ) -> None:
        self.dir = run_dir
        self.cluster = cluster
        self.groups = groups
        self.moto_url = moto_url
        self.marker = f"{run_dir}:{os.getpid()}"
        for sub in ("state", "spool", "log", "pids", "dev", "bin", "etc"):
            (run_dir / sub).mkdir(parents=True, exist_ok=True)
        for i in range(max(g.gpus for g in groups)):
            dev = run_dir / "dev" / f"nvidia{i}"
            if not dev.exists():
                try:
                    os.mknod(dev, 0o600 | 0o020000, os.makedev(195, i))  # char device 195:i like /dev/nvidiaN
                except PermissionError:
                    dev.touch()  # no CAP_MKNOD: slurmd accepts a plain file too (with log noise)
        self.conf_path = run_dir / "etc" / "slurm.conf"
        nodes = [f"{g.name}-{i}" for g in groups for i in range(1, g.nodes + 1)]

        # the agent's config: real scontrol, topology.conf next to slurm.conf
        self.agent_config_path = run_dir / "etc" / "agent.json"
        agent_config = dict(agent_config)
        agent_config["slurm_bin_dir"] = "/usr/bin"
        agent_config["topology_conf"] = str(run_dir / "etc" / "topology.conf")
        self.agent_config = agent_config
        self.agent_config_path.write_text(json.dumps(agent_config, indent=1))

        settings = {
            "python": os.environ.get("GPUCLUSTER_AGENT_PYTHON") or sys.executable,
            "repo": str(REPO),
            "agent_config": str(self.agent_config_path),
            "moto_url": moto_url,
            "cluster": cluster,
            "slurm_conf": str(self.conf_path),
            "uptime_shim": str(shim),
            "marker_key": MARKER_KEY,
            "marker": self.marker,
            "pid_dir": str(run_dir / "pids"),
            "log_dir": str(run_dir / "log"),
            "slurmd": SLURMD,
            "scontrol": SCONTROL,
        }
        settings_path = run_dir / "etc" / "programs.json"
        settings_path.write_text(json.dumps(settings, indent=1))
        programs: dict[str, str] = {}
        for key, command in (("ResumeProgram", "resume"), ("SuspendProgram", "suspend"), ("ResumeFailProgram", "resume-fail")):
            script = run_dir / "bin" / f"slurm-{command}"
            script.write_text(
                f'#!/bin/sh\nexec "{sys.executable}" "{HERE / "slurm_programs.py"}" "{settings_path}" {command} "$1"\n'
            )
            script.chmod(0o755)
            programs[key] = str(script)

        ctld_port = free_port()
        local = Local(run_dir=run_dir, ctld_port=ctld_port, node_ports={n: free_port() for n in nodes}, programs=programs)
        self.conf_path.write_text(local_overrides(render_slurm_conf(cluster, groups), local))
        (run_dir / "etc" / "gres.conf").write_text(local_gres_conf(render_gres_conf(groups), run_dir / "dev", local.gpus))
        # the initial topology.conf (before any node runs): what the agent writes with nothing placed
        from gpucluster_agents.topology import render_topology

        lines = render_topology({}, [(g.name, [f"{g.name}-{i}" for i in range(1, g.nodes + 1)]) for g in groups])
        (run_dir / "etc" / "topology.conf").write_text("\n".join(lines) + "\n")
        self.ctld: subprocess.Popen[bytes] | None = None

    # ------------------------------------------------------------------ process control
    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "AWS_"))}
        env["SLURM_CONF"] = str(self.conf_path)
        env[MARKER_KEY] = self.marker
        return env

    def check_config(self) -> None:
        """``slurmctld -D -c`` keeps running on a valid config and exits on a bad one (FACTS.md)."""
        proc = subprocess.run(["timeout", "4", SLURMCTLD, "-D", "-c"], env=self.env, capture_output=True, text=True, check=False)
        assert proc.returncode == 124, proc.stdout + proc.stderr

    def start(self) -> None:
        out = open(self.dir / "log" / "slurmctld.out", "ab")
        self.ctld = subprocess.Popen(
            [SLURMCTLD, "-D", "-i"],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.ctld.poll() is not None:
                raise RuntimeError(f"slurmctld exited: {(self.dir / 'log' / 'slurmctld.out').read_text()[-3000:]}")
            if self.scontrol("ping", check=False).find("is UP") >= 0:
                return
            time.sleep(0.2)
        raise RuntimeError("slurmctld did not come up in 30 s")

    def scontrol(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run([SCONTROL, *args], env=self.env, capture_output=True, text=True, check=False)
        if check and proc.returncode != 0:
            raise RuntimeError(f"scontrol {' '.join(args)}: {proc.stderr}")
        return proc.stdout

    def nodes(self) -> dict[str, NodeState]:
        return parse_show_nodes(self.scontrol("-o", "show", "nodes"))

    def sbatch(self, *args: str) -> int:
        out = subprocess.run(
            [SBATCH, "--parsable", f"--chdir={self.dir}", *args], env=self.env, capture_output=True, text=True, check=True
        ).stdout
        return int(out.strip().split(";")[0])

    def job(self, job_id: int) -> dict[str, str]:
        line = self.scontrol("-o", "show", "job", str(job_id), check=False)
        return dict(m.groups() for m in re.finditer(r"(\w+)=(\S*)", line))

    def wait_job(self, job_id: int, timeout: float) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"):
                return job
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} not done in {timeout}s: {job}\n{self.debug()}")
            time.sleep(1)

    def debug(self) -> str:
        parts = [self.scontrol("-o", "show", "nodes", check=False)]
        for name in ("programs.log", "slurmctld.log"):
            p = self.dir / "log" / name
            if p.exists():
                parts.append(f"--- {name}\n" + "\n".join(p.read_text().splitlines()[-60:]))
        agent_log = Path(self.agent_config["log_file"])
        if agent_log.exists():
            parts.append("--- agent.log\n" + "\n".join(agent_log.read_text().splitlines()[-60:]))
        return "\n".join(parts)

    def stop(self) -> None:
        """Stop slurmctld and every process this cluster started (slurmd, slurmstepd, jobs), by pid:
        they all carry this run's marker in their environment."""
        if self.ctld is not None and self.ctld.poll() is None:
            self.ctld.send_signal(signal.SIGTERM)
            try:
                self.ctld.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.ctld.kill()
                self.ctld.wait(timeout=10)
        for _ in range(3):
            pids = marked_pids(self.marker)
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.3)


def marked_pids(marker: str) -> list[int]:
    needle = f"{MARKER_KEY}={marker}".encode()
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found
