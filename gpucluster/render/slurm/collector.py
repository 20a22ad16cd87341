"""The head node's metrics collector (docs/monitoring-aws.md, "Collection on Slurm"): Ubuntu's own ``prometheus``
package run in agent mode as ``gpucluster-collector.service``, with the config of
:func:`gpucluster.render.monitoring.collection.prometheus_agent_config` (the cluster's nodes from the targets files the
signer writes, remote-written to the cluster's AMP workspace, signed with SigV4 from the instance role's credentials).

Only when monitoring is on, the head node collects (``ResolvedMonitoring.slurm_collector``) and the workspace's id
is known (the cluster builds the workspace before Slurm; the standalone ``SlurmCluster`` has none: no collector).

- Not Debian's ``prometheus.service``: that one reads ``/etc/prometheus/prometheus.yml`` as a full server (a TSDB,
  the UI on every address). The head setup disables and masks it; the collector's config lives at a path of
  gpucluster's own and the agent keeps only its write-ahead log (``AGENT_WAL_PATH``).
- It listens on 127.0.0.1 only (its API and its own metrics), as the package's ``prometheus`` user, with no new
  privileges, a read-only system but its WAL, no home, a private /tmp, no capabilities.
- Prometheus writes plain HTTP to gpucluster's signer on 127.0.0.1 (``gpucluster-collector-signer.service``,
  ``gpucluster_agents/metrics/signer.py``), which signs each write with SigV4 for ``aps`` and forwards it to the
  workspace over HTTPS: Debian's ``prometheus`` build sends the writes of its own ``sigv4:`` block unsigned
  (tests/e2e/test_collector_e2e.py shows it; Ubuntu's comes from the same packaging).
- Only the signer holds AWS credentials: it runs as a system user of its own (:data:`SIGNER_USER`, made by
  ``systemd-sysusers`` from :func:`signer_sysusers`), the one the head node's IMDS guard lets through besides root
  and slurm (:mod:`.guard`), hardened alike; it also lists the cluster's running instances in EC2 every minute and
  writes them as Prometheus's targets files (``gpucluster_agents/metrics/targets.py``). Prometheus, which parses
  the answers of exporters on nodes where jobs run, has no way to the role.
- The guard also keeps the two loopback ports to their clients: the signer's (9091) and Prometheus's API (9090)
  take TCP connections from root and ``prometheus`` only. Both units ``Requires=`` the guard: where it failed,
  neither listens unguarded.
- ``MemoryMax=`` on both units: neither can take the memory of slurmctld, slurmdbd and MariaDB beside them.
- ``Restart=always``: it comes back after a crash; the WAL keeps what AMP has not yet taken for up to
  ``WAL_MAX_AGE`` (older unsent samples are dropped when the WAL is next truncated).
"""

from __future__ import annotations

from gpucluster.render.core import SERVICE_SANDBOX, WriteFile
from gpucluster.render.monitoring.collection import AGENT_WAL_PATH, PROMETHEUS_CONFIG_PATH, TARGETS_DIR, prometheus_agent_config
from gpucluster.render.slurm.guard import (
    COLLECTOR_PORT,
    COLLECTOR_USER,
    IMDS_GUARD_UNIT,
    SIGNER_PORT,
    SIGNER_USER,
    SIGNERS_SYSUSERS,
    systemd_unit,
)
from gpucluster.render.slurm.names import AGENT_LIB, SlurmContext
from gpucluster.render.slurm.team_metrics import TEAM_METRICS_LISTEN, has_team_metrics, team_metrics_files

COLLECTOR_UNIT = "gpucluster-collector.service"
SIGNER_UNIT = "gpucluster-collector-signer.service"
SIGNER_LISTEN = f"127.0.0.1:{SIGNER_PORT}"
HARDENING = (
    SERVICE_SANDBOX + "PrivateDevices=yes\n"
    "ProtectKernelTunables=yes\nProtectKernelModules=yes\nProtectControlGroups=yes\n"
    "CapabilityBoundingSet=\nAmbientCapabilities=\n"
)
COLLECTOR_LISTEN = f"127.0.0.1:{COLLECTOR_PORT}"
COLLECTOR_MEMORY_MAX = "40%"
"""Of the head node's memory. Prometheus in agent mode holds the active series and the remote-write queues in memory
(a few KB a series, some 4,500 series a p5 node: about 1.5 GB for 100 p5 nodes); past the cap the kernel stops
Prometheus (restarted, its WAL replayed) and not slurmctld, slurmdbd or MariaDB beside it. A share rather than a
size: a cluster big enough to need more runs on a bigger head node (``slurm.headNode.instanceType``)."""
SIGNER_MEMORY_MAX = "512M"
"""The signer holds the remote-write batches in flight (each a few hundred KB, at most 32 MiB) and boto3."""
PACKAGE_UNIT = "prometheus.service"
"""The package's own server, disabled and masked on the head node."""
COLLECTOR_PACKAGES = ("prometheus",)
SETUP_UNITS = (PACKAGE_UNIT, SIGNER_UNIT, COLLECTOR_UNIT)
"""The head setup's: the package's own server masked, the signer and the collector enabled."""
WAL_MAX_AGE = "4h"
"""Unsent samples older than this are dropped when the WAL is truncated (every 2 h): what an AMP outage may last
before data is lost, and what bounds the WAL's size on the root volume."""


def collector_workspace(ctx: SlurmContext, workspace_id: str | None) -> str | None:
    """The workspace the head node's collector writes to; None when it runs no collector."""
    monitoring = ctx.monitoring
    if monitoring is None or not monitoring.slurm_collector or not workspace_id:
        return None
    return workspace_id


def collector_unit() -> str:
    """``gpucluster-collector.service``: Prometheus in agent mode, hardened, restarted whenever it stops."""
    exec_start = " ".join(
        [
            "/usr/bin/prometheus",
            "--enable-feature=agent",
            f"--config.file={PROMETHEUS_CONFIG_PATH}",
            f"--storage.agent.path={AGENT_WAL_PATH}",
            f"--storage.agent.retention.max-time={WAL_MAX_AGE}",
            "--storage.agent.wal-compression",
            f"--web.listen-address={COLLECTOR_LISTEN}",
        ]
    )
    body = (
        f"Wants=network-online.target {SIGNER_UNIT}\nRequires={IMDS_GUARD_UNIT}\n"
        f"After=network-online.target {IMDS_GUARD_UNIT} gpucluster-head-config.service {SIGNER_UNIT}\n\n"
        "[Service]\n"
        f"User={COLLECTOR_USER}\nGroup={COLLECTOR_USER}\n"
        f"StateDirectory={AGENT_WAL_PATH.removeprefix('/var/lib/')}\nStateDirectoryMode=0750\n"
        f"ExecStart={exec_start}\n"
        "ExecReload=/bin/kill -HUP $MAINPID\n"
        "Restart=always\nRestartSec=10\nTimeoutStopSec=20s\n"
        f"ReadWritePaths={AGENT_WAL_PATH}\nMemoryMax={COLLECTOR_MEMORY_MAX}\n" + HARDENING
    )
    return systemd_unit(
        "gpucluster: Prometheus in agent mode, remote-writing the cluster's metrics to AMP", body, "WantedBy=multi-user.target"
    )


def signer_unit(region: str, workspace_id: str, cluster: str) -> str:
    """``gpucluster-collector-signer.service``: the node package's SigV4 signer in front of the workspace, which also
    writes the collector's targets (listed in EC2) to its StateDirectory, from the package's root-owned directory
    (``-E -s``: nothing in the environment chooses what it imports), as :data:`SIGNER_USER`: the one user of the
    collector that the IMDS guard lets through."""
    exec_start = " ".join(
        [
            "/usr/bin/python3 -E -s -m gpucluster_agents.metrics remote-write-signer",
            f"--listen {SIGNER_LISTEN} --region {region} --workspace {workspace_id}",
            f"--cluster {cluster} --targets-dir {TARGETS_DIR}",
        ]
    )
    body = (
        f"Wants=network-online.target\nRequires={IMDS_GUARD_UNIT}\n"
        f"After=network-online.target {IMDS_GUARD_UNIT} gpucluster-head-config.service\n"
        f"Before={COLLECTOR_UNIT}\n\n"
        "[Service]\n"
        f"User={SIGNER_USER}\nGroup={SIGNER_USER}\nWorkingDirectory={AGENT_LIB}\n"
        f"StateDirectory={TARGETS_DIR.removeprefix('/var/lib/')}\nStateDirectoryMode=0755\n"
        f"ExecStart={exec_start}\n"
        f"Restart=always\nRestartSec=5\nMemoryMax={SIGNER_MEMORY_MAX}\n" + HARDENING
    )
    return systemd_unit(
        "gpucluster: sign the collector's remote writes for AMP (SigV4), list its targets", body, "WantedBy=multi-user.target"
    )


def signer_sysusers() -> str:
    """The signer's system user, for ``systemd-sysusers`` (sysusers.d(5)): no home, no shell, a group of its own."""
    return (
        "# gpucluster: the collector's SigV4 signer; the head node's IMDS guard lets this user through. Generated.\n"
        f'u {SIGNER_USER} - "gpucluster collector signer" /nonexistent /usr/sbin/nologin\n'
    )


def collector_files(ctx: SlurmContext, workspace_id: str) -> list[WriteFile]:
    """The collector's config (the cluster's nodes, the signer in front of the workspace), the signer's unit and the
    collector's."""
    monitoring = ctx.monitoring
    if monitoring is None:
        raise ValueError("collector_files: monitoring is off")
    interval = monitoring.spec.scrape_interval_seconds
    teams = has_team_metrics(ctx, collector=True)
    config = prometheus_agent_config(
        ctx.cluster, workspace_id, interval, signer=SIGNER_LISTEN, teams=TEAM_METRICS_LISTEN if teams else None
    )
    return [
        WriteFile(PROMETHEUS_CONFIG_PATH, config),
        WriteFile(SIGNERS_SYSUSERS, signer_sysusers()),
        WriteFile(f"/etc/systemd/system/{SIGNER_UNIT}", signer_unit(ctx.region, workspace_id, ctx.cluster)),
        WriteFile(f"/etc/systemd/system/{COLLECTOR_UNIT}", collector_unit()),
        *(team_metrics_files() if teams else []),
    ]
