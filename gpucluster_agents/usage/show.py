#!/usr/bin/python3 -I
# pyright: strict
"""``gpucluster-usage [--json] [--dir DIR]``: your teams' guarantee, fair share, GPU-hours and dollars.

Runs on the login nodes as whoever calls it (stdlib only: this file is the program). The head node writes one report
per team (``gpucluster-agent team-usage publish``, :mod:`gpucluster_agents.usage.teams`) into a directory of the shared
``/home`` that only root may list; each report is readable by its team's group alone. So the program opens the report
of each group its caller is in, and the file system decides: a member reads their teams, nobody reads another team's.
Root (an administrator, with ``sudo``) lists the directory and reads every team.

Exit status: 0 at least one report printed; 1 none readable (in no team, or the head node has not written them yet).
"""

from __future__ import annotations

import argparse
import grp
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, cast

DEFAULT_DIR = "/home/.gpucluster-usage"


def readable_teams(directory: str) -> list[str]:
    """The teams whose report the caller may try: every report for root, else one per group the caller is in."""
    if os.geteuid() == 0:
        try:
            return sorted(n[: -len(".json")] for n in os.listdir(directory) if n.endswith(".json") and not n.startswith("."))
        except OSError:
            return []
    names: set[str] = set()
    for gid in {os.getegid(), *os.getgroups()}:
        try:
            names.add(grp.getgrgid(gid).gr_name)
        except KeyError:
            continue
    return sorted(n for n in names if "/" not in n and not n.startswith("."))


def load(directory: str, team: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(directory, f"{team}.json"), encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError):
        return None  # not a team (no such file), or not this caller's team (no permission)
    if not isinstance(report, dict):
        return None
    found = cast(dict[str, Any], report)
    return found if found.get("team") == team else None


def _printable(value: object) -> str:
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in str(value))


def _share(value: Any) -> str:
    if not isinstance(value, dict):
        return "no fair-share row yet (slurmdbd has not seen the account)"
    row = cast(dict[str, Any], value)
    factor = "" if row.get("fairshare") is None else f"factor {row.get('fairshare')}, "
    return f"{factor}{row.get('norm_shares')} of the shares, {row.get('effective_usage')} of the decayed usage"


def _rows(value: Any) -> list[dict[str, Any]]:
    return [cast(dict[str, Any], r) for r in cast(list[Any], value or []) if isinstance(r, dict)]


def as_text(report: dict[str, Any]) -> str:
    usage = cast(dict[str, Any], report.get("usage") or {})
    limits = cast(dict[str, Any], report.get("guarantee") or {})
    guarantee = ", ".join(f"{k}={v}" for k, v in limits.items()) or "none"
    wall = report.get("max_wall_minutes")
    lines = [
        f"team {_printable(report.get('team'))} on {_printable(report.get('cluster'))} (as of {report.get('generated')})",
        f"  guarantee      {guarantee}; QOS {', '.join(map(str, cast(list[Any], report.get('qos') or [])))}; longest job "
        + (f"{wall} min" if wall else "unlimited"),
        f"  fair share     {_share(report.get('share'))}",
        f"  {usage.get('since', '')[:10]} .. {usage.get('until', '')[:10]}: {usage.get('gpu_hours', 0)} GPU-hours, "
        f"${usage.get('usd', 0)}, {usage.get('jobs', 0)} jobs",
    ]
    shares = {r.get("user"): r for r in _rows(report.get("member_shares"))}
    for u in _rows(usage.get("users")):
        row = shares.get(u.get("user")) or {}
        lines.append(
            f"    {_printable(u.get('user')):<16} {u.get('gpu_hours')} GPU-hours  ${u.get('usd')}  {u.get('jobs')} jobs"
            f"  fair-share factor {row.get('fairshare')}"
        )
    unpriced = cast(list[Any], report.get("unpriced_partitions") or [])
    if unpriced:
        lines.append(f"  no GPU price for partition(s) {', '.join(map(str, unpriced))}: not in the dollars")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="gpucluster-usage", description="your teams' guarantee, fair share, GPU-hours and dollars")
    p.add_argument("--json", action="store_true", help="print the reports as JSON")
    p.add_argument("--dir", default=DEFAULT_DIR, help=f"where the head node writes them (default {DEFAULT_DIR})")
    args = p.parse_args(list(argv))
    reports = [r for r in (load(args.dir, t) for t in readable_teams(args.dir)) if r is not None]
    if not reports:
        sys.stderr.write(
            "gpucluster-usage: no team report you may read: you are in no team of this cluster, "
            "or the head node has not written the reports yet (every 15 minutes)\n"
        )
        return 1
    if args.json:
        sys.stdout.write(json.dumps(reports, indent=1) + "\n")
    else:
        sys.stdout.write("\n".join(as_text(r) for r in reports))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
