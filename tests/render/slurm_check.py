"""Run the real Slurm daemons (Debian's 22.05) over rendered config files, the way FACTS.md measured:
``timeout 5 slurmctld -D -c`` keeps running (exit 124) on a valid config and exits 1 on an invalid
one; slurmdbd does the same with slurmdbd.conf (it then waits for its database).

Only what cannot work on this machine is changed before the check, each named in CHECK_OVERRIDES:
the controller's host name (slurmctld refuses to run on a host slurm.conf does not name), users and
authentication (no munged here), ports and paths (throwaway ones), the power-saving programs (the
agent's wrappers exist on head nodes only) and the accounting store (a slurmdbd needs a database;
slurmdbd.conf is checked on its own) with the two keys slurmctld refuses without one: AccountingStorageTRES (its
``gres/gpu`` needs slurmdbd) and AccountingStorageEnforce, and the partitions' TRESBillingWeights (its ``GRES/gpu``
must be an accounted TRES: 22.05 says "TRES weight 'GRES:gpu' is not a configured TRES type" and stops). The real
slurmdbd tests of the teams read those. Every other line is checked as rendered.
"""

from __future__ import annotations

import re
import socket
import subprocess
import tempfile
import time
from pathlib import Path

SLURMCTLD = "/usr/sbin/slurmctld"
SLURMDBD = "/usr/sbin/slurmdbd"

# Log lines that say nothing about the config: no state yet, no PMIx library here, configless notes.
HARMLESS = (
    "state file",
    "Trying backup state save file",
    "pmix",
    "MPI: Cannot create context",
    "Job accounting information gathered, but not stored",
    "you have asked for it not to be stored",
    # the age and fair-share weights with the accounting store stubbed (the head node runs slurmdbd)
    "can only be used with SlurmDBD, ignoring",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _patch(text: str, values: dict[str, str | None]) -> str:
    """``text`` with the lines of ``values``' keys set to their value (None: the line left out)."""
    out = []
    for line in text.splitlines():
        key = line.split("=", 1)[0] if "=" in line and not line.startswith("#") else ""
        if key in values:
            value = values[key]
            if value is not None:
                out.append(f"{key}={value}")
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def check_overrides(run_dir: Path, inner: Path | None = None) -> dict[str, str | None]:
    """The lines changed for the check; paths as the daemon sees them (``inner``: ``run_dir`` inside a chroot)."""
    stub = run_dir / "program"
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    seen = inner or run_dir
    return {
        "SlurmctldHost": "localhost",
        "SlurmUser": "root",
        "AuthType": "auth/none",
        "CredType": "cred/none",
        "SlurmctldPort": str(free_port()),
        "SlurmdPort": str(free_port()),
        "StateSaveLocation": str(seen / "state"),
        "SlurmctldPidFile": str(seen / "slurmctld.pid"),
        "SlurmctldLogFile": str(seen / "slurmctld.log"),
        "ResumeProgram": str(seen / "program"),
        "SuspendProgram": str(seen / "program"),
        "ResumeFailProgram": str(seen / "program"),
        "AccountingStorageType": "accounting_storage/none",
        "AccountingStorageTRES": None,
        "AccountingStorageEnforce": None,
    }


BILLING_WEIGHTS = re.compile(r' TRESBillingWeights="[^"]*"')
"""A partition's billing weights: left out with the accounting store (see the module's docstring)."""
READ_TO_THE_END = "Running as primary controller"
"""slurmctld's log line once it has read and checked every file (FACTS.md); every config error comes before it."""
SETTLE = 1.0
"""Seconds slurmctld keeps running after that line before the check stops it (as ``timeout`` would): a config
it would still refuse shows in that time (the first log lines after it come within milliseconds)."""


def check_slurmctld(files: dict[str, str], run_dir: Path, timeout: int = 3, root: Path | None = None) -> tuple[int, list[str]]:
    """Write ``files`` (slurm.conf, gres.conf, cgroup.conf, topology.conf) into ``run_dir`` and run
    ``slurmctld -D -c`` on them. Returns (exit status, error/fatal lines that matter); a config that
    was read to the end also leaves "Running as primary controller" in the log (else a problem).

    The exit status is ``timeout``'s: 124 when slurmctld was still running when stopped. It is stopped
    ``SETTLE`` seconds after it logged that it read its files, or after ``timeout`` seconds if it never did
    (a loaded machine gets at least ``timeout``, as before, never less); an invalid config makes it exit.

    ``root``: run the slurmctld of that root file system (another Slurm version, see ``slurm_versions.py``)
    under chroot; ``run_dir`` must then lie inside it."""
    inner = Path("/") / run_dir.relative_to(root) if root else None
    (run_dir / "state").mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        if name == "slurm.conf":
            text = BILLING_WEIGHTS.sub("", _patch(text, check_overrides(run_dir, inner)))
        (run_dir / name).write_text(text)
    log_path = run_dir / "slurmctld.log"
    command = [*(["chroot", str(root)] if root else []), SLURMCTLD, "-D", "-c"]
    returncode, stderr = _run_until(
        command,
        {"SLURM_CONF": str((inner or run_dir) / "slurm.conf"), "PATH": "/usr/sbin:/usr/bin:/bin"},
        lambda: log_path.exists() and READ_TO_THE_END in log_path.read_text(errors="replace"),
        timeout,
    )
    log = log_path.read_text() if log_path.exists() else stderr
    problems = _problems(log)
    if returncode == 124 and READ_TO_THE_END not in log:
        problems.append("slurmctld never got past reading its configuration")
    return returncode, problems


def _run_until(command: list[str], env: dict[str, str], ready, timeout: float) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    """Run ``command`` until it exits (its status) or, still running ``SETTLE`` s after ``ready()`` or at
    ``timeout``, stop it with SIGTERM as ``timeout(1)`` would (124). Returns (status, stderr)."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + timeout
        try:
            while proc.poll() is None and time.monotonic() < deadline:
                if ready():
                    deadline = min(deadline, time.monotonic() + SETTLE)
                    try:
                        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        pass
                    break
                time.sleep(0.02)
            returncode = proc.poll()
            if returncode is None:
                proc.terminate()
                proc.wait(timeout=30)
                returncode = 124
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err.seek(0)
        return returncode, err.read().decode(errors="replace")


def check_slurmdbd(slurmdbd_conf: str, run_dir: Path, timeout: int = 3) -> tuple[int, list[str]]:
    """slurmdbd reads slurmdbd.conf next to $SLURM_CONF; with a valid one it keeps running (waiting
    for MariaDB), with an invalid one it exits."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "slurm.conf").write_text("ClusterName=check\nSlurmctldHost=localhost\n")
    conf = _patch(
        slurmdbd_conf,
        {
            "AuthType": "auth/none",
            "SlurmUser": "root",
            "DbdPort": str(free_port()),
            "LogFile": str(run_dir / "slurmdbd.log"),
            "PidFile": str(run_dir / "slurmdbd.pid"),
        },
    )
    path = run_dir / "slurmdbd.conf"
    path.write_text(conf)
    path.chmod(0o600)
    proc = subprocess.run(
        ["timeout", str(timeout), SLURMDBD, "-D"],
        env={"SLURM_CONF": str(run_dir / "slurm.conf"), "PATH": "/usr/sbin:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    log = (run_dir / "slurmdbd.log").read_text() if (run_dir / "slurmdbd.log").exists() else proc.stderr
    problems = [p for p in _problems(log) if "mysql" not in p.lower() and "database must be up" not in p]
    return proc.returncode, problems


def _problems(log: str) -> list[str]:
    return [
        line
        for line in log.splitlines()
        if ("error:" in line or "fatal:" in line) and not any(h.lower() in line.lower() for h in HARMLESS)
    ]


def conf_files(ctx) -> dict[str, str]:
    """The files slurmctld reads and serves (configless), rendered for ``ctx`` (its target Slurm version)."""
    from gpucluster.render.slurm.conf import cgroup_conf, gres_conf, slurm_conf, topology_conf
    from gpucluster.render.slurm.privacy import job_container_conf

    return {
        "slurm.conf": slurm_conf(ctx),
        "gres.conf": gres_conf(ctx),
        "cgroup.conf": cgroup_conf(ctx),
        "topology.conf": topology_conf(ctx),
        "job_container.conf": job_container_conf(ctx),
    }
