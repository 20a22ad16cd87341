"""A stand-in for scontrol in the agent's unit tests (the end-to-end tests use the real one).

Usage: fake_scontrol.py STATE_JSON <scontrol args...>. It keeps node states in STATE_JSON
(``{"nodes": {name: {"state": "IDLE+CLOUD+POWERED_DOWN", "reason": null, "addr": null}}}``),
appends every call to STATE_JSON + ".calls" (one JSON list per line) and understands the
subset of scontrol the agent uses: show hostnames, -o show nodes, update (nodeaddr / state=down,
resume, power_down_force, drain), reconfigure, and the re-baseline's reservations and job (create / delete
reservation, -o show job, update jobid= admincomment=). ``"fail_hostnames": true`` in the state makes
``show hostnames`` fail (to exercise the agent's built-in expander). ``"unreachable": true`` makes every
call but ``show hostnames`` (which needs no controller) fail as scontrol does while slurmctld is away.
``"kill_parent_on": TEXT`` SIGKILLs the calling process (the agent) right after an ``update`` whose
arguments contain TEXT took effect: a crash just after that call (only with an agent run as its own
process, ``Harness.spawn``: in-process the caller is the test itself).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpucluster_agents.contract import hostlist


def _flags(state: str) -> list[str]:
    return [f for f in state.split("+") if f]


def _set_base(flags: list[str], base: str) -> list[str]:
    bases = {"IDLE", "DOWN", "ALLOCATED", "MIXED"}
    return [base] + [f for f in flags if f not in bases]


def main(argv: list[str]) -> int:
    path = Path(argv[0])
    args = argv[1:]
    with open(str(path) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data: dict[str, Any] = json.loads(path.read_text())
        with open(str(path) + ".calls", "a") as calls:
            calls.write(json.dumps(args) + "\n")
        nodes: dict[str, dict[str, Any]] = data["nodes"]
        if args[:2] == ["show", "hostnames"]:
            if data.get("fail_hostnames"):
                print("scontrol: error: injected failure", file=sys.stderr)
                return 1
            print("\n".join(hostlist.expand(args[2])))
            return 0
        if data.get("unreachable"):
            print("Unable to contact slurm controller (connect failure)", file=sys.stderr)
            return 1
        if args[:3] == ["-o", "show", "nodes"]:
            for name in sorted(nodes, key=hostlist.order_key):
                n = nodes[name]
                line = f"NodeName={name} Arch=x86_64 NodeAddr={n.get('addr') or name} State={n['state']} Partitions=x"
                if n.get("reason"):
                    line += f" Reason={n['reason']} [root@2026-01-01T00:00:00]"
                print(line)
            return 0
        if args == ["reconfigure"]:
            return 0
        if (
            args[:1] in (["create"], ["delete"])
            or args[:3] == ["-o", "show", "job"]
            or (args[1:2] and args[1].startswith("jobid="))
        ):
            return _jobs(data, path, args)
        if args and args[0] == "update":
            kv = dict(a.split("=", 1) for a in args[1:])
            names = hostlist.expand(kv["nodename"])
            unknown = [n for n in names if n not in nodes]
            if unknown:
                print(f"Invalid node name specified {unknown[0]}", file=sys.stderr)
                return 1
            if "nodeaddr" in kv:
                addrs = kv["nodeaddr"].split(",")
                if len(addrs) != len(names):
                    print("NodeAddr count mismatch", file=sys.stderr)
                    return 1
                for name, addr in zip(names, addrs, strict=True):
                    nodes[name]["addr"] = addr
            state = kv.get("state", "").lower()
            for name in names:
                flags = _flags(nodes[name]["state"])
                if state == "down":
                    flags = _set_base(flags, "DOWN")
                    nodes[name]["reason"] = kv.get("reason", "")
                elif state == "resume":
                    flags = [f for f in _set_base(flags, "IDLE") if f != "DRAIN"]
                    nodes[name]["reason"] = None
                elif state == "drain":
                    flags = [*flags, "DRAIN"] if "DRAIN" not in flags else flags
                    nodes[name]["reason"] = kv.get("reason", "")
                elif state == "power_down_force":
                    flags = _set_base(flags, "IDLE")
                    flags = [f for f in flags if f not in ("POWERING_UP", "POWERED_DOWN", "DRAIN", "NOT_RESPONDING")]
                    flags.append("POWERING_DOWN")
                    nodes[name]["reason"] = kv.get("reason") or None
                elif state == "drain":
                    flags = flags + ([] if "DRAIN" in flags else ["DRAIN"])
                    nodes[name]["reason"] = kv.get("reason", "")
                elif state:
                    print(f"unsupported state {state}", file=sys.stderr)
                    return 1
                nodes[name]["state"] = "+".join(flags)
            path.write_text(json.dumps(data, indent=1))
            if data.get("kill_parent_on") and data["kill_parent_on"] in " ".join(args):
                os.kill(os.getppid(), signal.SIGKILL)
            return 0
        print(f"fake scontrol: unsupported {args}", file=sys.stderr)
        return 1


def _jobs(data: dict[str, Any], path: Path, args: list[str]) -> int:
    """Reservations (create / delete) and jobs (``-o show job``, ``update jobid= admincomment=``), kept under
    ``reservations`` and ``jobs`` (fake_sbatch.py adds jobs), with Slurm 22.05's error texts."""
    reservations: dict[str, Any] = data.setdefault("reservations", {})
    jobs: dict[str, Any] = data.setdefault("jobs", {})
    if args[:2] == ["create", "reservation"]:
        kv = dict(a.split("=", 1) for a in args[2:])
        name = kv.get("ReservationName", "")
        if name in reservations:
            print("Error creating the reservation: Duplicate reservation name", file=sys.stderr)
            return 1
        reservations[name] = kv
        print(f"Reservation created: {name}")
    elif args[:2] == ["delete", "reservation"]:
        if any(j["options"].get("reservation") == args[2] and j["state"] in ("PENDING", "RUNNING") for j in jobs.values()):
            print("delete_reservation reservation: Requested reservation is in use", file=sys.stderr)
            return 1
        if reservations.pop(args[2], None) is None:
            print("delete_reservation reservation: Requested reservation is invalid", file=sys.stderr)
            return 1
    elif args[:3] == ["-o", "show", "job"]:
        job = jobs.get(args[3])
        if job is None:
            print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
            return 1
        comment = f" AdminComment={job['admin_comment']}" if job.get("admin_comment") else ""
        print(
            f"JobId={args[3]} JobName={job['name']} UserId=slurm(64030) JobState={job['state']} Reason=None{comment} NodeList={job['nodes']}"
        )
        return 0
    else:
        kv = dict(a.split("=", 1) for a in args[1:])
        job = jobs.get(kv["jobid"])
        if job is None:
            print("Invalid job id specified", file=sys.stderr)
            return 1
        job["admin_comment"] = kv.get("admincomment", job.get("admin_comment"))
    path.write_text(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
