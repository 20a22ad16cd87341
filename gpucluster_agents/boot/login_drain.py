#!/usr/bin/python3 -I
"""``gpucluster-login-drain``: a login node leaves its Auto Scaling group without cutting its users off (design D14).

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
   65534, design F13), or once ``grace_seconds`` have passed, it completes the lifecycle action with
   ``CONTINUE`` (``autoscaling:CompleteLifecycleAction`` on its own group, which the login role allows) and exits 0.

No heartbeat is ever recorded: the hook's heartbeat timeout IS the grace (design D14; the hook takes 30–7200 s,
PutLifecycleHook, and the grace is 3–120 minutes), so the drain never needs more time than the hook gives. Should
the hook time out first (the drain saw ``Terminated`` up to one poll late), Auto Scaling applies its DefaultResult,
CONTINUE — the same decision; the program logs that the action had ended and exits 0.

Its config is ``/etc/gpucluster/login-drain.json`` = ``{"region", "asg_name", "hook_name", "grace_seconds",
"poll_seconds"}`` (design section 13), read strictly. It runs as root from a unit, before anything of the node
package is installed, so it imports nothing from ``gpucluster_agents``: stdlib and boto3 only, Python 3.9.
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Callable

CONFIG = "/etc/gpucluster/login-drain.json"
LOG = "/var/log/gpucluster/login-drain.log"
IMDS = os.environ.get("GPUCLUSTER_IMDS", "http://169.254.169.254")
NOLOGIN = "/run/nologin"
STATE_ITEM = "meta-data/autoscaling/target-lifecycle-state"
TERMINATED = "Terminated"
IMDS_TIMEOUT = 2.0  # s per request: the metadata service answers in milliseconds or not at all
UID_MIN, SYSTEM_BAND, ID_MAX = 1000, (60000, 65535), 4294967294  # login.defs UID_MIN; Debian's allocated band

_INTS = {"grace_seconds": (30, 7200), "poll_seconds": (1, 300)}  # the hook's heartbeat bounds (PutLifecycleHook)
_STRINGS = ("region", "asg_name", "hook_name")


@dataclasses.dataclass(frozen=True)
class DrainConfig:
    """The login group's values, as the user data writes them to :data:`CONFIG`."""

    region: str
    asg_name: str
    hook_name: str
    grace_seconds: int
    poll_seconds: int


class DrainConfigError(ValueError):
    """The config is not what :class:`DrainConfig` describes; the message lists every problem."""


def parse_config(doc: Any) -> DrainConfig:
    """A :class:`DrainConfig` from a decoded JSON document; a missing, unknown or mistyped key is an error, all
    reported at once (a drain that silently used a default would cut users off or never complete)."""
    if not isinstance(doc, dict):
        raise DrainConfigError(f"must be a JSON object, got {type(doc).__name__}")
    allowed = (*_STRINGS, *_INTS)
    errors = [f"{k}: unknown key (allowed: {', '.join(sorted(allowed))})" for k in sorted(set(doc) - set(allowed))]
    errors += [f"{k}: required key is missing" for k in allowed if k not in doc]
    for key in _STRINGS:
        if key in doc and (not isinstance(doc[key], str) or not doc[key].strip()):
            errors.append(f"{key}: must be a non-empty string, got {doc[key]!r}")
    for key, (low, high) in _INTS.items():
        value = doc.get(key)
        if key in doc and (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high):
            errors.append(f"{key}: must be a whole number of seconds from {low} to {high}, got {value!r}")
    if errors:
        raise DrainConfigError("; ".join(errors))
    return DrainConfig(doc["region"], doc["asg_name"], doc["hook_name"], doc["grace_seconds"], doc["poll_seconds"])


def load_config(path: str) -> DrainConfig:
    try:
        with open(path) as fh:
            return parse_config(json.load(fh))
    except (OSError, ValueError) as exc:  # DrainConfigError and JSONDecodeError are ValueErrors
        sys.exit(f"gpucluster-login-drain: bad config {path}: {exc}")


def run_wall(message: str) -> None:
    subprocess.run(["wall"], input=message, text=True, timeout=30, check=True)


def _autoscaling(region: str) -> Any:
    import boto3

    return boto3.client("autoscaling", region_name=region, endpoint_url=os.environ.get("GPUCLUSTER_AUTOSCALING_ENDPOINT"))


class FileLog:
    """Timestamped lines appended to a file (made 0640 with its directory where missing) and echoed to stdout."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, message: str) -> None:
        line = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} gpucluster-login-drain: {message}\n"
        sys.stdout.write(line)
        sys.stdout.flush()
        try:
            os.makedirs(os.path.dirname(self.path) or ".", mode=0o755, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o640)
            with os.fdopen(fd, "a") as fh:
                fh.write(line)
        except OSError as exc:
            sys.stderr.write(f"gpucluster-login-drain: cannot write {self.path}: {exc}\n")


@dataclasses.dataclass
class Node:
    """What the drain touches on the node, as seams the tests replace: the metadata service's address, /proc, the
    nologin file, ``wall``, the clocks, the Auto Scaling client and the log."""

    imds: str = IMDS
    proc: str = "/proc"
    nologin: str = NOLOGIN
    wall: Callable[[str], None] = run_wall
    clock: Callable[[], float] = time.monotonic
    now: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    autoscaling: Callable[[str], Any] = _autoscaling
    log: Callable[[str], None] = print
    pid: int = dataclasses.field(default_factory=os.getpid)


def imds_get(base: str, item: str) -> str | None:
    """``/latest/<item>`` through IMDSv2 (a token first); None when the service has no such item (404). Network
    errors and other answers raise."""
    ttl = {"X-aws-ec2-metadata-token-ttl-seconds": "60"}
    put = urllib.request.Request(base + "/latest/api/token", method="PUT", headers=ttl)
    with urllib.request.urlopen(put, timeout=IMDS_TIMEOUT) as r:
        token = r.read().decode()
    get = urllib.request.Request(base + "/latest/" + item, headers={"X-aws-ec2-metadata-token": token})
    try:
        with urllib.request.urlopen(get, timeout=IMDS_TIMEOUT) as r:
            return r.read().decode().strip()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def is_person(uid: int) -> bool:
    """A uid a person has (declared users 1000–59999 or 65536+, a directory's mapped ids); not a system account."""
    return UID_MIN <= uid <= ID_MAX and not SYSTEM_BAND[0] <= uid <= SYSTEM_BAND[1]


def user_processes(proc: str, own_pid: int) -> list[tuple[int, int]]:
    """``(pid, real uid)`` of every process of a person in ``proc``, the drain itself aside. A process that ends
    while it is read is skipped."""
    found: list[tuple[int, int]] = []
    for entry in os.listdir(proc):
        if not entry.isdigit() or int(entry) == own_pid:
            continue
        try:
            with open(os.path.join(proc, entry, "status")) as fh:
                uid_line = next((line for line in fh if line.startswith("Uid:")), "")
        except OSError:
            continue
        fields = uid_line.split()
        if len(fields) >= 2 and fields[1].isdigit() and is_person(int(fields[1])):
            found.append((int(entry), int(fields[1])))
    return found


def wall_message(cfg: DrainConfig, stop_at: float) -> str:
    when = time.strftime("%H:%M UTC", time.gmtime(stop_at))
    minutes = max(1, round(cfg.grace_seconds / 60))
    return (
        f"This login node is being removed from {cfg.asg_name} (the cluster's login nodes are scaling in).\n"
        f"It stops at {when} (in {minutes} minutes), or earlier once nobody is logged in.\n"
        "Save your work and log out; log in again to reach another login node.\n"
        "Your Slurm jobs keep running on the compute nodes, and your files in /home stay.\n"
    )


def announce(node: Node, cfg: DrainConfig) -> None:
    """Tell the users (``wall``) and refuse new SSH logins (``/run/nologin``); neither failing stops the drain."""
    try:
        node.wall(wall_message(cfg, node.now() + cfg.grace_seconds))
    except (OSError, subprocess.SubprocessError) as exc:
        node.log(f"wall failed: {exc}")
    try:
        with open(node.nologin, "w") as fh:
            fh.write("This login node is shutting down (Auto Scaling scale-in). Log in again to reach another one.\n")
        node.log(
            f"wrote {node.nologin}: new SSH logins are refused (pam_nologin; root excepted). Session Manager "
            "sessions do not pass PAM and still open until the instance stops."
        )
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
    except Exception as exc:  # botocore's ClientError and connection errors alike: sorted by their code
        code = getattr(exc, "response", {}).get("Error", {}).get("Code")
        if code == "ValidationError":  # "No active Lifecycle Action found": the hook's own timeout came first
            node.log(f"the lifecycle action of {instance_id} had already ended ({exc}); its default result is CONTINUE")
            return True
        node.log(f"CompleteLifecycleAction failed, trying again at the next poll: {exc!r}")
        return False
    node.log(f"completed {cfg.hook_name} for {instance_id} with CONTINUE: the instance terminates now")
    return True


def drain(node: Node, cfg: DrainConfig, instance_id: str) -> int:
    """Steps 2 and 3 of the module: announce, then wait for the users or the grace, complete, 0."""
    announce(node, cfg)
    deadline = node.clock() + cfg.grace_seconds
    client = None
    while True:
        users = user_processes(node.proc, node.pid)
        over = node.clock() >= deadline
        if not users or over:
            why = "the grace period is over" if users else "no user process is left"
            if client is None:
                client = node.autoscaling(cfg.region)
            node.log(f"{why} ({len(users)} user processes); completing the lifecycle action")
            if complete(node, cfg, instance_id, client):
                return 0
        else:
            uids = sorted({uid for _, uid in users})
            node.log(f"waiting: {len(users)} processes of uids {uids}; {deadline - node.clock():.0f} s of grace left")
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
        except (OSError, ValueError, http.client.HTTPException) as exc:  # URLError, timeouts, torn answers
            node.log(f"instance metadata not readable ({exc}); polling again in {cfg.poll_seconds} s")
            state = instance_id = None
        if state == TERMINATED and instance_id:
            node.log(f"{instance_id}: target lifecycle state {state}; draining ({cfg.grace_seconds} s of grace)")
            return drain(node, cfg, instance_id)
        node.sleep(cfg.poll_seconds)
    return None


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="gpucluster-login-drain",
        description="Drain this login node when its Auto Scaling group terminates it: warn the users, refuse new SSH "
        "logins, complete the lifecycle action once no user process is left or the grace is over.",
    )
    p.add_argument("--config", default=CONFIG, help=f"the drain's JSON config (default {CONFIG})")
    p.add_argument("--log", default=LOG, help=f"append the drain's log here (default {LOG})")
    args = p.parse_args(argv)
    cfg = load_config(args.config)
    node = Node(log=FileLog(args.log))
    node.log(f"watching {cfg.asg_name} (hook {cfg.hook_name}, grace {cfg.grace_seconds} s, poll {cfg.poll_seconds} s)")
    status = watch(node, cfg)
    return 0 if status is None else status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
