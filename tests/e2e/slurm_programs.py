"""ResumeProgram / SuspendProgram / ResumeFailProgram of the end-to-end tests.

slurmctld runs a two-line shell script that execs ``python slurm_programs.py SETTINGS COMMAND HOSTLIST``.
This runs the real agent (``python -m gpucluster_agents``), then stands in for the cloud:
- resume: for every node the agent really launched an instance for (looked up in moto by the
  node-name tag), start ``slurmd -N <node>``: "the instance booted". A node without an
  instance never comes up, nor does one of a group listed in the settings' ``never_boot``.
- suspend / resume-fail: stop the slurmd of every node that no longer has an instance.

Measured gotchas handled here (FACTS.md): slurmctld gives no PATH (absolute paths only); children
inherit a blocked signal mask (cleared first, or slurmd ignores SIGTERM); stdin must be /dev/null
(or slurmd's log lands on fd 0); slurmd reports host uptime, so the LD_PRELOAD shim makes it 0
(else slurmctld keeps it "still waiting for boot" until ResumeTimeout).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def log(settings: dict[str, Any], msg: str) -> None:
    with open(Path(settings["log_dir"]) / "programs.log", "a") as fh:
        fh.write(f"{time.strftime('%H:%M:%S')} [{os.getpid()}] {msg}\n")


def live_nodes(settings: dict[str, Any]) -> dict[str, list[str]]:
    import boto3

    ec2 = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1").client(
        "ec2", endpoint_url=settings["moto_url"]
    )
    out: dict[str, list[str]] = {}
    for page in ec2.get_paginator("describe_instances").paginate(
        Filters=[
            {"Name": "tag:gpucluster:cluster", "Values": [settings["cluster"]]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ]
    ):
        for res in page["Reservations"]:
            for inst in res["Instances"]:
                tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
                if "gpucluster:node-name" in tags:
                    out.setdefault(tags["gpucluster:node-name"], []).append(inst["InstanceId"])
    return out


def pid_file(settings: dict[str, Any], node: str) -> Path:
    return Path(settings["pid_dir"]) / f"slurmd-{node}.pid"


def start_slurmd(settings: dict[str, Any], node: str, env: dict[str, str]) -> None:
    p = pid_file(settings, node)
    if p.exists():
        try:
            os.kill(int(p.read_text()), 0)
            log(settings, f"slurmd {node} already running")
            return
        except (OSError, ValueError):
            pass
    denv = dict(env)
    denv["LD_PRELOAD"] = settings["uptime_shim"]
    with open(Path(settings["log_dir"]) / f"slurmd-{node}.out", "ab") as out:
        proc = subprocess.Popen(
            [settings["slurmd"], "-D", "-N", node],
            env=denv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    p.write_text(str(proc.pid))
    log(settings, f"started slurmd {node} pid={proc.pid}")


def stop_slurmds(settings: dict[str, Any], nodes: list[str]) -> None:
    """SIGTERM the nodes' slurmd (all at once), SIGKILL what is left after 5 s: "the instance is gone"."""
    pids: dict[int, str] = {}
    for node in nodes:
        p = pid_file(settings, node)
        if p.exists():
            pids[int(p.read_text())] = node
            p.unlink()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + 5
    alive = set(pids)
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        for pid in list(alive):
            try:
                os.kill(pid, 0)
            except OSError:
                alive.discard(pid)
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for pid, node in pids.items():
        log(settings, f"stopped slurmd {node} pid={pid}{' (SIGKILL)' if pid in alive else ''}")


def agent_env(settings: dict[str, Any]) -> dict[str, str]:
    """The agent's environment: what slurmctld gives a program (no PATH of its own), plus the test's
    AWS credentials for moto."""
    return {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "SLURM_CONF": settings["slurm_conf"],
        "GPUCLUSTER_AGENT_CONFIG": settings["agent_config"],
        "PYTHONPATH": settings["repo"],
        settings["marker_key"]: settings["marker"],
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def main(argv: list[str]) -> int:
    # A clean slate for our children: slurmctld's blocked signals and ignored dispositions are inherited.
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    settings: dict[str, Any] = json.loads(Path(argv[0]).read_text())
    command, hostlist = argv[1], argv[2] if len(argv) > 2 else ""
    env = agent_env(settings)
    log(settings, f"{command} {hostlist} PATH={os.environ.get('PATH')!r}")
    t = time.monotonic()
    with open(Path(settings["log_dir"]) / "agent.out", "ab") as out:
        rc = subprocess.run(
            [settings["python"], "-m", "gpucluster_agents", command, hostlist],
            env=env,
            cwd=settings["repo"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        ).returncode
    log(settings, f"agent {command} {hostlist} rc={rc} in {time.monotonic() - t:.2f}s")
    nodes = subprocess.run(
        [settings["scontrol"], "show", "hostnames", hostlist], env=env, capture_output=True, text=True, check=False
    ).stdout.split()
    live = live_nodes(settings)
    if command == "resume":
        never_boot = tuple(f"{g}-" for g in settings.get("never_boot", []))  # node groups whose image is "broken"
        for node in nodes:
            if live.get(node) and not node.startswith(never_boot):
                start_slurmd(settings, node, env)
    else:
        stop_slurmds(settings, [n for n in nodes if not live.get(n)])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
