"""Names of a Slurm cluster's things: hosts, the DNS zone, the munge secret, node groups with their node
names and partitions, and the ports and paths every other Slurm module places files at.

Also the cluster's view the files are rendered from (:class:`SlurmContext`, its node groups the resolved
:class:`~gpucluster.resolve.compute.node_group.SlurmGroup`): each renderer module takes it, so it lives at the bottom
with the names."""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.config.slurm import SLURM_VERSION, SlurmSpec
from gpucluster.resolve.cluster import ResolvedCluster
from gpucluster.resolve.compute.node_group import SlurmGroup
from gpucluster.resolve.monitoring import ResolvedMonitoring
from gpucluster.resolve.slurm.identity import ResolvedIdentity
from gpucluster.resolve.slurm.teams import ResolvedTeams

__all__ = ["SlurmContext", "SlurmGroup"]

# Ports and paths (Ubuntu's slurm-wlm packaging: /etc/slurm, /var/log/slurm, SlurmUser slurm).
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SLURMDBD_PORT = 6819
SLURM_ETC = "/etc/slurm"
DATA_DIR = "/srv/slurm"  # the head node's data volume
STATE_SAVE_LOCATION = f"{DATA_DIR}/slurmctld"
AGENT_STATE_DIR = f"{DATA_DIR}/agent"  # launch journal and holds survive a new head node
TOPOLOGY_DIR = "/var/lib/gpucluster/slurm"  # the agent (user slurm) rewrites topology.conf here
AGENT_CONFIG_PATH = "/etc/gpucluster/agent.json"
AGENT_PACKAGE_PATH = "/etc/gpucluster/agent-package.json"  # bucket, key and sha256 of the agent's zip
AGENT_LIB = "/opt/gpucluster/lib"
AGENT_BIN = "/opt/gpucluster/bin"
AGENT_PYTHON = "/usr/bin/python3 -E -s -m gpucluster_agents"
"""How a head-node unit starts the node agent, as the exporter, signer and shipper start theirs: from the package's
directory (:func:`agent_service`'s ``WorkingDirectory``, the first entry of ``sys.path`` under ``-m``) with ``-E -s``,
so no ``PYTHON*`` variable and no user site of the unit's user (slurm) reach its imports."""
AGENT_LOG = "/var/log/slurm/gpucluster-agent.log"
AGENT_COMMAND = "/usr/local/sbin/gpucluster-agent"  # an operator's `status`, `release-brake <group>`, `clear-protect <group>`
AWS_HELPER = "/usr/local/sbin/gpucluster-aws"
AWS_HELPER_CONFIG = AWS_HELPER + ".json"  # gpucluster_agents.boot.helper reads its config next to itself
HEAD_SETUP = "/usr/local/sbin/gpucluster-slurm-head"
HEAD_FILES_POINTER = "/etc/gpucluster/head-files.json"  # bucket, key and sha256 of the head node's files (headfiles.py)
NODE_SETUP = "/usr/local/sbin/gpucluster-slurm-node"
TASK_PROLOG = "/etc/gpucluster/slurm/task-prolog"
# slurm.conf key, wrapper under AGENT_BIN, agent subcommand
PROGRAMS = (
    ("ResumeProgram", "slurm-resume", "resume"),
    ("SuspendProgram", "slurm-suspend", "suspend"),
    ("ResumeFailProgram", "slurm-resume-fail", "resume-fail"),
)


def head_hostname(cluster: str) -> str:
    return f"{cluster}-head"


def dns_zone(cluster: str) -> str:
    """The private hosted zone of the cluster (``.internal`` is reserved for private use)."""
    return f"{cluster}.gpucluster.internal"


def controller_address(cluster: str) -> str:
    """The name compute nodes reach slurmctld at: an A record in the cluster's private zone, pointing
    at the head node's own network interface (its address survives a new head node)."""
    return f"slurmctld.{dns_zone(cluster)}"


def munge_secret_name(cluster: str) -> str:
    return f"gpucluster/{cluster}/munge-key"


@dataclass(frozen=True)
class SlurmContext:
    """What the Slurm files are rendered from: the cluster's name and region, its resolved Slurm section
    and its Slurm node groups (resolved, config order)."""

    cluster: str
    region: str
    slurm: SlurmSpec
    node_groups: tuple[SlurmGroup, ...]
    slurm_version: str = SLURM_VERSION
    """The Slurm version the files are rendered for (:mod:`gpucluster.render.slurm.versions`): the head node's
    unless a site's own controller reads them."""
    scratch: tuple[tuple[str, str], ...] = ()
    """``(node group, NVMe scratch mount point)`` of the groups with local scratch: jobs' private /tmp goes there."""
    identity: ResolvedIdentity | None = None
    """Who the people are (the resolved ``slurm.identity``): the admin group's sudo rule and the declared users."""
    srun_ports: tuple[int, int] | None = None
    """``SrunPortRange`` (first, last) when the cluster has login nodes (srun runs there); None: not rendered."""
    teams: ResolvedTeams | None = None
    """The resolved ``slurm.teams`` (limits enforced, QOS, preemption), or None without teams."""
    prices: tuple[tuple[str, float | None], ...] = ()
    """``(node group, USD per node-hour the plan uses)`` of the Slurm groups: the usage report's GPU prices."""
    monitoring: ResolvedMonitoring | None = None
    """The resolved ``monitoring`` (None when off): the head node's collector and every node's log shipping."""

    @classmethod
    def of(cls, cluster: ResolvedCluster, *, slurm_version: str | None = None) -> SlurmContext:
        """The context of ``cluster``'s Slurm files, for its resolved Slurm version unless ``slurm_version`` (the
        version tests render for) is given."""
        if cluster.slurm is None:
            raise ValueError(f"cluster {cluster.name!r} has no Slurm section")
        groups = cluster.slurm.node_groups
        scratch = tuple((g.name, g.nvme_scratch.mount_point) for g in groups if g.nvme_scratch is not None)
        version = slurm_version or cluster.slurm.version
        login = cluster.slurm.login
        return cls(
            cluster.name,
            cluster.region,
            cluster.slurm.spec,
            groups,
            version,
            scratch,
            cluster.slurm.identity,
            login.srun_ports if login is not None else None,
            cluster.slurm.teams,
            tuple((g.node_group, g.usd_per_node_hour) for g in cluster.estimate.groups),
            cluster.monitoring,
        )


def agent_service(command: str, env: str = "") -> str:
    """A unit's ``[Service]`` lines that run ``gpucluster_agents <command>`` (:data:`AGENT_PYTHON`): the working
    directory, ``env`` (``Environment=`` lines), the command."""
    return f"WorkingDirectory={AGENT_LIB}\n{env}ExecStart={AGENT_PYTHON} {command}\n"
