"""Each team's figures for the admins' dashboard (docs/dashboards.md), on a head node that collects.

Slurm hides one team's usage from another's members (``PrivateData=usage``), and the head node's exporter on 9400
is reachable from every job: per-team series there would show every team's GPU-hours to any researcher. So they
take a way of their own, which no researcher reaches:

- ``gpucluster-team-snapshot.service`` runs as slurm (SlurmUser sees every account), listens on nothing, and every
  5 minutes writes the accounts file's accounts' GPU-seconds, dollars, fair share, GPU jobs and guarantee
  (``gpucluster_agents/metrics/teams.py``) to :data:`TEAM_SNAPSHOT`, mode 0640, group :data:`TEAM_GROUP` (a
  supplementary group of the service; the group is made by ``systemd-sysusers`` from :data:`TEAM_SYSUSERS`);
- ``gpucluster-team-metrics.service``, the node package's exporter as a systemd dynamic user in that group (no
  rights in Slurm, no way to IMDS), serves that file and nothing else on the socket of
  ``gpucluster-team-metrics.socket``: 127.0.0.1:9402 only (the setup names no private address for it);
- the head node's guard keeps 9402 to root and ``prometheus`` (:data:`~.guard.LOCAL_PORTS`), and the exporter
  ``Requires=`` the guard: where it failed, nothing listens unguarded;
- the collector scrapes it (the ``teams`` job) and remote-writes to AMP, which only the Grafana workspace reads.
"""

from __future__ import annotations

from gpucluster.render.core import SERVICE_SANDBOX, WriteFile
from gpucluster.render.slurm.accounts import ACCOUNTS_PATH
from gpucluster.render.slurm.guard import IMDS_GUARD_UNIT, TEAM_METRICS_PORT, systemd_unit
from gpucluster.render.slurm.metrics import PYTHON, UNIT_DIR, socket_unit
from gpucluster.render.slurm.names import AGENT_LIB, SlurmContext

TEAM_SNAPSHOT_UNIT = "gpucluster-team-snapshot.service"
TEAM_METRICS_UNIT = "gpucluster-team-metrics.service"
TEAM_METRICS_SOCKET = "gpucluster-team-metrics.socket"
TEAM_GROUP = "gpucluster-team-metrics"
TEAM_SYSUSERS = f"/etc/sysusers.d/{TEAM_GROUP}.conf"
TEAM_SNAPSHOT_DIR = "/run/gpucluster-team-metrics"
TEAM_SNAPSHOT = f"{TEAM_SNAPSHOT_DIR}/teams.json"
TEAM_METRICS_LISTEN = f"127.0.0.1:{TEAM_METRICS_PORT}"


def has_team_metrics(ctx: SlurmContext, collector: bool) -> bool:
    """Per-team series where the head node collects and the cluster has teams in accounting."""
    return collector and ctx.teams is not None and ctx.slurm.accounting is not None


def _exec(*args: str) -> str:
    return " ".join([PYTHON, "-E", "-s", "-m", "gpucluster_agents.metrics", *args])


def team_sysusers() -> str:
    """The readers' group, for ``systemd-sysusers`` (sysusers.d(5)): a group only, no user."""
    return f"# gpucluster: who may read each team's figures (the team snapshot). Generated.\ng {TEAM_GROUP} -\n"


def team_snapshot_unit(accounts_file: str = ACCOUNTS_PATH) -> str:
    """As slurm, in the readers' group: sshare, sacct and squeue into :data:`TEAM_SNAPSHOT` every 5 minutes."""
    run = _exec("team-snapshot", "--slurm-bin-dir", "/usr/bin", "--accounts-file", accounts_file, "--out", TEAM_SNAPSHOT)
    return systemd_unit(
        "gpucluster: each team's figures for the admins' dashboard (loopback only)",
        "After=slurmctld.service slurmdbd.service\n\n[Service]\n"
        f"User=slurm\nGroup=slurm\nSupplementaryGroups={TEAM_GROUP}\n"
        f"RuntimeDirectory={TEAM_SNAPSHOT_DIR.removeprefix('/run/')}\nRuntimeDirectoryMode=0755\nRuntimeDirectoryPreserve=yes\n"
        f"WorkingDirectory={AGENT_LIB}\nExecStart={run}\nRestart=always\nRestartSec=30\n{SERVICE_SANDBOX}",
        "WantedBy=multi-user.target",
    )


def team_metrics_unit() -> str:
    """The exporter of the team snapshot alone, as a dynamic user in the readers' group, on its loopback socket."""
    run = _exec("serve", "--systemd-socket", "--no-gpus", "--team-snapshot", TEAM_SNAPSHOT)
    return systemd_unit(
        "gpucluster: each team's figures, for the head node's collector only",
        f"Requires={TEAM_METRICS_SOCKET} {IMDS_GUARD_UNIT}\n"
        f"After={TEAM_METRICS_SOCKET} {IMDS_GUARD_UNIT} {TEAM_SNAPSHOT_UNIT}\nWants={TEAM_SNAPSHOT_UNIT}\n\n[Service]\n"
        f"DynamicUser=yes\nSupplementaryGroups={TEAM_GROUP}\nWorkingDirectory={AGENT_LIB}\nExecStart={run}\n"
        f"Restart=always\nRestartSec=1\n{SERVICE_SANDBOX}",
        "WantedBy=multi-user.target",
    )


def team_metrics_files() -> list[WriteFile]:
    """The readers' group, the reader's unit, the exporter's socket (127.0.0.1) and unit."""
    return [
        WriteFile(TEAM_SYSUSERS, team_sysusers()),
        WriteFile(f"{UNIT_DIR}/{TEAM_SNAPSHOT_UNIT}", team_snapshot_unit()),
        WriteFile(f"{UNIT_DIR}/{TEAM_METRICS_SOCKET}", socket_unit("gpucluster team metrics", TEAM_METRICS_PORT)),
        WriteFile(f"{UNIT_DIR}/{TEAM_METRICS_UNIT}", team_metrics_unit()),
    ]


def team_metrics_setup() -> str:
    """The setup's lines: the group, then the reader, the socket and the exporter, now and at every boot."""
    return (
        f"systemd-sysusers {TEAM_SYSUSERS}\nsystemctl enable --now {TEAM_SNAPSHOT_UNIT} {TEAM_METRICS_SOCKET} {TEAM_METRICS_UNIT}"
    )
