"""The teams' accounts contract (``/etc/gpucluster/accounts.json`` on the head node) and the systemd units that keep
slurmdbd in step with it.

The file is what ``gpucluster-agent accounts reconcile`` reads (``gpucluster_agents/contract/accounts.py``): the
cluster, the QOS gpucluster manages, one account per team, the GPU prices of the usage report and where the daily
usage file goes. It reaches the head node like every other head-node file: in the user data, rewritten at every
boot by ``gpucluster-head-config.service`` (a changed stack reaches a running head node as new user data with a
stop and start). ``gpucluster-accounts.service`` reconciles at boot after slurmdbd (and again every 30 s while
slurmdbd cannot be reached: exit 75); ``gpucluster-accounts.path`` runs it again whenever the file changes.
"""

from __future__ import annotations

from typing import Any

from gpucluster.render.core import WriteFile
from gpucluster.render.slurm.guard import systemd_unit
from gpucluster.render.slurm.names import AGENT_CONFIG_PATH, SlurmContext, agent_service
from gpucluster.resolve.slurm.teams import DESCRIPTION, ResolvedQos, ResolvedTeam

ACCOUNTS_PATH = "/etc/gpucluster/accounts.json"
ACCOUNTS_UNIT = "gpucluster-accounts.service"
ACCOUNTS_PATH_UNIT = "gpucluster-accounts.path"
ACCOUNTS_TIMER = "gpucluster-accounts.timer"
"""Hourly: a team kept because it still had jobs is removed once they have ended."""
SCHEMA = 1
USAGE_PREFIX = "usage/"
EX_TEMPFAIL = 75


def _qos(q: ResolvedQos) -> dict[str, Any]:
    return {
        "name": q.name,
        "description": q.description,
        "priority": q.priority,
        "preempt": list(q.preempt),
        "preempt_mode": q.preempt_mode,
        "grp_tres": dict(q.grp_tres),
        "max_wall_minutes": q.max_wall_minutes,
    }


def _account(t: ResolvedTeam) -> dict[str, Any]:
    return {
        "name": t.name,
        "description": f"{DESCRIPTION}team {t.name}",
        "fairshare": t.fairshare,
        "grp_tres": dict(t.grp_tres),
        "max_wall_minutes": t.max_wall_minutes,
        "qos": list(t.qos),
        "default_qos": t.default_qos,
        "users": list(t.users),
        "groups": list(t.groups),
    }


def gpu_prices(ctx: SlurmContext) -> list[dict[str, Any]]:
    """``usd_per_gpu_hour`` of each GPU partition at the node-hour price the plan uses (partitions without a known
    price are left out: the report then shows their GPU-hours without a cost)."""
    out: list[dict[str, Any]] = []
    prices = dict(ctx.prices)
    for g in ctx.node_groups:
        price, gpus = prices.get(g.name), g.facts.gpu_count
        if gpus and price is not None:
            out.append({"partition": g.partition, "gpus_per_node": gpus, "usd_per_gpu_hour": round(price / gpus, 6)})
    return out


def accounts_contract(ctx: SlurmContext, bucket: str | None = None) -> dict[str, Any] | None:
    """The accounts contract of ``ctx``'s teams (None without teams); ``bucket``: where the head node writes the daily
    usage file (``usage/``), left out when None."""
    teams = ctx.teams
    if teams is None:
        return None
    contract: dict[str, Any] = {
        "schema": SCHEMA,
        "cluster": ctx.cluster,
        "qos": [_qos(q) for q in teams.qos],
        "accounts": [_account(t) for t in teams.teams],
        "gpu_prices": gpu_prices(ctx),
    }
    if bucket is not None:
        contract["usage"] = {"bucket": bucket, "prefix": USAGE_PREFIX}
    return contract


def accounts_files(ctx: SlurmContext, bucket: str | None = None) -> list[WriteFile]:
    """The contract (root:root 0644), its service, the path unit that starts it when the file changes and the hourly
    timer; nothing without teams."""
    import json

    contract = accounts_contract(ctx, bucket)
    if contract is None:
        return []
    env = f"Environment=GPUCLUSTER_AGENT_CONFIG={AGENT_CONFIG_PATH}\n"
    return [
        WriteFile(ACCOUNTS_PATH, json.dumps(contract, indent=2, sort_keys=False) + "\n", "0644"),
        WriteFile(
            f"/etc/systemd/system/{ACCOUNTS_UNIT}",
            systemd_unit(
                "gpucluster: keep slurmdbd's accounts, users, QOS and limits in step with the teams",
                # slurmdbd down: the reconcile exits 75 and is retried every 30 s for as long as it takes (no start
                # limit); a bad file (exit 1) is not retried. It never deletes anything it could not check.
                "Requires=slurmdbd.service\nAfter=slurmdbd.service slurmctld.service gpucluster-head-config.service "
                "gpucluster-users.service sssd.service\nStartLimitIntervalSec=0\n\n"
                "[Service]\nType=oneshot\nUser=slurm\nGroup=slurm\n"
                + agent_service(f"accounts reconcile --file {ACCOUNTS_PATH}", env)
                + "Restart=on-failure\nRestartSec=30\nRestartPreventExitStatus=1\n",
                "WantedBy=multi-user.target",
            ),
        ),
        WriteFile(
            f"/etc/systemd/system/{ACCOUNTS_TIMER}",
            systemd_unit(
                "gpucluster: reconcile the accounts hourly",
                f"\n[Timer]\nOnUnitInactiveSec=1h\nUnit={ACCOUNTS_UNIT}\n",
                "WantedBy=timers.target",
            ),
        ),
        WriteFile(
            f"/etc/systemd/system/{ACCOUNTS_PATH_UNIT}",
            systemd_unit(
                f"gpucluster: reconcile the accounts again when {ACCOUNTS_PATH} changes",
                f"\n[Path]\nPathChanged={ACCOUNTS_PATH}\nUnit={ACCOUNTS_UNIT}\n",
                "WantedBy=multi-user.target",
            ),
        ),
    ]
