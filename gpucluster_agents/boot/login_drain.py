#!/usr/bin/python3 -I
"""``gpucluster-login-drain``: a login node leaves its Auto Scaling group without cutting its users off (docs/people.md, "Logging in").

The login group ``<cluster>-login`` has a terminating lifecycle hook (``<cluster>-login-grace``, DefaultResult
CONTINUE, heartbeat = the grace). While the instance waits in ``Terminating:Wait`` this program, a systemd service
on every login node:

1. polls the instance metadata (IMDSv2) item ``latest/meta-data/autoscaling/target-lifecycle-state`` every
   ``poll_seconds``. Amazon EC2 Auto Scaling sets it to the steady state the instance is heading to: ``InService``,
   ``Terminated``, ``Detached``, ``Standby`` (and ``Warmed:*`` with a warm pool, which the login group has not) —
   Auto Scaling user guide, "Retrieve the target lifecycle state through instance metadata". Only ``Terminated``
   starts a drain; an unreadable metadata service is logged and polled again, never taken for ``Terminated``;
2. on ``Terminated``: ``wall``s the logged-in users (when the node stops, why, "save your work; your jobs keep
   running") and writes ``/run/nologin``, so that pam_nologin refuses new SSH logins (root aside). Session Manager
   sessions do not pass PAM and are NOT refused by it — the log says so to the administrators;
3. then at every poll: when no user process is left (a process whose real uid is a person's: 1000–59999 or 65536
   and above — below are system accounts, 60000–65535 Debian's allocated range with slurm's 64030 and nobody's
   65534), or once ``grace_seconds`` have passed, it completes the lifecycle action with
   ``CONTINUE`` (``autoscaling:CompleteLifecycleAction`` on its own group, which the login role allows) and exits 0.

No heartbeat is ever recorded: the hook's heartbeat timeout IS the grace (the hook takes 30–7200 s,
PutLifecycleHook, and the grace is 3–120 minutes), so the drain never needs more time than the hook gives. Should
the hook time out first (the drain saw ``Terminated`` up to one poll late), Auto Scaling applies its DefaultResult,
CONTINUE — the same decision; the program logs that the action had ended and exits 0.

Its config is ``/etc/gpucluster/login-drain.json`` = ``{"region", "asg_name", "hook_name", "grace_seconds",
"poll_seconds"}``, read strictly (schema: :mod:`gpucluster_agents.contract.login_drain`). It runs as root from a unit,
from the installed node package (``python3 -E -s -m gpucluster_agents.boot.login_drain``): the standard library, boto3
and the package's contract only, Python 3.9.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
import urllib.request
from typing import Any, Callable

from ..contract.login_drain import PATH, DrainConfig, parse_config

CONFIG = PATH
LOG = "/var/log/gpucluster/login-drain.log"
IMDS = "http://169.254.169.254"
NOLOGIN = "/run/nologin"
STATE_ITEM = "meta-data/autoscaling/target-lifecycle-state"
TERMINATED = "Terminated"
# seconds per request: the metadata service answers in milliseconds or not at all
IMDS_TIMEOUT = 2.0


def load_config(path: str) -> DrainConfig:
    try:
        with open(path) as fh:
            return parse_config(json.load(fh))
    # JSONDecodeError is a ValueError too
    except (OSError, ValueError) as exc:
        sys.exit(f"bad config {path}: {exc}")


def run_wall(message: str) -> None:
    subprocess.run(["wall"], input=message, text=True, timeout=30, check=True)


def _autoscaling(region: str) -> Any:
    import boto3

    return boto3.client("autoscaling", region_name=region)


def file_log(path: str) -> Callable[[str], None]:
    """Timestamped lines echoed to stdout (the journal) and appended to ``path`` (made 0640, its directory where
    missing; never through a link)."""

    def log(message: str) -> None:
        line = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} gpucluster-login-drain: {message}\n"
        print(line, end="", flush=True)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o640), "a") as fh:
                fh.write(line)
        except OSError:
            # the journal has the line
            pass

    return log


@dataclasses.dataclass
class Node:
    """What the drain touches on the node, as seams the tests replace: the metadata service's address, /proc, the
    nologin file, ``wall``, the clocks, the Auto Scaling client and the log."""

    imds: str = IMDS
    proc: str = "/proc"
    nologin: str = NOLOGIN
    wall: Callable[[str], None] = run_wall
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    autoscaling: Callable[[str], Any] = _autoscaling
    log: Callable[[str], None] = print
    pid: int = os.getpid()


def imds_get(base: str, item: str) -> str:
    """``/latest/<item>`` through IMDSv2 (a token first). An item that is not there (404: an instance outside an Auto
    Scaling group has no lifecycle state), a network error or another answer raises: the caller polls again."""
    ttl = {"X-aws-ec2-metadata-token-ttl-seconds": "60"}
    put = urllib.request.Request(base + "/latest/api/token", method="PUT", headers=ttl)
    with urllib.request.urlopen(put, timeout=IMDS_TIMEOUT) as r:
        token = r.read().decode()
    get = urllib.request.Request(base + "/latest/" + item, headers={"X-aws-ec2-metadata-token": token})
    with urllib.request.urlopen(get, timeout=IMDS_TIMEOUT) as r:
        return r.read().decode().strip()


def is_person(uid: int) -> bool:
    """A uid a person has: 1000 (login.defs UID_MIN) to 59999, or 65536 and above (a directory's mapped ids) —
    not a system account, nor Debian's allocated band 60000–65535 (slurm's 64030, nobody's 65534)."""
    return 1000 <= uid < 60000 or 65535 < uid < 4294967295


def user_processes(proc: str, own_pid: int) -> list[int]:
    """The real uid of every process of a person in ``proc``, the drain itself aside. A process that ends while it is
    read is skipped."""
    found: list[int] = []
    for entry in os.listdir(proc):
        try:
            with open(os.path.join(proc, entry, "status")) as fh:
                uid = int(next(line for line in fh if line.startswith("Uid:")).split()[1])
        except (OSError, StopIteration, ValueError, IndexError):
            # not a process (self, sys, …) or one that just ended
            continue
        if entry != str(own_pid) and is_person(uid):
            found.append(uid)
    return found


def wall_message(cfg: DrainConfig) -> str:
    return (
        f"This login node stops in {cfg.grace_seconds // 60} minutes ({cfg.asg_name} scales in), sooner once nobody is"
        " logged in.\nSave your work; log in again to reach another login node. Jobs keep running; /home stays.\n"
    )


def announce(node: Node, cfg: DrainConfig) -> None:
    """Tell the users (``wall``) and refuse new SSH logins (``/run/nologin``); neither failing stops the drain."""
    try:
        node.wall(wall_message(cfg))
    except (OSError, subprocess.SubprocessError) as exc:
        node.log(f"wall failed: {exc}")
    try:
        with open(node.nologin, "w") as fh:
            fh.write("Shutting down: log in again to reach another login node.\n")
        node.log(f"wrote {node.nologin}: no new SSH logins; Session Manager sessions (no PAM) still open")
    except OSError as exc:
        node.log(f"cannot write {node.nologin}: {exc}")


def complete(node: Node, cfg: DrainConfig, instance_id: str, client: Any) -> bool:
    """CompleteLifecycleAction(CONTINUE); True when the action is over (completed now, or already ended: the hook
    timed out), False to try again at the next poll (a network or throttling error)."""
    try:
        client.complete_lifecycle_action(
            LifecycleHookName=cfg.hook_name,
            AutoScalingGroupName=cfg.asg_name,
            LifecycleActionResult="CONTINUE",
            InstanceId=instance_id,
        )
    # botocore's ClientError and connection errors alike: sorted by their code
    except Exception as exc:
        code = getattr(exc, "response", {}).get("Error", {}).get("Code")
        # "No active Lifecycle Action found": the hook's own timeout came first
        if code == "ValidationError":
            node.log(f"the lifecycle action had already ended: {exc}")
            return True
        node.log(f"CompleteLifecycleAction failed, retrying: {exc!r}")
        return False
    node.log("completed the lifecycle action (CONTINUE)")
    return True


def drain(node: Node, cfg: DrainConfig, instance_id: str) -> int:
    """Steps 2 and 3 of the module: announce, then wait for the users or the grace, complete, 0."""
    announce(node, cfg)
    deadline = node.clock() + cfg.grace_seconds
    client = None
    while True:
        users = user_processes(node.proc, node.pid)
        if not users or node.clock() >= deadline:
            node.log("grace over" if users else "no user process left")
            client = client or node.autoscaling(cfg.region)
            if complete(node, cfg, instance_id, client):
                return 0
        else:
            node.log(f"waiting for uids {sorted(set(users))}")
        node.sleep(cfg.poll_seconds)


def watch(node: Node, cfg: DrainConfig, polls: int | None = None) -> int | None:
    """Step 1: poll the target lifecycle state; on ``Terminated`` drain and return its status. ``polls`` bounds the
    watch (tests); None returned when it ran out without a drain."""
    count = 0
    while polls is None or count < polls:
        count += 1
        try:
            state = imds_get(node.imds, STATE_ITEM)
            instance_id = imds_get(node.imds, "meta-data/instance-id") if state == TERMINATED else None
        # URLError, timeouts, torn answers: whatever it is, the state is not known (never taken for Terminated)
        except Exception as exc:
            node.log(f"IMDS not readable: {exc}")
            state = instance_id = None
        if state == TERMINATED and instance_id:
            node.log(f"{instance_id} is terminating: draining")
            return drain(node, cfg, instance_id)
        node.sleep(cfg.poll_seconds)
    return None


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser("gpucluster-login-drain", description="Drain a login node on scale-in.")
    p.add_argument("config", nargs="?", default=CONFIG)
    p.add_argument("--log", default=LOG)
    args = p.parse_args(argv)
    cfg = load_config(args.config)
    node = Node(log=file_log(args.log))
    node.log(f"watching {cfg.asg_name}")
    return watch(node, cfg) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
