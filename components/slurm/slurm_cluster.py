"""SlurmCluster: a Slurm head node and the compute nodes of every ``scheduler: slurm`` node group.

The head node (:mod:`gpucluster.components.slurm._head_node`) lives in a private subnet behind a network
interface of its own, with an encrypted, protected and retained data volume for slurmctld's state, the
accounting database and the node agent's launch journal. cloud-init installs Slurm 23.11 from Ubuntu 24.04,
writes the rendered slurm.conf / gres.conf / cgroup.conf / topology.conf and the agent's config, and
fetches the node agent from the cluster's artifact bucket (:mod:`gpucluster.components.slurm._artifact`;
user data is capped at 16 KB).

The munge key is made once by the head node at its first boot into an empty Secrets Manager secret
(this program never sees it: it is not in user data nor in Pulumi state); every node reads it there.

Compute nodes are Slurm node groups over the shared launch-template core (``slurm/_node_group.py``; instance tags
exposed in metadata, so a node reads the name the agent tagged it with): dynamic groups have no Auto
Scaling group (the agent launches from the template), static groups have one.

The head node's role can only launch from the cluster's launch templates, tag and terminate the
cluster's dynamic nodes, describe instances and their topology, and pass the compute nodes' role to EC2
(the agent's policy is :mod:`gpucluster.components._shared.agent_iam`, the others :mod:`gpucluster.render.iam`).

Hybrid mode (``hybrid.controller`` set, the stack's path): the site's own slurmctld is the controller, so there is
no head node and no private DNS zone; the munge secret sits under a KMS key of its own and is written by the site
(:mod:`gpucluster.components.slurm._hybrid`), and the compute nodes carry the site's Slurm security group
(:mod:`gpucluster.components.hybrid._security`).

This module wires the parts together: the munge secret, the agent package, the compute nodes' role and
node groups, the head node, the teardown of the agent's instances when the cluster is deleted
(:mod:`gpucluster.components.slurm._teardown`: ``pulumi destroy --run-program``), and the private DNS name
compute nodes find slurmctld at.
"""

from collections.abc import Sequence
from typing import Required, TypedDict

import pulumi

from gpucluster.components._shared.agent_iam import LaunchRights
from gpucluster.components._shared.build import adopt
from gpucluster.components._shared.config_types import NodeGroupConfig, SlurmConfig, SubnetConfig
from gpucluster.components._shared.edge import at_edge
from gpucluster.components.slurm._args import SlurmWiring, from_args
from gpucluster.components.slurm._build import SlurmParts, build_slurm_cluster

TOKEN = "gpucluster:index:SlurmCluster"


class SlurmClusterLustreArgs(TypedDict, total=False):
    """The cluster's Lustre file system, as the head node and compute nodes mount it."""

    dns_name: Required[pulumi.Input[str]]
    """The file system's DNS name (``LustreStorage.dns_name``). Required. May be an Output."""
    mount_name: Required[pulumi.Input[str]]
    """The file system's mount name (``LustreStorage.mount_name``). Required. May be an Output."""
    file_system_id: pulumi.Input[str]
    """The file system id (``fs-…``), named in the nodes' mount unit. Default: none. May be an Output."""
    mount_point: str
    """Where nodes mount it. Default: the stack's ``storage.lustre.mountPoint`` default (``/fsx``)."""
    mount_options: str
    """mount(8) options. Default: the stack's ``storage.lustre.mountOptions`` default."""


class SlurmClusterArgs(SlurmConfig, total=False):
    """Inputs of :class:`SlurmCluster`: the ``gpucluster:slurm`` settings (head node, accounting, power
    saving, per-group partitions, agent, protection; every default the stack's), the node groups it
    schedules, and where they live. Validated, checked and resolved as a stack config with your own VPC."""

    cluster_name: Required[str]
    """Cluster name: Slurm ClusterName, prefix of resource names, value of the cluster tag. Required."""
    region: str
    """AWS region of the cluster. Default: the program's ``aws:region``."""
    compute_node_groups: Required[list[NodeGroupConfig]]
    """The node groups Slurm runs, as ``gpucluster:nodeGroups`` entries (their partitions and modes are in
    ``nodeGroups``). Required: at least one. Their ``subnetIds`` and ``capacity`` ids may be Outputs."""
    vpc_id: Required[pulumi.Input[str]]
    """The VPC of the nodes, for the cluster's private DNS zone. Required. May be an Output."""
    subnets: Required[list[SubnetConfig]]
    """The private subnets nodes and the head node may use, each with its zone (``network.subnets``). A
    group without ``subnetIds`` uses the first subnet of each of its zones; the head node
    (``headNode.subnetId`` unset) the first of its zone. Required. Ids may be Outputs."""
    security_group_ids: Required[pulumi.Input[list[pulumi.Input[str]]]]
    """Security groups of the head node and the compute nodes; they must allow all traffic between
    members (slurmctld, slurmd, srun, EFA), e.g. a ``Network``'s EFA and node groups. Required."""
    lustre: SlurmClusterLustreArgs
    """A Lustre file system every node (and the head node, unless ``headNode.mountSharedStorage`` is false)
    mounts. Default: none."""
    tags: dict[str, str]
    """Tags on every taggable child and the instances they launch. Default: none."""


class SlurmCluster(pulumi.ComponentResource):
    """A Slurm head node (slurmctld, optional slurmdbd, the node agent) and its compute node groups."""

    head_instance_id: pulumi.Output[str] | None
    """EC2 instance id of the head node; none in hybrid mode (the site's slurmctld is the controller)."""
    head_private_ip: pulumi.Output[str] | None
    """Private IPv4 address of the head node (its own network interface; slurmctld's DNS record)."""
    controller_address: str
    """``slurmctld.<cluster>.gpucluster.internal``, or in hybrid mode the site controller's address: where compute
    nodes fetch their configuration."""
    munge_secret_arn: pulumi.Output[str]
    """ARN of the Secrets Manager secret the head node writes the munge key into at its first boot."""
    head_role_arn: pulumi.Output[str] | None
    """ARN of the head node's IAM role (launches and terminates the cluster's dynamic nodes)."""
    node_role_arn: pulumi.Output[str]
    """ARN of the compute nodes' IAM role."""
    data_volume_id: pulumi.Output[str] | None
    """EBS volume id of the head node's data volume (slurmctld state, accounting database, agent journal)."""
    head_user_data: pulumi.Output[str] | None
    """The head node's rendered cloud-config (plain text; the instance gets it gzipped)."""
    launch_template_ids: pulumi.Output[dict[str, str]]
    """Launch template id of each Slurm node group, by node group name."""
    # Python-only attributes, annotated where _create sets them (the schema analyzer reads every class
    # annotation as an output): node_groups (the SlurmNodeGroup of each group) and compute_user_data.

    def __init__(self, name: str, args: SlurmClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        with at_edge("SlurmCluster"):
            adapted = from_args(args)  # every error before any resource
        super().__init__(TOKEN, name, None, opts)
        self._parts = build_slurm_cluster(self, name, adapted.resolved, adapted.wiring)
        adopt(self, self._parts)

    def launch_rights(self, groups: Sequence[str]) -> LaunchRights:
        """What the node agent may launch for ``groups`` (:meth:`SlurmParts.launch_rights`)."""
        return self._parts.launch_rights(groups)


__all__ = [
    "TOKEN",
    "SlurmCluster",
    "SlurmClusterArgs",
    "SlurmClusterLustreArgs",
    "SlurmParts",
    "SlurmWiring",
    "build_slurm_cluster",
    "from_args",
]
