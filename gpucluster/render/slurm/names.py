"""Names of a Slurm cluster's things: hosts, the DNS zone, the munge secret, node groups with their node
names and partitions, and the ports and paths every other Slurm module places files at.

Also the cluster's view the files are rendered from (:class:`SlurmContext`, :class:`SlurmGroup`): each
renderer module takes it, so it lives at the bottom with the names."""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.node_group import NodeGroupSpec
from gpucluster.config.slurm import SLURM_VERSION, SlurmNodeGroupSpec, SlurmSpec
from gpucluster.facts.catalog import Catalog, InstanceFacts
from gpucluster_agents.contract import node_names

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
AGENT_LOG = "/var/log/slurm/gpucluster-agent.log"
AGENT_COMMAND = "/usr/local/sbin/gpucluster-agent"  # an operator's `status`, `release-brake <group>`, `clear-protect <group>`
AWS_HELPER = "/usr/local/sbin/gpucluster-aws"
AWS_HELPER_CONFIG = AWS_HELPER + ".json"  # gpucluster_agents.boot.helper reads its config next to itself
HEAD_SETUP = "/usr/local/sbin/gpucluster-slurm-head"
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


def partition_name(group: NodeGroupSpec, entry: SlurmNodeGroupSpec) -> str:
    """The group's partition: the one its Slurm settings name, else the group's own name."""
    return entry.partition or group.name


@dataclass(frozen=True)
class SlurmContext:
    """What the Slurm files are rendered from: the cluster's name and region, its resolved Slurm section
    and its Slurm node groups (resolved, config order)."""

    cluster: str
    region: str
    slurm: SlurmSpec
    node_groups: tuple[NodeGroupSpec, ...]
    slurm_version: str = SLURM_VERSION
    """The Slurm version the files are rendered for (:mod:`gpucluster.render.slurm.versions`): the head node's
    unless a site's own controller reads them."""
    scratch: tuple[tuple[str, str], ...] = ()
    """``(node group, NVMe scratch mount point)`` of the groups with local scratch: jobs' private /tmp goes there."""

    @classmethod
    def of(cls, spec: ClusterSpec, *, slurm_version: str = SLURM_VERSION) -> SlurmContext:
        if spec.slurm is None:
            raise ValueError(f"cluster {spec.name!r} has no Slurm section")
        groups = tuple(spec.groups_for("slurm"))
        nvme = spec.storage.nvme_scratch if spec.storage else None
        scratch = tuple((g.name, nvme.mount_point) for g in groups if nvme and g.name in (nvme.node_groups or ()))
        return cls(spec.name, spec.region, spec.slurm, groups, slurm_version, scratch)


@dataclass(frozen=True)
class SlurmGroup:
    """A Slurm node group with its facts and resolved settings."""

    group: NodeGroupSpec
    facts: InstanceFacts
    entry: SlurmNodeGroupSpec

    @property
    def name(self) -> str:
        return self.group.name

    @property
    def static(self) -> bool:
        return self.entry.mode == "static"

    @property
    def partition(self) -> str:
        return partition_name(self.group, self.entry)

    @property
    def node_names(self) -> list[str]:
        return node_names(self.name, self.group.max_size)


def slurm_groups(ctx: SlurmContext, catalog: Catalog) -> list[SlurmGroup]:
    """The Slurm node groups with their facts and settings, in config order."""
    return [SlurmGroup(g, catalog[g.instance_type], ctx.slurm.settings(g.name)) for g in ctx.node_groups]
