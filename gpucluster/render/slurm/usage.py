"""The head node's daily GPU usage report: ``gpucluster-usage.timer`` runs
``gpucluster-agent usage --since yesterday --until yesterday --upload`` once a day, which writes yesterday's
GPU-hours and cost per team and per user (``gpucluster_agents/usage``) to ``s3://<artifact bucket>/usage/<day>.json``.

The service runs as the slurm user: SlurmUser sees every user's jobs under ``PrivateData=jobs,usage`` and is, with
root, the only user the IMDS guard lets reach the instance role (whose only right on that prefix is s3:PutObject,
:func:`gpucluster.render.iam.slurm_head_policy`). A failed run (slurmdbd not up yet, S3 unreachable) is retried by
systemd; a missed day (the head node was off) runs at the next boot (``Persistent=true``). Units only: the
accounts contract it reads is the reconcile's file.

Each team's own report (a researcher reads their team's guarantee, fair share, GPU-hours and dollars without root):
``gpucluster-team-usage.timer`` runs ``gpucluster-agent team-usage publish`` as root every 15 minutes, which writes
``/home/.gpucluster-usage/<team>.json`` (root:<team> 0640, the directory root's 0711) on the shared ``/home``;
``gpucluster-usage`` on the login nodes (``gpucluster_agents/usage/show.py``, the program itself) prints the reports
its caller may read. Root because only root may give a file to a group it is not in on NFS (``/home`` is exported
``no_root_squash``); sshare and sacct see every account for root as for SlurmUser. Without a shared ``/home`` there
is nowhere both nodes read, and no team reports.
"""

from __future__ import annotations

from gpucluster.render.core import SERVICE_SANDBOX, WriteFile
from gpucluster.render.pysource import without_docs
from gpucluster.render.slurm.accounts import ACCOUNTS_PATH, USAGE_PREFIX
from gpucluster.render.slurm.guard import systemd_unit
from gpucluster.render.slurm.names import SlurmContext, agent_service
from gpucluster_agents import ship
from gpucluster_agents.contract.usage import REPORTS_DIR

__all__ = [
    "TEAM_USAGE_DIR",
    "TEAM_USAGE_TIMER",
    "USAGE_PREFIX",
    "USAGE_SERVICE",
    "USAGE_TIMER",
    "has_team_reports",
    "has_usage_report",
    "team_usage_files",
    "usage_files",
    "usage_program_file",
    "usage_service",
    "usage_timer",
]

USAGE_SERVICE = "gpucluster-usage.service"
USAGE_TIMER = "gpucluster-usage.timer"
ACCOUNTS_FILE = ACCOUNTS_PATH
USAGE_COMMAND = "usage --since yesterday --until yesterday --upload"
TEAM_USAGE_SERVICE = "gpucluster-team-usage.service"
TEAM_USAGE_TIMER = "gpucluster-team-usage.timer"
TEAM_USAGE_DIR = REPORTS_DIR
USAGE_PROGRAM = "/usr/local/bin/gpucluster-usage"


def usage_service(region: str, accounts_file: str = ACCOUNTS_FILE) -> str:
    """The oneshot service: yesterday's report, uploaded; read-only on the host, retried on failure."""
    return systemd_unit(
        "gpucluster: daily GPU usage report",
        "Wants=network-online.target\nAfter=network-online.target slurmdbd.service\n"
        "StartLimitIntervalSec=1d\nStartLimitBurst=6\n\n"
        "[Service]\nType=oneshot\nUser=slurm\nGroup=slurm\n"
        + agent_service(
            USAGE_COMMAND + ("" if accounts_file == ACCOUNTS_FILE else f" --file {accounts_file}"),
            f"Environment=AWS_DEFAULT_REGION={region}\n",
        )
        + "Restart=on-failure\nRestartSec=15min\nRestartPreventExitStatus=2\n"  # 2: a bad file, not retried
        + SERVICE_SANDBOX,
    )


def usage_timer() -> str:
    """Daily, after midnight UTC (yesterday's jobs have ended or are counted until midnight); a missed run at boot."""
    return systemd_unit(
        "gpucluster: daily GPU usage report",
        "\n[Timer]\nOnCalendar=*-*-* 00:20:00 UTC\nRandomizedDelaySec=10min\nPersistent=true\n",
        "WantedBy=timers.target",
    )


def has_usage_report(ctx: SlurmContext, bucket: str | None) -> bool:
    """A daily report where there are teams, accounting and a bucket to write to (the contract then has ``usage``)."""
    return ctx.teams is not None and ctx.slurm.accounting is not None and bucket is not None


def usage_files(region: str, accounts_file: str = ACCOUNTS_FILE) -> list[WriteFile]:
    """The service and its timer (the head node's setup enables the timer when the cluster has teams)."""
    return [
        WriteFile(f"/etc/systemd/system/{USAGE_SERVICE}", usage_service(region, accounts_file)),
        WriteFile(f"/etc/systemd/system/{USAGE_TIMER}", usage_timer()),
    ]


def has_team_reports(ctx: SlurmContext, home: bool) -> bool:
    """Team reports where there are teams, accounting and a shared ``/home`` that head and login nodes both mount."""
    return ctx.teams is not None and ctx.slurm.accounting is not None and home


def team_usage_service(accounts_file: str = ACCOUNTS_FILE) -> str:
    """Root, oneshot, after the accounts and the users (the teams' groups); writes only the reports' directory."""
    return systemd_unit(
        "gpucluster: each team's usage report, readable by its members",
        "After=slurmdbd.service slurmctld.service gpucluster-accounts.service gpucluster-users.service sssd.service\n"
        f"RequiresMountsFor=/home\n\n[Service]\nType=oneshot\n"
        f"ExecStartPre=+/usr/bin/install -d -o root -g root -m 0711 {TEAM_USAGE_DIR}\n"
        + agent_service(f"team-usage publish --dir {TEAM_USAGE_DIR} --file {accounts_file}")
        + "NoNewPrivileges=yes\nProtectSystem=strict\nProtectHome=read-only\n"
        f"ReadWritePaths={TEAM_USAGE_DIR}\nPrivateTmp=yes\n",
    )


def team_usage_timer() -> str:
    """Every 15 minutes from 5 minutes after boot: fair share moves as jobs end, a member sees it within the quarter."""
    return systemd_unit(
        "gpucluster: each team's usage report, every 15 minutes",
        "\n[Timer]\nOnBootSec=5min\nOnUnitActiveSec=15min\n",
        "WantedBy=timers.target",
    )


def team_usage_files() -> list[WriteFile]:
    """The head node's service and timer (its setup enables the timer)."""
    return [
        WriteFile(f"/etc/systemd/system/{TEAM_USAGE_SERVICE}", team_usage_service()),
        WriteFile(f"/etc/systemd/system/{TEAM_USAGE_TIMER}", team_usage_timer()),
    ]


def usage_program_file() -> WriteFile:
    """``gpucluster-usage`` for the login nodes: ``gpucluster_agents/usage/show.py`` without its docs, 0755."""
    return WriteFile(USAGE_PROGRAM, without_docs(ship.source(ship.USAGE_PROGRAM)), "0755")
