"""A compute node's metrics (docs/monitoring.md "Metrics"): gpucluster's exporter (GPU metrics from NVML under
the DCGM exporter's names, EFA, Lustre) as ``gpucluster-metrics.service`` on port 9400, and Debian's
``prometheus-node-exporter`` (host metrics) on port 9100. Both listen on the node's private address only
(``--listen auto``; the node exporter through the same lookup, :func:`node_exporter_drop_in`), never on every
address: the collector on the head node scrapes them, and the cluster's security group admits the two ports
from itself only.

The exporter is the node package's (``python3 -E -s -m gpucluster_agents.metrics serve …`` from the package's
root-owned directory: nothing in its environment chooses what it imports). It runs as root — NVML, the
kernel's own log (``/dev/kmsg``, for XIDs) and Lustre 2.15's debugfs stats are root's — in a read-only view
of the system (``ProtectSystem=strict``), with no new privileges and no writable home or /tmp.
"""

from __future__ import annotations

import shlex

from gpucluster.config.slurm_health import nvidia_gpus
from gpucluster.render.core import WriteFile
from gpucluster.render.slurm.names import AGENT_LIB
from gpucluster.resolve.node_group import ResolvedNodeGroup

METRICS_UNIT = "gpucluster-metrics.service"
NODE_EXPORTER_UNIT = "prometheus-node-exporter.service"
NODE_EXPORTER_DROP_IN = f"/etc/systemd/system/{NODE_EXPORTER_UNIT}.d/gpucluster.conf"
METRICS_PORT = 9400  # the DCGM exporter's: a node runs one or the other
NODE_EXPORTER_PORT = 9100
HEAD_SNAPSHOT_UNIT = "gpucluster-head-snapshot.service"
HEAD_SNAPSHOT_DIR = "/run/gpucluster-head-metrics"
HEAD_SNAPSHOT = f"{HEAD_SNAPSHOT_DIR}/snapshot.json"
"""Slurm's and the agent's figures, written by SlurmUser for the head node's exporter (:func:`head_snapshot_unit`)."""
METRICS_PACKAGES = ("prometheus-node-exporter",)
PYTHON = "/usr/bin/python3"
# The node exporter's systemd collector (on by default in Debian's build, off upstream: named explicitly) limited
# to the units the alert rules read: slurmctld and slurmdbd on the head node (SlurmctldDown, SlurmdbdDown), slurmd on
# a compute node. Five series a unit, not every unit of the host (some 150 on a GPU image, 750 series a node). The
# regex has no backslash (systemd would unescape it in ExecStart): "[.]" is a dot.
HEAD_SYSTEMD_UNITS = ("slurmctld", "slurmdbd")
COMPUTE_SYSTEMD_UNITS = ("slurmd",)


def systemd_flags(units: tuple[str, ...]) -> tuple[str, str]:
    """The node exporter's flags that keep the unit states of ``units`` only."""
    return ("--collector.systemd", f"--collector.systemd.unit-include=({'|'.join(units)})[.]service")


HEAD_NODE_EXPORTER_FLAGS = systemd_flags(HEAD_SYSTEMD_UNITS)


def _exec(*args: str, python: str = PYTHON) -> str:
    """An ExecStart command: the package's ``gpucluster_agents.metrics`` run from its directory (the unit's
    WorkingDirectory, the first entry of ``sys.path`` under ``-m``), ``-E -s``: no ``PYTHON*`` variable and no
    user site reach its imports. systemd expands ``$NAME`` and ``%x``: none is in these words but the ``$ARGS``
    the node exporter's drop-in passes on purpose."""
    return " ".join([python, "-E", "-s", "-m", "gpucluster_agents.metrics", *args])


def metrics_unit(gpus: bool, agent_lib: str = AGENT_LIB, python: str = PYTHON, head: str | None = None) -> str:
    """``gpucluster-metrics.service``; ``gpus`` False: a node without NVIDIA GPUs (EFA and Lustre only). ``head``:
    the agent's state directory on the head node, whose exporter adds Slurm's and the agent's metrics from the
    snapshot SlurmUser writes (:func:`head_snapshot_unit`) and itself runs as a systemd dynamic user: it listens
    where every job reaches it, so it holds neither SlurmUser's rights in Slurm nor a way to IMDS."""
    serve = ["serve", "--listen", "auto", "--port", str(METRICS_PORT)] + ([] if gpus else ["--no-gpus"])
    after = ""
    if head is not None:
        serve += ["--head-snapshot", HEAD_SNAPSHOT]
        after = f" {HEAD_SNAPSHOT_UNIT}"
    user = "DynamicUser=yes\n" if head is not None else ""
    return f"""[Unit]
Description=gpucluster node metrics
After=network-online.target nvidia-persistenced.service remote-fs.target{after}
Wants=network-online.target{after}

[Service]
{user}WorkingDirectory={agent_lib}
ExecStart={_exec(*serve, python=python)}
Restart=always
RestartSec=10
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes

[Install]
WantedBy=multi-user.target
"""


def head_snapshot_unit(state_dir: str, agent_lib: str = AGENT_LIB, python: str = PYTHON) -> str:
    """``gpucluster-head-snapshot.service``: as slurm (under ``PrivateData=jobs`` only SlurmUser sees every job; the
    agent's files are slurm's), ``sinfo``/``squeue`` and the agent's state into :data:`HEAD_SNAPSHOT` every 15 s
    (``gpucluster_agents/metrics/snapshot.py``). It listens on nothing; its directory is readable by the exporter."""
    run = _exec("head-snapshot", "--slurm-bin-dir", "/usr/bin", "--agent-state", state_dir, "--out", HEAD_SNAPSHOT, python=python)
    return f"""[Unit]
Description=gpucluster: Slurm's and the agent's figures for the head node's exporter
After=slurmctld.service

[Service]
User=slurm
Group=slurm
RuntimeDirectory={HEAD_SNAPSHOT_DIR.removeprefix("/run/")}
RuntimeDirectoryMode=0755
RuntimeDirectoryPreserve=yes
WorkingDirectory={agent_lib}
ExecStart={run}
Restart=always
RestartSec=10
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes

[Install]
WantedBy=multi-user.target
"""


def node_exporter_drop_in(agent_lib: str = AGENT_LIB, python: str = PYTHON, head: bool = False) -> str:
    """Debian's unit runs ``prometheus-node-exporter $ARGS`` on every address; this runs it on the node's private
    address (``metrics node-exporter`` looks it up, then execs the exporter with Debian's ``$ARGS``), the systemd
    collector limited to the Slurm daemon of the node (``head``: :data:`HEAD_NODE_EXPORTER_FLAGS`) before ``$ARGS``."""
    flags = HEAD_NODE_EXPORTER_FLAGS if head else systemd_flags(COMPUTE_SYSTEMD_UNITS)
    run = _exec("node-exporter", "--port", str(NODE_EXPORTER_PORT), "--", *flags, "$ARGS", python=python)
    return f"""[Service]
WorkingDirectory={agent_lib}
ExecStart=
ExecStart={run}
"""


def metrics_files(group: ResolvedNodeGroup | None, head: str | None = None) -> tuple[WriteFile, ...]:
    """A compute node's (``group``) two units, or the head node's (``head``: the agent's state directory) three."""
    gpus = group is not None and nvidia_gpus(group.facts)
    snapshot = (WriteFile(f"/etc/systemd/system/{HEAD_SNAPSHOT_UNIT}", head_snapshot_unit(head)),) if head else ()
    return (
        *snapshot,
        WriteFile(f"/etc/systemd/system/{METRICS_UNIT}", metrics_unit(gpus, head=head)),
        WriteFile(NODE_EXPORTER_DROP_IN, node_exporter_drop_in(head=head is not None)),
    )


def enable_units(head: bool = False) -> str:
    """The setup script's line: both exporters (and on the head node the snapshot first) now and at every boot
    (after the package is installed)."""
    units = ((HEAD_SNAPSHOT_UNIT,) if head else ()) + (METRICS_UNIT, NODE_EXPORTER_UNIT)
    return "systemctl daemon-reload && systemctl enable --now " + " ".join(shlex.quote(u) for u in units)
