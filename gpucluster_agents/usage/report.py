# pyright: strict
"""GPU-hours and their cost per team (Slurm account) and per user over a time window.

A run counts the GPUs it was allocated (``gres/gpu`` of ``AllocTRES``) times the seconds it ran inside the
window: a run that started before the window or ends after it counts only its part inside (and never more than
its ``ElapsedRaw``, which leaves out time suspended). Cost is the GPU-hours times the price of the partition the
run ran in (the contract's ``gpu_prices``, the prices the plan uses); a partition without a price counts its
GPU-hours and no cost, and the report says which.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .sacct import JobRun

REPORT_SCHEMA = 1


@dataclass(frozen=True)
class Window:
    """``[since, until)``, naive UTC."""

    since: dt.datetime
    until: dt.datetime

    def seconds_inside(self, run: JobRun, now: dt.datetime) -> int:
        """The seconds of ``run`` inside the window (a running job runs until ``now``)."""
        end = run.end if run.end is not None else now
        inside = (min(end, self.until) - max(run.start, self.since)).total_seconds()
        return max(0, min(int(inside), run.elapsed_s))


@dataclass
class Tally:
    gpu_seconds: int = 0
    usd: float = 0.0
    jobs: set[str] = field(default_factory=lambda: set[str]())

    def add(self, gpu_seconds: int, usd: float, job_id: str) -> None:
        self.gpu_seconds += gpu_seconds
        self.usd += usd
        self.jobs.add(job_id)

    def as_dict(self) -> dict[str, Any]:
        return {
            "gpu_hours": round(self.gpu_seconds / 3600, 4),
            "gpu_seconds": self.gpu_seconds,
            "usd": round(self.usd, 2),
            "jobs": len(self.jobs),
        }


@dataclass
class Usage:
    """The figures of one window."""

    cluster: str
    window: Window
    generated: dt.datetime
    total: Tally = field(default_factory=Tally)
    teams: dict[str, Tally] = field(default_factory=lambda: dict[str, Tally]())
    team_users: dict[tuple[str, str], Tally] = field(default_factory=lambda: dict[tuple[str, str], Tally]())
    users: dict[str, Tally] = field(default_factory=lambda: dict[str, Tally]())
    unpriced: set[str] = field(default_factory=lambda: set[str]())
    skipped: tuple[str, ...] = ()


def tally(
    cluster: str,
    runs: Iterable[JobRun],
    window: Window,
    prices: Mapping[str, float],
    now: dt.datetime,
    skipped: tuple[str, ...] = (),
) -> Usage:
    """Add up the GPU runs of ``runs`` inside ``window``; ``prices`` is USD per GPU-hour by partition."""
    usage = Usage(cluster, window, now, skipped=skipped)
    for run in runs:
        if run.gpus <= 0:
            continue
        seconds = window.seconds_inside(run, now)
        if seconds <= 0:
            continue
        gpu_seconds = run.gpus * seconds
        price = prices.get(run.partition)
        if price is None:
            usage.unpriced.add(run.partition)
        usd = gpu_seconds / 3600 * (price or 0.0)
        job = run.job_id  # a requeued job's runs are one job
        usage.total.add(gpu_seconds, usd, job)
        usage.teams.setdefault(run.account, Tally()).add(gpu_seconds, usd, job)
        usage.team_users.setdefault((run.account, run.user), Tally()).add(gpu_seconds, usd, job)
        usage.users.setdefault(run.user, Tally()).add(gpu_seconds, usd, job)
    return usage


def _stamp(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def as_json(usage: Usage) -> dict[str, Any]:
    """The report as a JSON object (the daily file and ``--json``): teams and users by GPU-hours, most first."""
    teams: list[dict[str, Any]] = []
    for account, t in _ranked(usage.teams):
        users = [{"user": u, **tu.as_dict()} for (a, u), tu in _ranked(usage.team_users) if a == account]
        teams.append({"account": account, **t.as_dict(), "users": users})
    return {
        "schema": REPORT_SCHEMA,
        "cluster": usage.cluster,
        "since": _stamp(usage.window.since),
        "until": _stamp(usage.window.until),
        "generated": _stamp(usage.generated),
        "total": usage.total.as_dict(),
        "teams": teams,
        "users": [{"user": u, **t.as_dict()} for u, t in _ranked(usage.users)],
        "unpriced_partitions": sorted(usage.unpriced),
        "skipped_records": list(usage.skipped),
    }


def _ranked(tallies: Mapping[Any, Tally]) -> list[tuple[Any, Tally]]:
    return sorted(tallies.items(), key=lambda kv: (-kv[1].gpu_seconds, str(kv[0])))


def as_table(usage: Usage) -> str:
    """The report for a person: one line per team, its users indented under it, then the total."""
    head = f"GPU usage of {usage.cluster} from {_stamp(usage.window.since)} to {_stamp(usage.window.until)}"
    rows = [("team / user", "GPU-hours", "USD", "jobs")]
    for account, t in _ranked(usage.teams):
        rows.append(_row(account, t))
        rows += [_row(f"  {u}", tu) for (a, u), tu in _ranked(usage.team_users) if a == account]
    rows.append(_row("total", usage.total))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [head, ""]
    for r in rows:
        lines.append(f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]:>{widths[3]}}")
    if usage.unpriced:
        lines.append(f"no GPU price for partition(s) {', '.join(sorted(usage.unpriced))}: their cost is not counted")
    if usage.skipped:
        lines.append(f"{len(usage.skipped)} accounting record(s) not readable, not counted (see --json)")
    return "\n".join(lines) + "\n"


def _row(name: str, t: Tally) -> tuple[str, str, str, str]:
    return (_printable(name), f"{t.gpu_seconds / 3600:.2f}", f"{t.usd:.2f}", str(len(t.jobs)))


def _printable(text: str) -> str:
    """A name as a terminal may show it: control characters (an escape sequence in a hostile name) escaped."""
    return "".join(c if c.isprintable() or c == " " else f"\\x{ord(c):02x}" for c in text)


def dump(report: Mapping[str, Any]) -> str:
    return json.dumps(report, indent=1, sort_keys=False) + "\n"
