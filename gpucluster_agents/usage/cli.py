# pyright: strict, reportMissingTypeStubs=false
"""``gpucluster-agent usage [--since DAY] [--until DAY] [--json] [--upload] [--file PATH]``

GPU-hours and cost per team and per user from the accounting database (``sacct``), for the days
``--since`` .. ``--until`` (UTC, both included; ``YYYY-MM-DD``, ``today`` or ``yesterday``). Without
``--since``: the 30 days before the end; without ``--until``: up to now. ``--json`` prints the figures as JSON
instead of a table; ``--upload`` also writes that JSON to ``s3://<usage.bucket>/<usage.prefix><last day>.json``
(the head node's daily timer: ``--since yesterday --until yesterday --upload``).

Exit status: 0 done; 1 sacct or the upload failed (the timer's unit retries); 2 a bad command line or a bad
accounts file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from collections.abc import Sequence
from typing import Any, cast

from ..contract.usage import parse_day
from .policy import DEFAULT_FILE, PolicyError, UsagePolicy, UsageTarget, load_policy
from .report import Window, as_json, as_table, dump, tally
from .sacct import SacctError, parse_records, run_sacct

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
DEFAULT_DAYS = 30


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpucluster-agent usage", description="GPU-hours and cost per team and user")
    p.add_argument("--since", help="first day (UTC), YYYY-MM-DD, today or yesterday (default: 30 days before the end)")
    p.add_argument("--until", help="last day (UTC), included, YYYY-MM-DD, today or yesterday (default: up to now)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--upload", action="store_true", help="also write the JSON to the contract's usage bucket")
    p.add_argument("--file", default=DEFAULT_FILE, help=f"the accounts contract (default {DEFAULT_FILE})")
    p.add_argument("--region", help="the bucket's region (default: $AWS_REGION, $AWS_DEFAULT_REGION)")
    return p


def window_of(since: str | None, until: str | None, now: dt.datetime) -> Window:
    """The report's window: ``[since 00:00, until+1 00:00)`` UTC, never past ``now``."""
    end = now
    if until is not None:
        end = min(now, _midnight(parse_day(until, now.date(), "--until") + dt.timedelta(days=1)))
    start = end - dt.timedelta(days=DEFAULT_DAYS) if since is None else _midnight(parse_day(since, now.date(), "--since"))
    if start >= end:
        raise ValueError(f"--since {since!r} is not before the end of the window ({end:%Y-%m-%d %H:%M} UTC)")
    return Window(start, end)


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day)


def main(argv: Sequence[str], now: dt.datetime | None = None) -> int:
    try:
        args = _parser().parse_args(list(argv))
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_OK
    now = now or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, microsecond=0)
    try:
        window = window_of(args.since, args.until, now)
        policy = load_policy(args.file)
    except (ValueError, PolicyError) as exc:
        sys.stderr.write(f"gpucluster-agent usage: {exc}\n")
        return EXIT_USAGE
    if args.upload and policy.target is None:
        sys.stderr.write(f"gpucluster-agent usage: --upload: {args.file} names no usage bucket (key 'usage')\n")
        return EXIT_USAGE
    try:
        records = parse_records(run_sacct(window.since, window.until))
    except SacctError as exc:
        sys.stderr.write(f"gpucluster-agent usage: {exc}\n")
        return EXIT_FAILED
    usage = tally(policy.cluster, records.runs, window, policy.prices, now, records.skipped)
    report = as_json(usage)
    sys.stdout.write(dump(report) if args.json else as_table(usage))
    if args.upload:
        return _upload(policy, report, window, args.region)
    return EXIT_OK


def _upload(policy: UsagePolicy, report: dict[str, Any], window: Window, region: str | None) -> int:
    target = policy.target
    if target is None:
        sys.stderr.write("gpucluster-agent usage: --upload needs a `usage` section (bucket) in the accounts file\n")
        return EXIT_USAGE
    day = (window.until - dt.timedelta(microseconds=1)).strftime("%Y-%m-%d")
    try:
        url = upload(target, day, dump(report).encode(), region)
    except Exception as exc:  # boto3's errors: reported, the unit retries
        sys.stderr.write(f"gpucluster-agent usage: upload to s3://{target.bucket}/{target.key(day)} failed: {exc}\n")
        return EXIT_FAILED
    sys.stderr.write(f"gpucluster-agent usage: wrote {url}\n")
    return EXIT_OK


def upload(target: UsageTarget, day: str, body: bytes, region: str | None = None) -> str:
    """Put the report at ``<prefix><day>.json`` (a second run the same day replaces it); its ``s3://`` URL."""
    from boto3.session import Session  # only when uploading: the report itself needs no AWS

    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    client = cast(Any, Session(region_name=region).client("s3"))  # pyright: ignore[reportUnknownMemberType]
    key = target.key(day)
    client.put_object(Bucket=target.bucket, Key=key, Body=body, ContentType="application/json")
    return f"s3://{target.bucket}/{key}"
