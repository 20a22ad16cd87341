"""The logs that must outlive their node (docs/logs.md): gpucluster's own shipper
(:mod:`gpucluster_agents.logship`) as ``gpucluster-logs.service``, and its config ``/etc/gpucluster/logs.json``.

One log group per cluster (``/gpucluster/<cluster>``), created by the stack with its retention and key; a node only
writes streams into it (``logs:CreateLogStream``, ``logs:PutLogEvents``, ``logs:DescribeLogStreams`` on that group:
no ``CreateLogGroup``, no ``PutRetentionPolicy``). A stream is ``<instance id>/<log>``, so a terminated dynamic
node's slurmd and health logs stay findable by its instance id (the node agent logs it at each launch).

Not AWS's CloudWatch agent: Ubuntu's archive does not carry it, so every unbaked node and the head node would
download it from a host of its own and check its signature at each boot. The shipper is a module of the node
package, which every node already installs (checked against its sha256) or has baked into its image.

The unit runs as root (the logs are root's, slurm's and syslog's) in a read-only view of the system
(``ProtectSystem=strict``) with one writable state directory (the offsets), no new privileges and a private /tmp.
It is ordered ``Before=`` slurmd, slurmctld and slurmdbd, so systemd stops it *after* them at shutdown and it ships
their last lines (a dynamic node powered down by Slurm), and ``After=network-online.target``, so the network is still
up for that last flush.
"""

from __future__ import annotations

import shlex

from gpucluster.render.core import SERVICE_SANDBOX, WriteFile
from gpucluster.render.slurm.health import HEALTH_LOG
from gpucluster.render.slurm.names import AGENT_LIB, AGENT_LOG
from gpucluster_agents.contract.logs import LogFile, LogsConfig, logs_to_json

LOGS_CONFIG_PATH = "/etc/gpucluster/logs.json"
LOGS_UNIT = "gpucluster-logs.service"
STATE_DIRECTORY = "gpucluster-logs"  # /var/lib/gpucluster-logs: systemd's StateDirectory
PYTHON = "/usr/bin/python3"

COMMON_LOGS = {
    "cloud-init": "/var/log/cloud-init.log",
    "cloud-init-output": "/var/log/cloud-init-output.log",
    "gpucluster-setup": "/var/log/gpucluster/*.log",
}
HEAD_LOGS = {
    "slurmctld": "/var/log/slurm/slurmctld.log",
    "slurmdbd": "/var/log/slurm/slurmdbd.log",
    "gpucluster-agent": AGENT_LOG,
}
COMPUTE_LOGS = {
    "slurmd": "/var/log/slurm/slurmd.log",
    "health": HEALTH_LOG,
}
# A login node: who logged in and how. auth.log holds every user's sshd, PAM and sudo lines (other people's logins
# included: the cluster's log group is for its administrators, docs/logs.md); syslog is the journal's copy, where
# sackd, the users program, the identity helper and oddjobd write; SSSD's own logs with a directory; Session Manager's
# agent (the sessions it opened). The setup's and the drain program's logs are gpucluster-setup's.
LOGIN_LOGS = {
    "auth": "/var/log/auth.log",
    "syslog": "/var/log/syslog",
    "sssd": "/var/log/sssd/*.log",
    "ssm-agent": "/var/log/amazon/ssm/amazon-ssm-agent.log",
}
ROLE_LOGS = {"head": HEAD_LOGS, "compute": COMPUTE_LOGS, "login": LOGIN_LOGS}
"""Each role's own logs; every role ships :data:`COMMON_LOGS` too."""


def log_group_name(cluster: str) -> str:
    return f"/gpucluster/{cluster}"


def _role_files(role: str) -> dict[str, str]:
    if role not in ROLE_LOGS:
        raise ValueError(f"role {role!r}: one of {', '.join(ROLE_LOGS)}")
    return {**ROLE_LOGS[role], **COMMON_LOGS}


def stream_patterns(role: str) -> tuple[str, ...]:
    """The log-stream names a ``head``, ``compute`` or ``login`` node writes, as IAM resource patterns: ``*/<name>`` for a file,
    ``*/<name>/*`` for a glob's files (the shipper's ``<instance id>/<name>[/<file>]``). IAM cannot tie a stream to
    the instance that writes it (no policy variable holds a bare instance id, and stream names may not hold the ``:``
    of ``aws:userid`` or ``ec2:SourceInstanceARN``), so a role is held to its own logs' names: a compute node cannot
    write the head node's slurmctld, slurmdbd or agent streams, a login node none of theirs (docs/logs.md, "Security")."""
    files = _role_files(role)
    return tuple(f"*/{name}/*" if LogFile(name, path).is_glob else f"*/{name}" for name, path in files.items())


def logs_config(cluster: str, region: str, role: str) -> LogsConfig:
    """What a ``head``, ``compute`` or ``login`` node of ``cluster`` ships."""
    files = _role_files(role)
    return LogsConfig(
        region=region,
        log_group=log_group_name(cluster),
        files=tuple(LogFile(name, path) for name, path in files.items()),
        state_file=f"/var/lib/{STATE_DIRECTORY}/state.json",
    )


def logs_unit(agent_lib: str = AGENT_LIB, python: str = PYTHON, config: str = LOGS_CONFIG_PATH) -> str:
    """``gpucluster-logs.service``: the node package's shipper, run from its root-owned directory (``-E -s``: nothing
    in the environment chooses what it imports)."""
    run = " ".join(shlex.quote(w) for w in (python, "-E", "-s", "-m", "gpucluster_agents.logship", "run", "--config", config))
    return f"""[Unit]
Description=gpucluster: ship this node's logs to CloudWatch Logs
Wants=network-online.target
After=network-online.target
Before=slurmd.service slurmctld.service slurmdbd.service

[Service]
WorkingDirectory={agent_lib}
ExecStart={run}
Restart=always
RestartSec=10
TimeoutStopSec=75
StateDirectory={STATE_DIRECTORY}
StateDirectoryMode=0700
{SERVICE_SANDBOX}
[Install]
WantedBy=multi-user.target
"""


def logs_files(cluster: str, region: str, role: str) -> tuple[WriteFile, ...]:
    """The config and the unit of a ``head``, ``compute`` or ``login`` node."""
    return (
        WriteFile(LOGS_CONFIG_PATH, logs_to_json(logs_config(cluster, region, role))),
        WriteFile(f"/etc/systemd/system/{LOGS_UNIT}", logs_unit()),
    )
