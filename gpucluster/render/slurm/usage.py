"""The head node's daily GPU usage report (issue #22): ``gpucluster-usage.timer`` runs
``gpucluster-agent usage --since yesterday --until yesterday --upload`` once a day, which writes yesterday's
GPU-hours and cost per team and per user (``gpucluster_agents/usage``) to ``s3://<artifact bucket>/usage/<day>.json``.

The service runs as the slurm user: SlurmUser sees every user's jobs under ``PrivateData=jobs,usage`` and is, with
root, the only user the IMDS guard lets reach the instance role (whose only right on that prefix is s3:PutObject,
:func:`gpucluster.render.iam.slurm_head_policy`). A failed run (slurmdbd not up yet, S3 unreachable) is retried by
systemd; a missed day (the head node was off) runs at the next boot (``Persistent=true``). Units only: the
accounts contract it reads is the reconcile's file.
"""

from __future__ import annotations

from gpucluster.render.core import SERVICE_SANDBOX, WriteFile
from gpucluster.render.slurm.accounts import ACCOUNTS_PATH, USAGE_PREFIX
from gpucluster.render.slurm.guard import systemd_unit
from gpucluster.render.slurm.names import SlurmContext, agent_service

__all__ = ["USAGE_PREFIX", "USAGE_SERVICE", "USAGE_TIMER", "has_usage_report", "usage_files", "usage_service", "usage_timer"]

USAGE_SERVICE = "gpucluster-usage.service"
USAGE_TIMER = "gpucluster-usage.timer"
ACCOUNTS_FILE = ACCOUNTS_PATH
USAGE_COMMAND = "usage --since yesterday --until yesterday --upload"


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
