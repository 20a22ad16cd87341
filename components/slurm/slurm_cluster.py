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
import pulumi_aws as aws

from gpucluster.components._shared.agent_iam import LaunchRights
from gpucluster.components._shared.build import adopt
from gpucluster.components._shared.config_types import NodeGroupConfig, SlurmConfig, SubnetConfig
from gpucluster.components._shared.roles import ec2_ssm_role
from gpucluster.components.compute._launch_template import NodeWiring, checked_group
from gpucluster.components.hybrid._security import hybrid_node_security_group
from gpucluster.components.slurm._args import SlurmBuild, build_from_args
from gpucluster.components.slurm._artifact import AgentArtifact, agent_artifact
from gpucluster.components.slurm._head_node import head_identity, head_node
from gpucluster.components.slurm._hybrid import site_munge_key
from gpucluster.components.slurm._node_group import SlurmNodeGroup
from gpucluster.components.slurm._teardown import AgentTeardown
from gpucluster.config.naming import with_name
from gpucluster.facts.catalog import Catalog, load_catalog
from gpucluster.render.hybrid.compute import with_munge_secret
from gpucluster.render.iam import policy_json, slurm_node_policy
from gpucluster.render.slurm.agent import NODE_MAPS_PREFIX, with_artifact_bucket
from gpucluster.render.slurm.names import SlurmContext, controller_address, dns_zone, munge_secret_name

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
        # Checked and resolved as the stack would be, before the first resource.
        catalog = load_catalog()
        region = args.get("region") or pulumi.Config("aws").get("region") or "us-east-1"
        build = build_from_args(args, region, catalog)
        super().__init__(TOKEN, name, None, opts)
        self._parts = build_slurm_cluster(self, name, build, catalog)
        adopt(self, self._parts)

    def launch_rights(self, groups: Sequence[str]) -> LaunchRights:
        """What the node agent may launch for ``groups`` (:meth:`SlurmParts.launch_rights`)."""
        return self._parts.launch_rights(groups)


def build_slurm_cluster(parent: pulumi.ComponentResource, name: str, build: SlurmBuild, catalog: Catalog) -> "SlurmParts":
    """The Slurm cluster of ``build`` (resolved), children of ``parent``; registers ``parent``'s outputs."""
    parts = SlurmParts(parent)
    parts._create(name, build, catalog)
    return parts


class SlurmParts:
    """What :func:`build_slurm_cluster` made: a ``SlurmCluster``'s outputs and its node groups."""

    controller_address: str
    munge_secret_arn: pulumi.Output[str]
    node_role_arn: pulumi.Output[str]
    launch_template_ids: pulumi.Output[dict[str, str]]

    def __init__(self, parent: pulumi.ComponentResource) -> None:
        self._parent = parent

    def _create(self, name: str, args: SlurmBuild, catalog: Catalog) -> None:
        slurm = args.slurm
        ctx = SlurmContext(args.cluster_name, args.region, slurm, tuple(args.node_groups))
        cluster = args.cluster_name
        child = pulumi.ResourceOptions(parent=self._parent)
        protect = bool(slurm.protect_data if slurm.protect_data is not None else True)
        keep = pulumi.ResourceOptions(parent=self._parent, protect=protect, retain_on_delete=protect)
        tags = dict(args.tags)
        # --- the agent package, in a private bucket the head node (and compute nodes) read ------------
        artifact = agent_artifact(name, cluster, tags, child)
        invoke = pulumi.InvokeOutputOptions(parent=self._parent)
        partition = aws.get_partition_output(opts=invoke).partition
        account = aws.get_caller_identity_output(opts=invoke).account_id

        # --- the munge key: an empty secret; the head node (or a hybrid site) writes the key ----------
        hybrid = args.hybrid
        self.munge_key_arn: pulumi.Output[str] | None = None
        """The KMS key of a hybrid site's munge secret (hybrid mode); none otherwise (Secrets Manager's own key)."""
        if hybrid is not None:
            site_key = site_munge_key(name, cluster=cluster, site=hybrid, tags=tags, keep=keep, child=child)
            secret, self.munge_key_arn = site_key.secret, site_key.key.arn
        else:
            secret = aws.secretsmanager.Secret(
                f"{name}-munge-key",
                name=munge_secret_name(cluster),
                description=f"munge key of Slurm cluster {cluster}: made by its head node, read by every node",
                recovery_window_in_days=30 if protect else 0,
                tags=with_name(tags, f"{cluster}-munge-key"),
                opts=keep,
            )
        self.munge_secret_arn = secret.arn
        # Compute nodes were rendered before the bucket and the munge secret existed: their names take the
        # stand-ins' places.
        self.compute_user_data: dict[str, pulumi.Output[str]] = {
            n: pulumi.Output.all(u, artifact.bucket.bucket, secret.arn).apply(
                lambda v: with_munge_secret(with_artifact_bucket(str(v[0]), str(v[1])), args.region, str(v[2]))
            )
            for n, u in args.user_data.items()
        }
        """User data per Slurm node group (node setup, storage mount, slurmd joining this cluster), gzip-ready
        cloud-config text. The launch templates carry it; a program that builds its own ``GpuNodeGroup`` for a
        static group (an Auto Scaling group of its own) passes ``compute_user_data[group]`` as its user data and
        tags its instances with this cluster's and the group's tags, and the agent names them."""

        # --- compute nodes: role (Session Manager, read the munge key), launch templates ---------------
        node_role = ec2_ssm_role(
            f"{name}-node",
            description=f"Slurm compute nodes of {cluster}",
            tags=with_name(tags, f"{cluster}-slurm-node"),
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-node-munge",
            role=node_role.id,
            policy=pulumi.Output.all(secret.arn, artifact.bucket.arn, self.munge_key_arn).apply(
                lambda v: policy_json(
                    slurm_node_policy(
                        secret_arn=v[0],
                        bundle_arn=f"{v[1]}/{artifact.key}",
                        node_maps_arn=f"{v[1]}/{NODE_MAPS_PREFIX}*",
                        kms_key_arn=v[2],
                        region=args.region,
                    )
                )
            ),
            opts=child,
        )
        node_profile = aws.iam.InstanceProfile(
            f"{name}-node-profile", role=node_role.name, tags=with_name(tags, f"{cluster}-slurm-node"), opts=child
        )
        self.node_role_arn = node_role.arn
        self.node_profile_arn: pulumi.Output[str] = node_profile.arn
        """The compute nodes' instance profile: the only one the node agent may launch with."""
        self.node_groups: dict[str, SlurmNodeGroup] = {}
        """The compute nodes' launch template (and, for static groups, Auto Scaling group) per node group."""
        security_group_ids = args.security_group_ids
        self.hybrid_security_group_id: pulumi.Output[str] | None = None
        """The Slurm rules between the cloud nodes and a hybrid site (hybrid mode); none otherwise."""
        if hybrid is not None:
            site_sg = hybrid_node_security_group(name, hybrid, vpc_id=args.vpc_id, cluster=cluster, tags=tags, opts=child)
            self.hybrid_security_group_id = site_sg.id
            given = args.security_group_ids
            security_group_ids = (
                [*given, site_sg.id]
                if isinstance(given, (list, tuple))
                else pulumi.Output.from_input(given).apply(lambda ids: [*ids, site_sg.id])
            )
        for g in args.node_groups:
            static = slurm.settings(g.name).mode == "static"
            self.node_groups[g.name] = SlurmNodeGroup(
                f"{name}-{g.name}",
                checked_group(g.spec, catalog),
                NodeWiring(
                    cluster_name=cluster,
                    subnet_ids=args.node_group_subnet_ids[g.name],
                    security_group_ids=security_group_ids,
                    user_data=self.compute_user_data.get(g.name),
                    instance_profile_arn=node_profile.arn,
                    tags=tags,
                    inputs=args.inputs,
                ),
                static=static,
                opts=child,
            )
        self.node_security_group_ids: pulumi.Input[Sequence[pulumi.Input[str]]] = security_group_ids
        """The compute nodes' security groups (their launch templates'): the only ones the agent may launch into."""
        self._specs, self._subnets = {g.name: g.spec for g in args.node_groups}, args.node_group_subnet_ids

        # The agent launches dynamic groups only (static ones belong to their Auto Scaling groups).
        dynamic = [g.name for g in args.node_groups if slurm.settings(g.name).mode == "dynamic"]
        self.head_instance_id = self.head_private_ip = self.head_role_arn = None
        self.data_volume_id = self.head_user_data = None
        head_ip: pulumi.Output[str] | None = None
        if hybrid is None:
            head_ip = self._head(name, args, catalog, ctx, secret.arn, artifact, dynamic, partition, account, protect)
        else:
            # The site's own slurmctld: cloud nodes fetch their configuration from it (``slurmd --conf-server``).
            assert hybrid.controller is not None
            self.controller_address = hybrid.controller.address

        # --- deleting the cluster terminates the agent's instances first -------------------------------
        self._teardown = AgentTeardown(
            name,
            cluster=cluster,
            region=args.region,
            after=[*self.node_groups.values(), node_profile],
            network={"securityGroupIds": args.security_group_ids, "subnetIds": args.node_group_subnet_ids},
            parent=self._parent,
        )
        if head_ip is not None:
            self._controller_record(name, args, head_ip)
        groups = list(self.node_groups)
        self.launch_template_ids = pulumi.Output.all(*[g.launch_template_id for g in self.node_groups.values()]).apply(
            lambda ids: dict(zip(groups, ids, strict=True))
        )
        self._parent.register_outputs(
            {
                "headInstanceId": self.head_instance_id,
                "headPrivateIp": self.head_private_ip,
                "controllerAddress": self.controller_address,
                "mungeSecretArn": self.munge_secret_arn,
                "headRoleArn": self.head_role_arn,
                "nodeRoleArn": self.node_role_arn,
                "dataVolumeId": self.data_volume_id,
                "nodeGroups": {n: ng.launch_template_id for n, ng in self.node_groups.items()},
                "headUserData": self.head_user_data,
                "launchTemplateIds": self.launch_template_ids,
            }
        )

    def _head(
        self,
        name: str,
        args: SlurmBuild,
        catalog: Catalog,
        ctx: SlurmContext,
        secret_arn: pulumi.Output[str],
        artifact: AgentArtifact,
        dynamic: list[str],
        partition: pulumi.Output[str],
        account: pulumi.Output[str],
        protect: bool,
    ) -> pulumi.Output[str]:
        """The head node (slurmctld, the agent); its private address."""
        tags, child = dict(args.tags), pulumi.ResourceOptions(parent=self._parent)
        # --- the head node: its identity, its own interface and data volume, then the instance ---------
        head_role, head_profile = head_identity(
            name,
            ctx=ctx,
            tags=tags,
            partition=partition,
            account=account,
            secret_arn=secret_arn,
            artifact=artifact,
            rights=self.launch_rights(dynamic),
            child=child,
        )
        self.head_role_arn = head_role.arn
        head = head_node(
            name,
            ctx=ctx,
            catalog=catalog,
            inputs=args.inputs,
            tags=tags,
            protect=protect,
            subnet_id=args.head_subnet_id,
            security_group_ids=args.security_group_ids,
            profile=head_profile,
            artifact=artifact,
            node_groups=self.node_groups,
            node_group_subnet_ids=args.node_group_subnet_ids,
            shared_storage=args.shared_storage,
            parent=self._parent,
        )
        self.data_volume_id = head.data_volume_id
        self.head_user_data = head.user_data
        self.head_instance_id = head.instance_id
        self.head_private_ip = head.private_ip
        return head.private_ip

    def launch_rights(self, groups: Sequence[str]) -> LaunchRights:
        """What the node agent may launch for ``groups`` (this cluster's dynamic groups): their templates, instance
        types and subnets, the compute nodes' security groups, role and instance profile."""
        return LaunchRights(
            groups=tuple(groups),
            instance_types=tuple(self._specs[g].instance_type for g in groups),
            launch_template_ids=tuple(self.node_groups[g].launch_template_id for g in groups),
            subnet_ids=tuple(self._subnets[g] for g in groups),
            security_group_ids=self.node_security_group_ids,
            node_role_arn=self.node_role_arn,
            node_profile_arn=self.node_profile_arn,
        )

    def _controller_record(self, name: str, args: SlurmBuild, head_ip: pulumi.Output[str]) -> None:
        """Where compute nodes find slurmctld: a private zone of the cluster's VPC."""
        cluster, tags, child = args.cluster_name, dict(args.tags), pulumi.ResourceOptions(parent=self._parent)
        zone_record = aws.route53.Zone(
            f"{name}-dns",
            name=dns_zone(cluster),
            comment=f"Private names of Slurm cluster {cluster}",
            vpcs=[aws.route53.ZoneVpcArgs(vpc_id=args.vpc_id)],
            force_destroy=True,
            tags=with_name(tags, dns_zone(cluster)),
            opts=child,
        )
        self.controller_address = controller_address(cluster)
        aws.route53.Record(
            f"{name}-slurmctld",
            zone_id=zone_record.zone_id,
            name=self.controller_address,
            type="A",
            ttl=60,
            records=[head_ip],
            opts=child,
        )
