"""The one real-Slurm harness of the tests: a cluster of Debian's Slurm 22.05 daemons in a temp dir, on one machine.

Every test that runs slurmctld and slurmd builds on :class:`LocalSlurm` (the agents' cloud cluster in
``slurm_e2e.py``, the hybrid site in ``bundle_e2e.py``, the health drain, the IMDS guard's namespace, the hybrid
TaskProlog guard, the per-job /tmp). What it gives:

- a short run dir (:func:`run_dir`: slurmd's unix socket path must stay under 108 characters) and ports the OS
  hands out (:func:`free_port`: never one another run took);
- the slurm.conf keys that make a cluster run on one machine as root (:func:`local_keys`: SlurmUser=root,
  ``auth/none`` instead of munge, no cgroups, private ports, pid/log/state/spool paths in the run dir) and a node
  line per node with its own 127.0.0.1 port and this machine's size (:func:`node_line`);
- cloud nodes: :func:`build_uptime_shim` makes a slurmd started after the resume request look freshly booted,
  ResumeProgram/SuspendProgram hooks are wrapper scripts (:func:`script`) a test writes into its slurm.conf;
- start, stop and restart of slurmctld, a slurmd per node, scontrol/sbatch, wait helpers;
- a teardown that never leaks a daemon: every process it starts carries the run's marker in its environment
  (inherited by slurmstepd, jobs and the programs slurmctld runs), and :meth:`LocalSlurm.stop` ends each by pid.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from gpucluster_agents.power.slurm import NodeState, parse_show_nodes

HERE = Path(__file__).resolve().parent
SLURMCTLD = "/usr/sbin/slurmctld"
SLURMD = "/usr/sbin/slurmd"
SCONTROL = "/usr/bin/scontrol"
SBATCH = "/usr/bin/sbatch"
MARKER_KEY = "GPUCLUSTER_E2E_RUN"
"""The environment variable every process of a test cluster carries (its value: the run's marker)."""
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")
"""The job states a job does not leave."""


def free_port() -> int:
    """A port the OS hands out now (bound and released): never one another run holds."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_dir(prefix: str) -> Path:
    """A new short directory under /tmp (slurmd's unix socket path must stay under 108 characters)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


def local_keys(d: Path, ctld_port: int, slurmd_port: int | None = None) -> dict[str, str]:
    """The slurm.conf keys of a cluster on this machine, as root, in ``d``: no munge, no cgroups, private ports, and
    state, spool, pid and log files in the run dir."""
    return {
        "SlurmctldHost": "localhost",
        "SlurmUser": "root",
        "SlurmdUser": "root",
        "AuthType": "auth/none",
        "CredType": "cred/none",
        "SlurmctldPort": str(ctld_port),
        "SlurmdPort": str(slurmd_port or free_port()),  # every node line sets its own Port too
        "StateSaveLocation": str(d / "state"),
        "SlurmdSpoolDir": str(d / "spool" / "%n"),
        "SlurmctldPidFile": str(d / "slurmctld.pid"),
        "SlurmdPidFile": str(d / "pids" / "slurmd-daemon-%n.pid"),
        "SlurmctldLogFile": str(d / "log" / "slurmctld.log"),
        "SlurmdLogFile": str(d / "log" / "slurmd-%n.log"),
        "ProctrackType": "proctrack/pgid",
        "TaskPlugin": "task/none",
        "JobAcctGatherType": "jobacct_gather/none",
        "MailProg": "/bin/true",
    }


def conf_lines(keys: Mapping[str, str]) -> list[str]:
    return [f"{k}={v}" for k, v in keys.items()]


def node_line(name: str, port: int | None, cpus: int = 1, memory_mb: int = 512, **extra: str) -> str:
    """One node on 127.0.0.1 with its own slurmd port (``None``: the cluster's SlurmdPort) and this machine's size."""
    fields = {"NodeName": name, "NodeAddr": "127.0.0.1", **({"Port": str(port)} if port else {})}
    fields.update(CPUs=str(cpus), RealMemory=str(memory_mb), **extra)
    return " ".join(f"{k}={v}" for k, v in fields.items())


def script(path: Path, body: str) -> str:
    """An executable ``#!/bin/sh`` script (a ResumeProgram, a wrapper): its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


POWER_PROGRAMS = {"ResumeProgram": "resume", "SuspendProgram": "suspend", "ResumeFailProgram": "resume-fail"}
"""slurm.conf's power-saving programs and the command each passes to a test's program."""


def power_programs(prefix: Path, program: Path, settings: Path) -> dict[str, str]:
    """The ResumeProgram/SuspendProgram/ResumeFailProgram hooks of a cloud node test: ``<prefix><command>`` scripts
    that run ``python program SETTINGS COMMAND HOSTLIST`` (slurmctld gives a program no PATH: absolute paths only).
    The program runs the agent and stands in for the cloud (``slurm_programs.py``: a slurmd per launched node)."""
    return {
        key: script(Path(f"{prefix}{command}"), f'exec "{sys.executable}" "{program}" "{settings}" {command} "$1"\n')
        for key, command in POWER_PROGRAMS.items()
    }


def fake_gpus(dev_dir: Path, count: int) -> None:
    """``dev_dir/nvidia0..count-1`` for gres.conf: char devices 195:N like /dev/nvidiaN where this process may make
    them, else plain files (slurmd accepts them, with log noise)."""
    dev_dir.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        dev = dev_dir / f"nvidia{i}"
        if not dev.exists():
            try:
                os.mknod(dev, 0o600 | 0o020000, os.makedev(195, i))
            except PermissionError:
                dev.touch()


def local_gres_conf(gres: str, dev_dir: Path, gpus: int) -> str:
    """A rendered gres.conf with this run's fake GPU device files."""
    return re.sub(r"File=/dev/nvidia(\[0-\d+\]|\d+)", f"File={dev_dir}/nvidia[0-{gpus - 1}]", gres)


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


SUBREAPER = """\
import ctypes, os, signal, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: the orphans of what it starts come to it
child = os.fork()
if child == 0:
    os.execv(sys.argv[1], sys.argv[1:])
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, lambda n, _f: os.kill(child, n))
while True:
    pid, status = os.wait()
    if pid == child:
        sys.exit(os.waitstatus_to_exitcode(status))
"""
"""A program's parent that reaps every orphan of it at once, as a node's systemd (PID 1) does. This machine's PID 1
reaps late, and a job's zombie keeps slurmstepd's end-of-step wait polling (``killpg(pgid, 0)``, after 1 s then 2 s):
measured, 3 s added to every container step (an enroot helper's orphaned shell)."""


class LocalSlurm:
    """A test cluster's daemons and commands. ``conf``: its slurm.conf (the caller writes it, e.g. with
    :meth:`write_conf`); ``wrap``: turns every command line into the one to run (a network namespace's ``nsenter``);
    ``marker``: the run's marker (default: the run dir and this process)."""

    def __init__(
        self,
        run_dir: Path,
        conf: Path | None = None,
        *,
        marker: str | None = None,
        wrap: Callable[..., list[str]] | None = None,
        subdirs: Sequence[str] = ("state", "spool", "log", "pids"),
        subreaper: bool = False,
    ) -> None:
        """``subreaper``: slurmd runs under :data:`SUBREAPER` (``/usr/bin/python3`` of the node)."""
        self.dir = run_dir
        self.subreaper = subreaper
        self.conf_path = conf or run_dir / "etc" / "slurm.conf"
        self.marker = marker or f"{run_dir}:{os.getpid()}"
        self.wrap = wrap or (lambda *argv: list(argv))
        for sub in subdirs:
            (run_dir / sub).mkdir(parents=True, exist_ok=True)
        self.conf_path.parent.mkdir(parents=True, exist_ok=True)
        self.ctld: subprocess.Popen[bytes] | None = None
        self.procs: list[subprocess.Popen[bytes]] = []

    # ------------------------------------------------------------------ config
    def write_conf(self, lines: Sequence[str]) -> None:
        self.conf_path.write_text("\n".join(lines) + "\n")

    @property
    def env(self) -> dict[str, str]:
        """This environment without Slurm's, AWS's or another run's variables, with this run's slurm.conf and marker."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "AWS_", MARKER_KEY))}
        env["SLURM_CONF"] = str(self.conf_path)
        env[MARKER_KEY] = self.marker
        return env

    def check_config(self) -> None:
        """``slurmctld -D -c`` keeps running on a valid config and exits on a bad one (FACTS.md)."""
        proc = subprocess.run(
            ["timeout", "4", *self.wrap(SLURMCTLD, "-D", "-c")], env=self.env, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 124, proc.stdout + proc.stderr

    # ------------------------------------------------------------------ daemons
    def spawn(self, argv: Sequence[str], log: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start ``argv`` in its own session, stdin /dev/null, output appended to ``log/<log>``."""
        with open(self.dir / "log" / log, "ab") as out:
            proc = subprocess.Popen(
                self.wrap(*argv),
                env=dict(env or self.env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def start_ctld(self, timeout: float = 30) -> None:
        """slurmctld (``-i``: without its saved state at the first start, recovering it on a restart), up when it
        answers a ping; raises if it exits (an invalid slurm.conf) or is not up in ``timeout``."""
        self.ctld = self.spawn([SLURMCTLD, "-D", "-i"], "slurmctld.out")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ctld.poll() is not None:
                raise RuntimeError(f"slurmctld exited: {(self.dir / 'log' / 'slurmctld.out').read_text()[-3000:]}")
            if "is UP" in self.scontrol("ping", check=False):
                return
            time.sleep(0.2)
        raise RuntimeError(f"slurmctld did not come up in {timeout:.0f} s")

    def stop_ctld(self, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        assert self.ctld is not None
        self.ctld.send_signal(sig)
        self.ctld.wait(timeout=timeout)

    def restart_ctld(self) -> None:
        self.stop_ctld()
        self.start_ctld()

    def start_slurmd(self, node: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        argv = [SLURMD, "-D", "-N", node]
        if self.subreaper:
            argv = ["/usr/bin/python3", "-c", SUBREAPER, *argv]
        return self.spawn(argv, f"slurmd-{node}.out", env)

    def stop(self) -> None:
        """slurmctld and the daemons started here (SIGTERM, then SIGKILL), then every process left with the run's
        marker (slurmd started by a ResumeProgram, slurmstepd, jobs), by pid."""
        procs = [p for p in ([self.ctld] if self.ctld is not None else []) + self.procs if p.poll() is None]
        for proc in dict.fromkeys(procs):
            proc.send_signal(signal.SIGTERM)
        for proc in dict.fromkeys(procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        kill_marked(self.marker)

    def leftover(self) -> list[int]:
        return marked_pids(self.marker)

    # ------------------------------------------------------------------ commands
    def run(self, *argv: str, check: bool = False, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.wrap(*argv), env=self.env, capture_output=True, text=True, check=check, timeout=timeout)

    def scontrol(self, *args: str, check: bool = True) -> str:
        proc = self.run(SCONTROL, *args)
        if check and proc.returncode != 0:
            raise RuntimeError(f"scontrol {' '.join(args)}: {proc.stderr}")
        return proc.stdout

    def submit(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``sbatch --parsable`` in the run dir; the caller checks the result."""
        return self.run(SBATCH, "--parsable", f"--chdir={self.dir}", *args)

    def sbatch(self, *args: str) -> int:
        """``sbatch --parsable`` in the run dir: the job id (raises if sbatch fails)."""
        proc = self.submit(*args)
        if proc.returncode != 0:
            raise subprocess.CalledProcessError(proc.returncode, proc.args, proc.stdout, proc.stderr)
        return int(proc.stdout.strip().split(";")[0])

    def nodes(self) -> dict[str, NodeState]:
        return parse_show_nodes(self.scontrol("-o", "show", "nodes"))

    def node(self, name: str) -> dict[str, str]:
        """``scontrol show node``'s fields (a Reason may hold spaces)."""
        return dict(re.findall(r"(\w+)=(.*?)(?= \w+=|$)", self.scontrol("-o", "show", "node", name, check=False).strip()))

    def job(self, job_id: int) -> dict[str, str]:
        line = self.scontrol("-o", "show", "job", str(job_id), check=False)
        return dict(re.findall(r"(\w+)=(\S*)", line))

    def wait(self, what: str, condition: Callable[[], object], timeout: float, interval: float = 0.5) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not within {timeout} s\n{self.debug()}")
            time.sleep(interval)

    def wait_job(self, job_id: int, timeout: float, interval: float = 0.5) -> dict[str, str]:
        """The job's fields once it has ended (as seen then: a requeued job would not stay ended)."""
        seen: list[dict[str, str]] = [{}]

        def ended() -> bool:
            seen[0] = self.job(job_id)
            return seen[0].get("JobState") in ENDED

        self.wait(f"end of job {job_id}", ended, timeout, interval)
        return seen[0]

    # ------------------------------------------------------------------ logs
    def log(self, name: str) -> str:
        path = self.dir / "log" / name
        return path.read_text() if path.exists() else ""

    def debug(self, logs: Sequence[str] = ("slurmctld.log",), lines: int = 60) -> str:
        """The nodes' states and the tails of ``logs``, for an assertion's message."""
        parts = [self.scontrol("-o", "show", "nodes", check=False)]
        for name in logs:
            if (self.dir / "log" / name).exists():
                parts.append(f"--- {name}\n" + "\n".join(self.log(name).splitlines()[-lines:]))
        return "\n".join(parts)


def marked_pids(marker: str) -> list[int]:
    """The processes with ``MARKER_KEY=marker`` in their environment (this process aside)."""
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


def kill_marked(marker: str, signals: Sequence[int] = (signal.SIGKILL,) * 3, grace: float = 0.3) -> None:
    """Signal every process of the run (its marker) in rounds until none is left."""
    for sig in signals:
        pids = marked_pids(marker)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + grace
        while marked_pids(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
