"""A stand-in for sbatch and scancel in the agent's unit tests, sharing fake_scontrol.py's state file.

Usage: fake_sbatch.py STATE_JSON {sbatch|scancel} <args...>. ``sbatch`` records the job (its options, the script
read from stdin) under ``jobs`` as PENDING and prints its id (``--parsable``); a ``--reservation`` that does
not exist is refused as Slurm refuses it. ``scancel ID`` marks the job CANCELLED. Calls are appended to
STATE_JSON + ".calls" like scontrol's, prefixed with the program's name.
"""

from __future__ import annotations

import fcntl
import json
import sys
from pathlib import Path
from typing import Any


def main(argv: list[str]) -> int:
    path, program, args = Path(argv[0]), argv[1], argv[2:]
    with open(str(path) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data: dict[str, Any] = json.loads(path.read_text())
        with open(str(path) + ".calls", "a") as calls:
            calls.write(json.dumps([program, *args]) + "\n")
        jobs: dict[str, Any] = data.setdefault("jobs", {})
        if program == "scancel":
            if args[0] in jobs:
                jobs[args[0]]["state"] = "CANCELLED"
        else:
            opts = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
            if opts.get("reservation") and opts["reservation"] not in data.get("reservations", {}):
                print("sbatch: error: Batch job submission failed: Requested reservation is invalid", file=sys.stderr)
                return 1
            job = str(1000 + len(jobs))
            jobs[job] = {"name": opts.get("job-name", "sbatch"), "state": "PENDING", "nodes": opts.get("nodelist", ""),
                         "options": opts, "script": sys.stdin.read(), "admin_comment": None}  # fmt: skip
            print(job)
        path.write_text(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
