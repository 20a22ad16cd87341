"""A compute node's metrics (docs/monitoring.md "Metrics"): gpucluster's exporter (GPU metrics from NVML under
the DCGM exporter's names, EFA, Lustre) as ``gpucluster-metrics.service`` on port 9400, and Debian's
``prometheus-node-exporter`` (host metrics) on port 9100. Both listen on the node's private address only, never on
every address: the collector on the head node scrapes them, and the cluster's security group admits the two ports
from itself only.

Each port is held by a ``.socket`` unit (:func:`socket_unit`), which systemd binds at boot before any service
(sockets.target, so before slurmd and any job) and keeps bound while its exporter restarts or is upgraded: a job
cannot take :9400 or :9100 in between and answer the collector with values of its own, and a scrape sent meanwhile
waits in the socket's backlog for the exporter's next start (``Restart=always``, ``RestartSec=1``). The exporters
take the socket from systemd (``--systemd-socket``; the node exporter's ``--web.systemd-socket``). The units name
127.0.0.1; the setup writes each one's drop-in with the node's private address (``metrics listen-drop-ins``, once:
an instance keeps its primary private address for life) before it starts them, and ``FreeBind=`` lets systemd bind
that address at later boots before the network is up.

The exporter is the node package's (``python3 -E -s -m gpucluster_agents.metrics serve …`` from the package's
root-owned directory: nothing in its environment chooses what it imports). It runs as root — NVML, the
kernel's own log (``/dev/kmsg``, for XIDs) and Lustre 2.15's debugfs stats are root's — in a read-only view
of the system (``ProtectSystem=strict``), with no new privileges and no writable home or /tmp.
"""

from __future__ import annotations

import shlex

from gpucluster.config.slurm.health import nvidia_gpus
from gpucluster.render.core import SERVICE_SANDBOX, WriteFile
from gpucluster.render.slurm.names import AGENT_LIB
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup

METRICS_UNIT = "gpucluster-metrics.service"
NODE_EXPORTER_UNIT = "prometheus-node-exporter.service"
METRICS_SOCKET = "gpucluster-metrics.socket"
NODE_EXPORTER_SOCKET = "prometheus-node-exporter.socket"
UNIT_DIR = "/etc/systemd/system"
BACKLOG = 1024  # connections the kernel queues while the exporter is busy or restarting (the exporter's own cap: 512)
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


def socket_unit(description: str, port: int) -> str:
    """A ``.socket`` unit holding ``port`` for the service of the same name (127.0.0.1 until the setup's drop-in
    names the private address). No ``ReusePort=``: no other process may bind the port beside it."""
    return f"""[Unit]
Description={description}: its listening socket, held while the exporter restarts
Before=slurmd.service

[Socket]
ListenStream=127.0.0.1:{port}
FreeBind=yes
Backlog={BACKLOG}

[Install]
WantedBy=sockets.target
"""


def metrics_unit(gpus: bool, agent_lib: str = AGENT_LIB, python: str = PYTHON, head: str | None = None) -> str:
    """``gpucluster-metrics.service``; ``gpus`` False: a node without NVIDIA GPUs (EFA and Lustre only). ``head``:
    the agent's state directory on the head node, whose exporter adds Slurm's and the agent's metrics from the
    snapshot SlurmUser writes (:func:`head_snapshot_unit`) and itself runs as a systemd dynamic user: it listens
    where every job reaches it, so it holds neither SlurmUser's rights in Slurm nor a way to IMDS. It serves the
    socket of ``gpucluster-metrics.socket``."""
    serve = ["serve", "--systemd-socket"] + ([] if gpus else ["--no-gpus"])
    after = ""
    if head is not None:
        serve += ["--head-snapshot", HEAD_SNAPSHOT]
        after = f" {HEAD_SNAPSHOT_UNIT}"
    user = "DynamicUser=yes\n" if head is not None else ""
    return f"""[Unit]
Description=gpucluster node metrics
Requires={METRICS_SOCKET}
After={METRICS_SOCKET} network-online.target nvidia-persistenced.service remote-fs.target{after}
Wants=network-online.target{after}

[Service]
{user}WorkingDirectory={agent_lib}
ExecStart={_exec(*serve, python=python)}
Restart=always
RestartSec=1
{SERVICE_SANDBOX}
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
{SERVICE_SANDBOX}
[Install]
WantedBy=multi-user.target
"""


def node_exporter_drop_in(agent_lib: str = AGENT_LIB, python: str = PYTHON, head: bool = False) -> str:
    """Debian's unit runs ``prometheus-node-exporter $ARGS`` on every address; this runs it on the socket of
    ``prometheus-node-exporter.socket`` (``metrics node-exporter --systemd-socket`` execs the exporter with
    ``--web.systemd-socket`` and Debian's ``$ARGS`` less any listen address), restarted whatever ends it, the
    systemd collector limited to the Slurm daemon of the node (``head``: :data:`HEAD_NODE_EXPORTER_FLAGS`) before
    ``$ARGS``."""
    flags = HEAD_NODE_EXPORTER_FLAGS if head else systemd_flags(COMPUTE_SYSTEMD_UNITS)
    run = _exec("node-exporter", "--systemd-socket", "--", *flags, "$ARGS", python=python)
    return f"""[Unit]
Requires={NODE_EXPORTER_SOCKET}
After={NODE_EXPORTER_SOCKET}

[Service]
WorkingDirectory={agent_lib}
ExecStart=
ExecStart={run}
Restart=always
RestartSec=1
"""


def metrics_files(group: ResolvedNodeGroup | None, head: str | None = None) -> tuple[WriteFile, ...]:
    """A compute node's (``group``) or the head node's (``head``: the agent's state directory) units: the two
    exporters and the two sockets they serve, and on the head node the snapshot the exporter serves Slurm's figures
    from."""
    gpus = group is not None and nvidia_gpus(group.facts)
    snapshot = (WriteFile(f"/etc/systemd/system/{HEAD_SNAPSHOT_UNIT}", head_snapshot_unit(head)),) if head else ()
    return (
        *snapshot,
        WriteFile(f"{UNIT_DIR}/{METRICS_SOCKET}", socket_unit("gpucluster node metrics", METRICS_PORT)),
        WriteFile(f"{UNIT_DIR}/{METRICS_UNIT}", metrics_unit(gpus, head=head)),
        WriteFile(f"{UNIT_DIR}/{NODE_EXPORTER_SOCKET}", socket_unit("Prometheus node exporter", NODE_EXPORTER_PORT)),
        WriteFile(NODE_EXPORTER_DROP_IN, node_exporter_drop_in(head=head is not None)),
    )


def enable_units(head: bool = False, agent_lib: str = AGENT_LIB, python: str = PYTHON) -> str:
    """The setup script's lines (after the package is installed): the sockets' private address, then the sockets,
    (on the head node the snapshot,) then both exporters, now and at every boot. Whatever the package's install
    started is stopped first: a socket cannot bind a port its service holds, nor take a new address while it
    listens."""
    sockets = f"{METRICS_SOCKET}={METRICS_PORT} {NODE_EXPORTER_SOCKET}={NODE_EXPORTER_PORT}".split()
    drop_ins = " ".join([_exec("listen-drop-ins", UNIT_DIR, python=python), *(f"--socket {s}" for s in sockets)])
    units = (METRICS_UNIT, NODE_EXPORTER_UNIT, METRICS_SOCKET, NODE_EXPORTER_SOCKET)
    return "\n".join(
        [
            f"(cd {shlex.quote(agent_lib)} && {drop_ins})",
            "systemctl daemon-reload",
            "systemctl stop " + " ".join(units),
            "systemctl enable --now " + " ".join(units[2:]),
            *([f"systemctl enable --now {HEAD_SNAPSHOT_UNIT}"] if head else []),
            "systemctl enable --now " + " ".join(units[:2]),
        ]
    )
