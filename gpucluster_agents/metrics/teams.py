# pyright: strict
"""Each team's (Slurm account's) figures for the admins' dashboard: read as SlurmUser, served on loopback only.

Why not beside Slurm's other figures on port 9400: that exporter listens where every job reaches it, and under
``PrivateData=usage`` Slurm shows a researcher no other team's usage. So ``team-snapshot`` (run as slurm by
``gpucluster-team-snapshot.service``, listening on nothing) reads, every :data:`EVERY` seconds, for the accounts of
the accounts file only (their names come from the stack's config, never from a job):

- GPU-seconds and dollars over the last :data:`WINDOW_DAYS` days, the window of each team's own report
  (``gpucluster_agents/usage/teams.py``: the same sacct records, the same prices);
- the account's effective usage and each member's fair-share factor (``sshare``; the users of the accounts file);
- GPU jobs running and pending, and the GPUs the running ones hold (``squeue``);
- the GPUs the accounts file guarantees (``grp_tres`` ``gres/gpu``);

and writes them to one file, mode 0640, group :data:`GROUP`. A second exporter (``serve-teams``, a systemd dynamic
user in that group, ``gpucluster-team-metrics.service``) serves that file and nothing else on 127.0.0.1:9402, a port
the head node's guard keeps to root and Prometheus; the head node's collector sends it to AMP, which only Grafana
(the admins) reads. A researcher reads their own team's report with ``gpucluster-usage`` instead.
"""

from __future__ import annotations

import argparse
import datetime as dt
import grp
import logging
import os
import sys
import time
from collections.abc import Sequence

from ..contract import ConfigError
from ..contract import accounts as contract
from ..contract.metrics import ACCOUNT_COST as COST
from ..contract.metrics import ACCOUNT_EFFECTIVE as EFFECTIVE
from ..contract.metrics import ACCOUNT_FAIRSHARE as FAIRSHARE
from ..contract.metrics import ACCOUNT_GPU_SECONDS as GPU_SECONDS
from ..contract.metrics import ACCOUNT_GPUS as GPUS
from ..contract.metrics import ACCOUNT_GUARANTEE as GUARANTEE
from ..contract.metrics import ACCOUNT_JOBS as JOBS
from ..usage import teams as usage_teams
from ..usage.run import SlurmCommandError, run_slurm
from ..usage.sacct import gpu_count, run_sacct
from . import snapshot
from .exposition import Registry

LOG = logging.getLogger("gpucluster_agents.metrics.teams")
EVERY = 300.0
"""sacct over 30 days is the heaviest query the head node runs for monitoring: every 5 minutes, not every scrape."""
MAX_AGE = 3 * EVERY
GROUP = "gpucluster-team-metrics"
"""The group that may read the team snapshot: SlurmUser's loop (a supplementary group) and the team exporter."""
WINDOW_DAYS = usage_teams.DAYS
SQUEUE_TIMEOUT_S = 60
GPU_TRES = "gres/gpu"
COLLECTOR = "teams"

STATES = {"RUNNING": "running", "PENDING": "pending"}


def squeue_command(bin_dir: str) -> list[str]:
    """Every job's account, state and trackable resources (allocated when it runs, asked for while it waits)."""
    return [os.path.join(bin_dir, "squeue"), "-h", "-a", "-O", "Account:200|,State:20|,tres-alloc:500|"]


def parse_squeue(text: str, accounts: set[str]) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
    """(GPU jobs by (account, state), GPUs allocated by account) of the accounts in ``accounts`` only."""
    jobs: dict[tuple[str, str], int] = {}
    gpus: dict[str, int] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 3 or parts[0] not in accounts or parts[1] not in STATES:
            continue
        account, state, n = parts[0], STATES[parts[1]], gpu_count(parts[2])
        if n <= 0:
            continue
        jobs[(account, state)] = jobs.get((account, state), 0) + 1
        if state == "running":
            gpus[account] = gpus.get(account, 0) + n
    return jobs, gpus


def collect(reg: Registry, c: contract.AccountsContract, bin_dir: str, now: dt.datetime) -> None:
    """Every account's series into ``reg``; a :class:`SlurmCommandError` when sshare, sacct or squeue fails."""
    names = [a.name for a in c.accounts]
    shares = usage_teams.parse_shares(usage_teams.run_sshare(names, os.path.join(bin_dir, "sshare"))) if names else []
    since = now - dt.timedelta(days=WINDOW_DAYS)
    reports = usage_teams.team_reports(c, shares, run_sacct(since, now, os.path.join(bin_dir, "sacct")), now)
    jobs, gpus = parse_squeue(run_slurm(squeue_command(bin_dir), timeout=SQUEUE_TIMEOUT_S), set(names))
    for account in c.accounts:
        report, labels = reports[account.name], {"account": account.name}
        reg.add(*GPU_SECONDS, float(report["usage"]["gpu_seconds"]), labels)
        reg.add(*COST, float(report["usage"]["usd"]), labels)
        share = report["share"]
        if share is not None and share["effective_usage"] is not None:
            reg.add(*EFFECTIVE, float(share["effective_usage"]), labels)
        for member in report["member_shares"]:  # Fair Tree gives the factor to users, not to the account's own row
            if member["user"] in account.users and member["fairshare"] is not None:
                reg.add(*FAIRSHARE, float(member["fairshare"]), labels | {"user": member["user"]})
        for state in STATES.values():
            reg.add(*JOBS, jobs.get((account.name, state), 0), labels | {"state": state})
        reg.add(*GPUS, gpus.get(account.name, 0), labels)
        if GPU_TRES in account.grp_tres:
            reg.add(*GUARANTEE, float(account.grp_tres[GPU_TRES]), labels)


def read_once(accounts_file: str, bin_dir: str, now: dt.datetime) -> Registry:
    """One reading with its success flag: a failed source gives no team series, only ``collector="teams"`` 0."""
    reg = Registry()
    try:
        staged = Registry()
        collect(staged, contract.load(accounts_file), bin_dir, now)
        reg = staged
        ok = 1
    except (ConfigError, SlurmCommandError, OSError) as exc:
        LOG.warning("team figures not read: %s", exc)
        ok = 0
    reg.add(*snapshot.COLLECTOR_OK, ok, {"collector": COLLECTOR})
    return reg


def main(argv: Sequence[str]) -> int:
    """``team-snapshot --accounts-file F --slurm-bin-dir D --out F [--group G] [--once]``: 0, 1 the snapshot could
    not be written (``--once``), 2 a bad command line or no such group."""
    p = argparse.ArgumentParser(prog="gpucluster-metrics team-snapshot")
    p.add_argument("--accounts-file", default=contract.DEFAULT_PATH)
    p.add_argument("--slurm-bin-dir", required=True, help="directory of sshare, sacct and squeue")
    p.add_argument("--out", required=True, help="the snapshot file (its directory must exist)")
    p.add_argument("--group", default=GROUP, help=f"the group that may read it (default {GROUP}); '-': the caller's")
    p.add_argument("--every", type=float, default=EVERY, help=f"seconds between two readings (default {EVERY:g})")
    p.add_argument("--once", action="store_true", help="one reading, then exit")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s gpucluster-metrics %(levelname)s %(message)s")
    try:
        gid = os.getgid() if a.group == "-" else grp.getgrnam(a.group).gr_gid
    except KeyError:
        sys.stderr.write(f"gpucluster-metrics: --group {a.group}: no such group\n")
        return 2
    while True:
        now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, microsecond=0)
        try:
            snapshot.write(a.out, read_once(a.accounts_file, a.slurm_bin_dir, now), time.time(), mode=0o640, gid=gid)
        except OSError as exc:
            sys.stderr.write(f"gpucluster-metrics: cannot write {a.out}: {exc}\n")
            if a.once:
                return 1
        if a.once:
            return 0
        time.sleep(a.every)
