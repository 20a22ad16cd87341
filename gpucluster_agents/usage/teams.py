# pyright: strict
"""Each team's own report, readable by its members only: ``gpucluster-agent team-usage publish --dir DIR``.

The head node's timer runs it as root, who sees every account under ``PrivateData=accounts,jobs,usage,users`` (a
researcher's own ``sshare``/``sacct`` show only their own records). For every team of the accounts contract it writes
``DIR/<team>.json``: the guarantee, QOS and job-time limit from the contract; the team's shares, usage and fair-share
factor, and each member's, from ``sshare``; GPU-hours and dollars per member over the last days from the sacct records
of the daily report (:mod:`.report`). Each file is owned by root and the team's POSIX group, mode 0640, written whole
and renamed into place; ``DIR`` is root's, mode 0711, so a reader opens the file of a team it names and cannot list
the others. A team whose group does not exist on this node gets no file (a directory identity without a group of
the team's name): the run says so and goes on. A file of a team no longer in the contract is removed.

``gpucluster-usage`` on the login nodes (:mod:`.show`) prints the files its caller can read.
"""

from __future__ import annotations

import argparse
import datetime as dt
import grp
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..contract import ConfigError
from ..contract import accounts as contract
from .policy import of_contract
from .report import Window, dump, tally
from .run import SlurmCommandError, run_slurm
from .sacct import SacctError, parse_records, run_sacct

TEAM_SCHEMA = 1
SHARE_FIELDS = ("Account", "User", "RawShares", "NormShares", "RawUsage", "EffectvUsage", "FairShare")
"""sshare's columns (the same names in Slurm 22.05 and 24.11): shares, the decayed usage (GPU-seconds, fair share
charging GPUs only), the usage as a part of the cluster's, and the fair-share factor (0..1, 1 = used least)."""
SSHARE_TIMEOUT_S = 120
DAYS = 30


class ShareError(SlurmCommandError):
    """sshare could not be run or failed."""


@dataclass(frozen=True)
class ShareRow:
    account: str
    user: str
    """Empty for the account's own row."""
    raw_shares: str
    norm_shares: str
    raw_usage: str
    effective_usage: str
    fairshare: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "raw_shares": _number(self.raw_shares),
            "norm_shares": _number(self.norm_shares),
            "raw_usage": _number(self.raw_usage),
            "effective_usage": _number(self.effective_usage),
            "fairshare": _number(self.fairshare),
        }


def _number(text: str) -> float | int | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if value.is_integer() and "." not in text else value


def sshare_command(accounts: list[str], sshare: str = "sshare") -> list[str]:
    fmt = ",".join(SHARE_FIELDS)
    return [sshare, "--noheader", "--parsable2", "--all", f"--accounts={','.join(accounts)}", f"--format={fmt}"]


def run_sshare(accounts: list[str], sshare: str = "sshare") -> str:
    return run_slurm(sshare_command(accounts, sshare), timeout=SSHARE_TIMEOUT_S, error=ShareError)


def parse_shares(text: str) -> list[ShareRow]:
    """sshare's rows; a line that does not split into the columns asked for is left out (``|`` is in no name)."""
    rows: list[ShareRow] = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == len(SHARE_FIELDS) and parts[0]:
            rows.append(ShareRow(*parts))
    return rows


def team_reports(
    c: contract.AccountsContract, shares: list[ShareRow], sacct_text: str, now: dt.datetime
) -> dict[str, dict[str, Any]]:
    """One report per team of ``c``: its limits, its and its members' fair share, GPU-hours and dollars."""
    window = Window(now - dt.timedelta(days=DAYS), now)
    policy = of_contract(c)
    usage = tally(c.cluster, parse_records(sacct_text).runs, window, policy.prices, now)
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    reports: dict[str, dict[str, Any]] = {}
    for account in c.accounts:
        own = [r for r in shares if r.account == account.name]
        team_row = next((r for r in own if not r.user), None)
        used = usage.teams.get(account.name)
        members = sorted(
            ((u, t) for (a, u), t in usage.team_users.items() if a == account.name), key=lambda ut: (-ut[1].gpu_seconds, ut[0])
        )
        reports[account.name] = {
            "schema": TEAM_SCHEMA,
            "cluster": c.cluster,
            "team": account.name,
            "generated": now.strftime(stamp),
            "guarantee": dict(account.grp_tres),
            "fairshare_shares": account.fairshare,
            "max_wall_minutes": account.max_wall_minutes,
            "qos": list(account.qos),
            "members": list(account.users),
            "share": team_row.as_dict() if team_row is not None else None,
            "member_shares": [{"user": r.user, **r.as_dict()} for r in own if r.user],
            "usage": {
                "since": window.since.strftime(stamp),
                "until": window.until.strftime(stamp),
                **(used.as_dict() if used is not None else {"gpu_hours": 0, "gpu_seconds": 0, "usd": 0, "jobs": 0}),
                "users": [{"user": u, **t.as_dict()} for u, t in members],
            },
            "unpriced_partitions": sorted(usage.unpriced),
        }
    return reports


def publish(directory: str, reports: dict[str, dict[str, Any]]) -> list[str]:
    """Write each team's report as ``root:<team> 0640`` into ``directory`` (root's, 0711); the teams left out for
    want of a group, as messages."""
    os.makedirs(directory, mode=0o711, exist_ok=True)
    os.chown(directory, 0, 0)
    os.chmod(directory, 0o711)
    skipped: list[str] = []
    for team, report in reports.items():
        try:
            gid = grp.getgrnam(team).gr_gid
        except KeyError:
            skipped.append(f"team {team}: no group named {team!r} on this node, so no report (only its members may read it)")
            _remove(os.path.join(directory, f"{team}.json"))
            continue
        _write(directory, f"{team}.json", dump(report).encode(), gid)
    for name in os.listdir(directory):
        if name.endswith(".json") and name[: -len(".json")] not in reports:
            _remove(os.path.join(directory, name))  # a team that left the config
    return skipped


def _write(directory: str, name: str, body: bytes, gid: int) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=directory)
    try:
        os.fchmod(fd, 0o640)
        os.fchown(fd, 0, gid)
        os.write(fd, body)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(tmp, os.path.join(directory, name))
    except OSError:
        _remove(tmp)
        raise


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def collect(c: contract.AccountsContract, now: dt.datetime) -> dict[str, dict[str, Any]]:
    """The reports from the real sshare and sacct (:class:`ShareError` / :class:`SacctError` when either fails)."""
    names = [a.name for a in c.accounts]
    shares = parse_shares(run_sshare(names)) if names else []
    return team_reports(c, shares, run_sacct(now - dt.timedelta(days=DAYS), now), now)


def main(argv: Sequence[str], now: dt.datetime | None = None) -> int:
    """``publish --dir DIR [--file accounts.json]``: 0 written (teams without a group named on stderr), 1 sshare,
    sacct or the write failed (the timer tries again), 2 a bad command line or accounts file."""
    p = argparse.ArgumentParser(prog="gpucluster-agent team-usage", description="each team's report, for its members")
    p.add_argument("action", choices=["publish"])
    p.add_argument("--dir", required=True, help="where the reports go (the login nodes' gpucluster-usage reads them)")
    p.add_argument("--file", default=contract.DEFAULT_PATH, help=f"the accounts contract (default {contract.DEFAULT_PATH})")
    try:
        args = p.parse_args(list(argv))
    except SystemExit as exc:
        return 2 if exc.code else 0
    now = now or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, microsecond=0)
    try:
        c = contract.load(args.file)
    except ConfigError as exc:
        sys.stderr.write(f"gpucluster-agent team-usage: {exc}\n")
        return 2
    try:
        skipped = publish(args.dir, collect(c, now))
    except (ShareError, SacctError, OSError) as exc:
        sys.stderr.write(f"gpucluster-agent team-usage: {exc}\n")
        return 1
    for line in skipped:
        sys.stderr.write(f"gpucluster-agent team-usage: {line}\n")
    sys.stderr.write(f"gpucluster-agent team-usage: {len(c.accounts) - len(skipped)} team report(s) in {args.dir}\n")
    return 0
