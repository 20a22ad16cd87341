#!/usr/bin/env python3
"""Benchmark: the head node's accounts reconcile on 100 teams and 2,000 users, against a real MariaDB +
slurmdbd 22.05 + slurmctld started here (the fixture of the tests, ``tests/e2e/slurmdbd.py``; needs root).

    sudo python bench/teams_reconcile.py [--teams 100] [--users 2000]

The contract is the shape the renderer writes: every team with its own fair share, GPU guarantee and maximum job
time, QOS ``normal`` + ``borrow``, 20 declared users each (``--users`` spread evenly), every tenth team sharing
half its users with the next one (a user in two teams: two associations). The first reconcile creates everything,
the second must find nothing to change. Prints each sacctmgr/squeue call (the first pass's load file's size too), and
ends with ``first reconcile F s, second S s, changes on second C``. Targets (a 2-core machine): F ≤ 60, S ≤ 10,
C = 0; exit 1 when one is missed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpucluster_agents.accounts.reconcile import reconcile  # noqa: E402
from gpucluster_agents.accounts.slurmdb import Result, SlurmDb  # noqa: E402
from gpucluster_agents.contract.accounts import parse  # noqa: E402
from tests.e2e.slurmdbd import AccountingSlurm, missing_tools, run_dir  # noqa: E402

CLUSTER = "bench"
QOS: list[dict[str, Any]] = [
    {"name": "normal", "description": "gpucluster: guaranteed jobs", "priority": 100, "preempt": ["borrow"],
     "preempt_mode": "cluster", "grp_tres": {}, "max_wall_minutes": None},
    {"name": "borrow", "description": "gpucluster: opportunistic jobs beyond a team's guarantee, requeued when needed",
     "priority": 0, "preempt": [], "preempt_mode": "requeue", "grp_tres": {"gres/gpu": 512}, "max_wall_minutes": None},
]  # fmt: skip


def contract(teams: int, users: int) -> dict[str, Any]:
    per = max(1, users // teams)
    accounts: list[dict[str, Any]] = []
    for t in range(teams):
        members = [f"user{t * per + i:05d}" for i in range(per)]
        if t % 10 == 9 and t + 1 < teams:  # half of this team also works in the next one
            members += [f"user{(t + 1) * per + i:05d}" for i in range(per // 2)]
        accounts.append(
            {
                "name": f"team{t:03d}",
                "description": f"gpucluster: team team{t:03d}",
                "fairshare": 1 + t % 50,
                "grp_tres": {"gres/gpu": 8 * (1 + t % 16)},
                "max_wall_minutes": None if t % 3 == 0 else 1440 * (1 + t % 7),
                "qos": ["normal", "borrow"] if t % 2 else ["normal"],
                "default_qos": "normal",
                "users": members,
                "groups": [],
            }
        )
    return {"schema": 1, "cluster": CLUSTER, "qos": QOS, "accounts": accounts, "gpu_prices": []}


def timed_pass(slurm: AccountingSlurm, doc: dict[str, Any], label: str) -> tuple[float, int]:
    calls: list[str] = []

    def runner(argv: Sequence[str], stdin: str | None = None) -> Result:
        started = time.monotonic()
        p = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, env=slurm.env, check=False)
        calls.append(f"  {time.monotonic() - started:6.2f} s  {' '.join(argv)[:140]}")
        return Result(p.returncode, p.stdout, p.stderr)

    started = time.monotonic()
    out = reconcile(parse(doc), SlurmDb(runner), lambda g: None)
    took = time.monotonic() - started
    print(f"{label}: status {out.status}, {len(out.changes)} changes, {len(out.kept)} kept, {len(calls)} calls, {took:.1f} s")
    print("\n".join(calls))
    if out.status != 0:
        print("\n".join(out.kept), file=sys.stderr)
    return took, len(out.changes) if out.status == 0 else -1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--teams", type=int, default=100)
    p.add_argument("--users", type=int, default=2000)
    args = p.parse_args()
    missing = missing_tools()
    if missing:
        print(f"missing: {', '.join(missing)}", file=sys.stderr)
        return 2
    doc = contract(args.teams, args.users)
    slurm = AccountingSlurm(run_dir("bench-acct-"), cluster=CLUSTER)
    try:
        started = time.monotonic()
        slurm.start()
        print(f"MariaDB + slurmdbd + slurmctld up in {time.monotonic() - started:.1f} s")
        first, created = timed_pass(slurm, doc, "first reconcile")
        second, again = timed_pass(slurm, doc, "second reconcile")
        rows = slurm.show("assoc", ["account", "user"])
        print(f"slurmdbd now holds {len(rows)} associations; the first pass made {created} changes")
    finally:
        slurm.cleanup()
    print(f"first reconcile {first:.1f} s, second {second:.1f} s, changes on second {again}")
    return 0 if first <= 60 and second <= 10 and again == 0 and created > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
