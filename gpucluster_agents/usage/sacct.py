# pyright: strict
"""The job records of the accounting database, as ``sacct`` prints them, parsed defensively.

One record per run of a job allocation: ``-X`` (allocations, not steps) and ``-D`` (a requeued job's earlier
runs too: a job preempted and requeued used its GPUs until then). Fields are split on a control character that
no user, account, partition or TRES name can hold (``--delimiter``), and a line that still does not split into
the fields asked for is counted and skipped, never guessed at. sacct runs with ``TZ=UTC`` so that the
``Start``/``End`` it prints and the ``-S``/``-E`` it reads are UTC.

Field names checked against the sacct man pages of Slurm 22.05 (Debian bookworm) and 24.11 (trixie): both have
``AllocTRES`` (``gres/gpu=N`` once ``AccountingStorageTRES`` includes ``gres/gpu``), ``ElapsedRaw`` (seconds),
``Start``/``End`` (``YYYY-MM-DDTHH:MM:SS``, ``Unknown``/``None`` when not set).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .run import SlurmCommandError, run_slurm

FIELDS = ("JobID", "User", "Account", "Partition", "AllocTRES", "ElapsedRaw", "Start", "End", "State")
DELIMITER = "\x1f"  # ASCII unit separator: not a character of any name sacct prints
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
SACCT_TIMEOUT_S = 300
_GPU_TYPED = re.compile(r"^gres/gpu:[^=,]+$")


class SacctError(SlurmCommandError):
    """sacct could not be run or failed (slurmdbd unreachable, no accounting)."""


@dataclass(frozen=True)
class JobRun:
    """One run of one job allocation."""

    job_id: str
    user: str
    account: str
    partition: str
    gpus: int
    elapsed_s: int
    start: dt.datetime
    end: dt.datetime | None
    """None while the job runs."""
    state: str


@dataclass(frozen=True)
class Records:
    runs: tuple[JobRun, ...]
    skipped: tuple[str, ...]
    """Why each line not counted was skipped (``line 3: 8 fields, expected 9``)."""


def sacct_command(since: dt.datetime, until: dt.datetime, sacct: str = "sacct") -> list[str]:
    """The sacct command line for every job run that overlaps ``[since, until)`` (UTC, naive)."""
    return [
        sacct,
        "--allusers",
        "--allocations",
        "--duplicates",
        "--parsable2",
        "--noheader",
        "--noconvert",
        f"--delimiter={DELIMITER}",
        f"--starttime={since.strftime(TIME_FORMAT)}",
        f"--endtime={until.strftime(TIME_FORMAT)}",
        f"--format={','.join(FIELDS)}",
    ]


def run_sacct(since: dt.datetime, until: dt.datetime, sacct: str = "sacct") -> str:
    """sacct's output for the window; :class:`SacctError` when it cannot be had."""
    return run_slurm(
        sacct_command(since, until, sacct), timeout=SACCT_TIMEOUT_S, error=SacctError, env=dict(os.environ, TZ="UTC")
    )


def parse_time(text: str) -> dt.datetime | None:
    """``2026-11-26T20:33:34`` → naive UTC datetime; ``Unknown``, ``None``, empty → None."""
    try:
        return dt.datetime.strptime(text.strip(), TIME_FORMAT)
    except ValueError:
        return None


def gpu_count(tres: str) -> int:
    """GPUs in an ``AllocTRES`` value: ``gres/gpu=N``, else the sum of the typed ``gres/gpu:<type>=N``."""
    total: int | None = None
    typed = 0
    for item in tres.split(","):
        name, sep, value = item.partition("=")
        if not sep or not value.isdigit():
            continue
        if name == "gres/gpu":
            total = int(value)
        elif _GPU_TYPED.match(name):
            typed += int(value)
    return total if total is not None else typed


def parse_records(text: str) -> Records:
    """Every job run in sacct's output; lines that are not a well-formed started run are skipped with a reason
    (a job that never started used nothing and is not counted as skipped)."""
    runs: list[JobRun] = []
    skipped: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(DELIMITER)
        if len(parts) != len(FIELDS):
            skipped.append(f"line {number}: {len(parts)} fields, expected {len(FIELDS)}")
            continue
        run = _run_of(parts)
        if isinstance(run, str):
            if run:
                skipped.append(f"line {number}: {run}")
            continue
        runs.append(run)
    return Records(tuple(runs), tuple(skipped))


def _run_of(parts: Sequence[str]) -> JobRun | str:
    """The run of one record, "" for a job that never started, or why the record cannot be read."""
    job_id, user, account, partition, tres, elapsed, start_s, end_s, state = (p.strip() for p in parts)
    start = parse_time(start_s)
    if start is None:
        return ""  # pending or cancelled before it started
    if not elapsed.isdigit():
        return f"job {job_id!r}: ElapsedRaw {elapsed!r} is not a number of seconds"
    end = parse_time(end_s)
    if end is not None and end < start:
        return f"job {job_id!r}: End {end_s!r} before Start {start_s!r}"
    return JobRun(
        job_id=job_id,
        user=user or "(unknown)",
        account=account or "(none)",
        partition=partition or "(none)",
        gpus=gpu_count(tres),
        elapsed_s=int(elapsed),
        start=start,
        end=end,
        state=state.split(" ")[0],  # "CANCELLED by 1000" → CANCELLED
    )
