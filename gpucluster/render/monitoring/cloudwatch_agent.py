"""The CloudWatch agent's configuration: the logs that must outlive their node, shipped to the cluster's log group.

One log group per cluster (``/gpucluster/<cluster>``), created by the stack with its retention and key; the agent
only writes streams into it (``logs:CreateLogStream``, ``logs:PutLogEvents``, ``logs:DescribeLogStreams`` on that
group: no ``CreateLogGroup``, no ``PutRetentionPolicy``). A stream is ``<instance id>/<log>``, so a terminated
dynamic node's slurmd and health logs stay findable by its instance id (the node agent logs it at each launch).

Validated in the tests against the agent's own JSON schema (aws/amazon-cloudwatch-agent, pinned).
"""

from __future__ import annotations

import json

from gpucluster.render.slurm.health import HEALTH_LOG
from gpucluster.render.slurm.names import AGENT_LOG

AGENT_CONFIG_PATH = "/opt/aws/amazon-cloudwatch-agent/etc/amazon-cloudwatch-agent.json"
AGENT_OWN_LOG = "/opt/aws/amazon-cloudwatch-agent/logs/amazon-cloudwatch-agent.log"

COMMON_LOGS = {
    "cloud-init": "/var/log/cloud-init.log",
    "cloud-init-output": "/var/log/cloud-init-output.log",
    "cloudwatch-agent": AGENT_OWN_LOG,
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


def log_group_name(cluster: str) -> str:
    return f"/gpucluster/{cluster}"


def cloudwatch_agent_config(cluster: str, role: str) -> str:
    """The agent's JSON for a ``head`` or ``compute`` node of ``cluster``."""
    if role not in ("head", "compute"):
        raise ValueError(f"role {role!r}: head or compute")
    files = {**(HEAD_LOGS if role == "head" else COMPUTE_LOGS), **COMMON_LOGS}
    group = log_group_name(cluster)
    collect = [
        {"file_path": path, "log_group_name": group, "log_stream_name": f"{{instance_id}}/{name}", "timezone": "UTC"}
        for name, path in files.items()
    ]
    doc = {
        "agent": {"run_as_user": "root", "logfile": AGENT_OWN_LOG, "omit_hostname": False},
        "logs": {"logs_collected": {"files": {"collect_list": collect}}, "force_flush_interval": 5},
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"
