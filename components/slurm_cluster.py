"""SlurmCluster: a Slurm head node and the compute nodes of every ``scheduler: slurm`` node group.

The head node lives in a private subnet behind a network interface of its own (its address, and the
``slurmctld.<cluster>.gpucluster.internal`` record compute nodes reach it at, survive a new head node),
has no SSH ingress (Session Manager instead), IMDSv2, termination protection, an encrypted root
volume and an encrypted, protected and retained data volume for slurmctld's state, the accounting
database and the node agent's launch journal. cloud-init installs Slurm 23.11 from Ubuntu 24.04,
writes the rendered slurm.conf / gres.conf / cgroup.conf / topology.conf and the agent's config, and
fetches the node agent from the cluster's artifact bucket (user data is capped at 16 KB).

The munge key is made once by the head node at its first boot into an empty Secrets Manager secret
(this program never sees it: it is not in user data nor in Pulumi state); every node reads it there.

Compute nodes are :class:`~gpucluster.components.gpu_node_group.GpuNodeGroup` launch templates (instance tags
exposed in metadata, so a node reads the name the agent tagged it with): dynamic groups have no Auto
Scaling group (the agent launches from the template), static groups have one.

The head node's role can only launch from the cluster's launch templates, tag and terminate the
cluster's dynamic nodes, describe instances and their topology, and pass the compute nodes' role to EC2.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from gpucluster.components._aws.buckets import private_bucket
from gpucluster.components._aws.launch_template import NodeWiring, checked_group
from gpucluster.components._aws.slurm_node_group import SlurmNodeGroup
from gpucluster.components.shared_storage import SharedStorage
from gpucluster.config.naming import CLUSTER_TAG, NODE_GROUP_TAG, NODE_NAME_TAG, with_name
from gpucluster.config.node_group import NodeGroupSpec
from gpucluster.config.slurm import UBUNTU_RELEASE, SlurmSpec
from gpucluster.facts.catalog import load_catalog
from gpucluster.facts.images import default_image_parameter
from gpucluster.render.core import gzip_b64, render_cloud_config
from gpucluster.render.node import LustreMount
from gpucluster.render.slurm import (
    AgentBundle,
    HeadInputs,
    LaunchTarget,
    SlurmContext,
    agent_bundle,
    agent_config,
    controller_address,
    dns_zone,
    head_cloud_config,
    head_hostname,
    head_title,
    munge_secret_name,
    sha256,
)

TOKEN = "gpucluster:index:SlurmCluster"
DATA_DEVICE = "/dev/sdf"
HEAD_TAG = "gpucluster:role"


@dataclass
class SlurmClusterArgs:
    """Inputs of :class:`SlurmCluster`."""

    cluster_name: str
    """Cluster name: Slurm ClusterName, prefix of resource names, value of the cluster tag. Required."""

    region: str
    """AWS region (for the boot helper's AWS calls). Required."""

    slurm: SlurmSpec
    """The resolved ``gpucluster:slurm`` section: head node, accounting, power saving, one entry per
    Slurm node group. Required."""

    node_groups: Sequence[NodeGroupSpec]
    """The resolved ``scheduler: slurm`` node groups, in config order. Required."""

    vpc_id: pulumi.Input[str]
    """The VPC, for the cluster's private DNS zone. Required."""

    head_subnet_id: pulumi.Input[str]
    """Private subnet of the head node, in ``slurm.headNode.availabilityZone``. Required."""

    node_group_subnet_ids: Mapping[str, Sequence[pulumi.Input[str]]]
    """Subnets per node group name (one for EFA groups). Required for every node group."""

    security_group_ids: Sequence[pulumi.Input[str]]
    """Security groups of the head node and the compute nodes: the cluster's EFA group (all traffic
    between members: slurmctld, slurmd, srun, EFA) and its node group (outbound). Required."""

    user_data: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """cloud-config per node group name, the Slurm part included
    (``GpuCluster.node_user_data(group, extra=node_slurm_part(...))``). Default: none."""

    shared_storage: Sequence[SharedStorage] = ()
    """File systems of the cluster; the head node mounts the Lustre one when
    ``slurm.headNode.mountSharedStorage``. Default: none."""

    tags: dict[str, str] = field(default_factory=dict)
    """Tags on every taggable child and the instances they launch. Default: none."""


def _assume_ec2() -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
        }
    )


def agent_policy(
    *,
    partition: str,
    region: str,
    account: str,
    cluster: str,
    launch_template_ids: Sequence[str],
    dynamic_groups: Sequence[str],
    node_role_arn: str,
) -> dict[str, Any]:
    """The node agent's IAM policy (the calls gpucluster_agents makes, and no more).

    The agent launches with one call, CreateFleet (type ``instant``), from a group's launch template
    with instance type, subnet and placement group overrides, tagging the instances (and only them)
    with the cluster, node group and launch token (gpucluster_agents.ec2.fleet_request). IAM
    authorizes that call on the fleet, on the launch template and on every resource the launch reads
    or creates; an instant fleet then launches under the caller's own RunInstances permission.

    - RunInstances only from the cluster's launch templates (``ec2:LaunchTemplate``: AWS's pattern for
      "launch only from this template"), and never with an AMI other than the template's
      (``ec2:IsLaunchTemplateResource`` false on the image is denied).
    - CreateFleet on ``fleet/*`` of this account and region and on the cluster's launch templates
      only; the instances it makes must carry the cluster's tag and a dynamic group's tag
      (``aws:RequestTag``); the other resources a launch touches (volumes, interfaces, subnets,
      security groups, the AMI, placement groups, reservations) are named by type, region and account.
    - CreateTags while launching (``ec2:CreateAction``), and afterwards only the node-name and Name tags
      on the cluster's instances.
    - TerminateInstances only on the cluster's instances of its *dynamic* node groups: never the head
      node, never a static group's (its Auto Scaling group owns them).
    - Describe calls (no resource-level permissions exist for them).
    - PassRole for the compute nodes' role, to EC2 only.
    """
    arn = f"arn:{partition}:ec2:{region}:{account}"
    instances = f"{arn}:instance/*"
    templates = [f"{arn}:launch-template/{lt}" for lt in launch_template_ids]
    image = f"arn:{partition}:ec2:{region}::image/*"
    statements: list[dict[str, Any]] = []
    if dynamic_groups:
        statements += [
            {
                # RunInstances touches many resource types (instance, volume, interface, subnet, …):
                # "*" with the template condition is AWS's documented way to pin all of them.
                "Sid": "LaunchOnlyFromTheClustersTemplates",
                "Effect": "Allow",
                "Action": "ec2:RunInstances",
                "Resource": "*",
                "Condition": {"ArnLike": {"ec2:LaunchTemplate": templates}},
            },
            {
                # The agent overrides instance type, subnet and placement group, never the AMI: an
                # image that does not come from the template is refused. A Bool on false matches only
                # when EC2 sets the key (launches from a template), so other calls are unaffected.
                "Sid": "NoOtherImageThanTheTemplates",
                "Effect": "Deny",
                "Action": "ec2:RunInstances",
                "Resource": image,
                "Condition": {"Bool": {"ec2:IsLaunchTemplateResource": "false"}},
            },
            {
                # The fleet record itself (the agent does not tag it) and the templates it may name:
                # a fleet from any other template fails on the template resource.
                "Sid": "InstantFleetsFromTheClustersTemplates",
                "Effect": "Allow",
                "Action": "ec2:CreateFleet",
                "Resource": [f"{arn}:fleet/*", *templates],
            },
            {
                # Every instance a fleet makes is tagged in the request as the cluster's, of a dynamic
                # group: what TerminateOnlyDynamicNodes later matches.
                "Sid": "InstantFleetInstancesAreTheClusters",
                "Effect": "Allow",
                "Action": "ec2:CreateFleet",
                "Resource": instances,
                "Condition": {
                    "StringEquals": {
                        f"aws:RequestTag/{CLUSTER_TAG}": cluster,
                        f"aws:RequestTag/{NODE_GROUP_TAG}": list(dynamic_groups),
                    }
                },
            },
            {
                # What a launch reads or creates besides the instance. None of these lets a fleet
                # launch: the fleet, template and instance statements above must also allow it.
                "Sid": "InstantFleetLaunchResources",
                "Effect": "Allow",
                "Action": "ec2:CreateFleet",
                "Resource": [
                    f"{arn}:{kind}/*"
                    for kind in (
                        "volume",
                        "network-interface",
                        "subnet",
                        "security-group",
                        "placement-group",
                        "capacity-reservation",
                        "key-pair",
                        "spot-instances-request",
                    )
                ]
                + [
                    image,
                    f"arn:{partition}:ec2:{region}::snapshot/*",
                    f"arn:{partition}:resource-groups:{region}:{account}:group/*",
                ],
            },
            {
                "Sid": "TagWhileLaunching",
                "Effect": "Allow",
                "Action": "ec2:CreateTags",
                "Resource": [instances, f"{arn}:volume/*", f"{arn}:network-interface/*"],
                "Condition": {"StringEquals": {"ec2:CreateAction": ["RunInstances", "CreateFleet"]}},
            },
        ]
    statements += [
        {
            "Sid": "NameTheClustersInstances",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": instances,
            "Condition": {
                "StringEquals": {f"ec2:ResourceTag/{CLUSTER_TAG}": cluster},
                "ForAllValues:StringEquals": {"aws:TagKeys": [NODE_NAME_TAG, "Name"]},
            },
        },
    ]
    if dynamic_groups:
        statements += [
            {
                "Sid": "TerminateOnlyDynamicNodes",
                "Effect": "Allow",
                "Action": "ec2:TerminateInstances",
                "Resource": instances,
                "Condition": {
                    "StringEquals": {
                        f"ec2:ResourceTag/{CLUSTER_TAG}": cluster,
                        f"ec2:ResourceTag/{NODE_GROUP_TAG}": list(dynamic_groups),
                    }
                },
            },
        ]
    statements.append(
        {
            "Sid": "Describe",
            "Effect": "Allow",
            "Action": ["ec2:DescribeInstances", "ec2:DescribeInstanceTopology"],
            "Resource": "*",
        }
    )
    if dynamic_groups:
        statements.append(
            {
                "Sid": "PassTheNodeRoleToEc2",
                "Effect": "Allow",
                "Action": "iam:PassRole",
                "Resource": node_role_arn,
                "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def head_policy(*, secret_arn: str, bundle_arn: str) -> dict[str, Any]:
    """The head node's own needs: make and read the munge key, fetch the agent package."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "MakeAndReadTheMungeKey",
                "Effect": "Allow",
                "Action": ["secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue", "secretsmanager:DescribeSecret"],
                "Resource": secret_arn,
            },
            {"Sid": "FetchTheAgentPackage", "Effect": "Allow", "Action": "s3:GetObject", "Resource": bundle_arn},
        ],
    }


def node_policy(*, secret_arn: str) -> dict[str, Any]:
    """Compute nodes read the munge key; nothing else (plus Session Manager)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "ReadTheMungeKey", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": secret_arn}
        ],
    }


def _json(policy: dict[str, Any]) -> str:
    return json.dumps(policy, indent=2)


class SlurmCluster(pulumi.ComponentResource):
    """A Slurm head node (slurmctld, optional slurmdbd, the node agent) and its compute node groups."""

    head_instance_id: pulumi.Output[str]
    head_private_ip: pulumi.Output[str]
    controller_address: str
    """``slurmctld.<cluster>.gpucluster.internal``: where compute nodes fetch their configuration."""
    munge_secret_arn: pulumi.Output[str]
    head_role_arn: pulumi.Output[str]
    node_role_arn: pulumi.Output[str]
    data_volume_id: pulumi.Output[str]
    node_groups: dict[str, SlurmNodeGroup]
    head_user_data: pulumi.Output[str]

    def __init__(self, name: str, args: SlurmClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        catalog = load_catalog()
        slurm = args.slurm
        ctx = SlurmContext(args.cluster_name, args.region, slurm, tuple(args.node_groups))
        cluster = args.cluster_name
        child = pulumi.ResourceOptions(parent=self)
        protect = bool(slurm.protect_data if slurm.protect_data is not None else True)
        keep = pulumi.ResourceOptions(parent=self, protect=protect, retain_on_delete=protect)
        tags = dict(args.tags)
        invoke = pulumi.InvokeOutputOptions(parent=self)
        partition = aws.get_partition_output(opts=invoke).partition
        account = aws.get_caller_identity_output(opts=invoke).account_id

        def managed(policy: str) -> pulumi.Output[str]:
            return partition.apply(lambda p: f"arn:{p}:iam::aws:policy/{policy}")

        # --- the munge key: an empty secret; the head node makes the key at its first boot ------------
        secret = aws.secretsmanager.Secret(
            f"{name}-munge-key",
            name=munge_secret_name(cluster),
            description=f"munge key of Slurm cluster {cluster}: made by its head node, read by every node",
            recovery_window_in_days=30 if protect else 0,
            tags=with_name(tags, f"{cluster}-munge-key"),
            opts=keep,
        )
        self.munge_secret_arn = secret.arn

        # --- the agent package, in a private bucket the head node reads -------------------------------
        bundle = agent_bundle()
        digest = sha256(bundle)
        bundle_key = f"agent/gpucluster_agents-{digest[:16]}.zip"
        bucket = private_bucket(
            f"{name}-artifacts",
            f"{name}-artifacts",
            bucket_prefix=f"{cluster}-slurm-",
            force_destroy=True,  # only build artifacts, rebuilt from this program
            tags=with_name(tags, f"{cluster}-slurm-artifacts"),
            bucket_opts=child,
            child_opts=child,
        )
        agent_object = aws.s3.BucketObjectv2(
            f"{name}-agent-package",
            bucket=bucket.id,
            key=bundle_key,
            content_base64=base64.b64encode(bundle).decode(),
            content_type="application/zip",
            tags=with_name(tags, f"{cluster}-agent"),
            opts=child,
        )

        # --- compute nodes: role (Session Manager, read the munge key), launch templates ---------------
        node_role = aws.iam.Role(
            f"{name}-node-role",
            assume_role_policy=_assume_ec2(),
            description=f"Slurm compute nodes of {cluster}",
            tags=with_name(tags, f"{cluster}-slurm-node"),
            opts=child,
        )
        aws.iam.RolePolicyAttachment(
            f"{name}-node-ssm", role=node_role.name, policy_arn=managed("AmazonSSMManagedInstanceCore"), opts=child
        )
        aws.iam.RolePolicy(
            f"{name}-node-munge",
            role=node_role.id,
            policy=secret.arn.apply(lambda a: _json(node_policy(secret_arn=a))),
            opts=child,
        )
        node_profile = aws.iam.InstanceProfile(
            f"{name}-node-profile", role=node_role.name, tags=with_name(tags, f"{cluster}-slurm-node"), opts=child
        )
        self.node_role_arn = node_role.arn
        self.node_groups = {}
        for g in args.node_groups:
            static = slurm.settings(g.name).mode == "static"
            self.node_groups[g.name] = SlurmNodeGroup(
                f"{name}-{g.name}",
                checked_group(g, catalog),
                NodeWiring(
                    cluster_name=cluster,
                    subnet_ids=list(args.node_group_subnet_ids[g.name]),
                    security_group_ids=list(args.security_group_ids),
                    user_data=args.user_data.get(g.name),
                    instance_profile_arn=node_profile.arn,
                    tags=tags,
                ),
                static=static,
                opts=child,
            )

        # --- the head node's identity: Session Manager, the agent's EC2 rights, its own needs -----------
        head_role = aws.iam.Role(
            f"{name}-head-role",
            assume_role_policy=_assume_ec2(),
            description=f"Slurm head node of {cluster}: slurmctld and the node agent",
            tags=with_name(tags, f"{cluster}-slurm-head"),
            opts=child,
        )
        aws.iam.RolePolicyAttachment(
            f"{name}-head-ssm", role=head_role.name, policy_arn=managed("AmazonSSMManagedInstanceCore"), opts=child
        )
        dynamic = [g.name for g in args.node_groups if slurm.settings(g.name).mode == "dynamic"]
        # The agent launches dynamic groups only (static ones belong to their Auto Scaling groups).
        lt_ids = pulumi.Output.all(*[self.node_groups[g].launch_template_id for g in dynamic])
        aws.iam.RolePolicy(
            f"{name}-agent",
            role=head_role.id,
            policy=pulumi.Output.all(partition, account, lt_ids, node_role.arn).apply(
                lambda v: _json(
                    agent_policy(
                        partition=v[0],
                        region=args.region,
                        account=v[1],
                        cluster=cluster,
                        launch_template_ids=v[2],
                        dynamic_groups=dynamic,
                        node_role_arn=v[3],
                    )
                )
            ),
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-head-access",
            role=head_role.id,
            policy=pulumi.Output.all(secret.arn, bucket.arn).apply(
                lambda v: _json(head_policy(secret_arn=v[0], bundle_arn=f"{v[1]}/{bundle_key}"))
            ),
            opts=child,
        )
        head_profile = aws.iam.InstanceProfile(
            f"{name}-head-profile", role=head_role.name, tags=with_name(tags, f"{cluster}-slurm-head"), opts=child
        )
        self.head_role_arn = head_role.arn

        # --- the head node: its own interface and data volume, then the instance ----------------------
        head = slurm.head_node
        zone = head.availability_zone
        head_tags = with_name({**tags, HEAD_TAG: "slurm-head"}, head_hostname(cluster))
        eni = aws.ec2.NetworkInterface(
            f"{name}-head-eni",
            subnet_id=args.head_subnet_id,
            security_groups=list(args.security_group_ids),
            description=f"Slurm head node of {cluster}: keeps its address across head node replacements",
            tags=head_tags,
            opts=child,
        )
        volume = aws.ebs.Volume(
            f"{name}-head-data",
            availability_zone=zone,
            size=head.data_volume_size_gib,
            type="gp3",
            iops=head.data_volume_iops,
            throughput=head.data_volume_throughput,
            encrypted=True,
            kms_key_id=head.kms_key_id,
            final_snapshot=protect,
            tags=with_name(tags, f"{cluster}-slurm-data"),
            opts=keep,
        )
        self.data_volume_id = volume.id
        if head.image_id:
            image: pulumi.Input[str] = head.image_id
        else:
            facts = catalog[head.instance_type]
            image = aws.ssm.get_parameter_output(name=default_image_parameter(facts, UBUNTU_RELEASE), opts=invoke).value

        targets = pulumi.Output.all(
            *[
                pulumi.Output.all(
                    ng.launch_template_id,
                    pulumi.Output.all(*args.node_group_subnet_ids[g]),
                    ng.placement_group_name if ng.placement_group_name is not None else None,
                )
                for g, ng in self.node_groups.items()
            ]
        )
        lustre = next((s for s in args.shared_storage if s.fs_type == "lustre"), None) if head.mount_shared_storage else None
        lustre_values = (
            pulumi.Output.all(lustre.server, lustre.mount_name, lustre.file_system_id)
            if lustre is not None
            else pulumi.Output.from_input([])
        )
        group_names = list(self.node_groups)

        def render(values: list[Any]) -> str:
            volume_id, bucket_name, resolved, mount = values
            launch = {
                n: LaunchTarget(str(t[0]), tuple(str(s) for s in t[1]), str(t[2]) if t[2] else None)
                for n, t in zip(group_names, resolved, strict=True)
            }
            mounted = None
            if lustre is not None and mount:
                mounted = LustreMount(
                    file_system=str(mount[2]),
                    dns_name=str(mount[0]),
                    mount_name=str(mount[1]),
                    mount_point=lustre.mount_point,
                    mount_options=lustre.mount_options,
                )
            inputs = HeadInputs(
                data_volume_id=str(volume_id),
                agent=AgentBundle(bucket=str(bucket_name), key=bundle_key, sha256=digest),
                agent_config=agent_config(ctx, catalog, launch),
                lustre=mounted,
            )
            return render_cloud_config(head_title(ctx), head_cloud_config(ctx, catalog, inputs), gzipped=True)

        self.head_user_data = pulumi.Output.all(volume.id, bucket.bucket, targets, lustre_values).apply(render)
        instance = aws.ec2.Instance(
            f"{name}-head",
            ami=image,
            instance_type=head.instance_type,
            iam_instance_profile=head_profile.name,
            network_interfaces=[aws.ec2.InstanceNetworkInterfaceArgs(device_index=0, network_interface_id=eni.id)],
            metadata_options=aws.ec2.InstanceMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1, instance_metadata_tags="disabled"
            ),
            root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
                volume_type="gp3",
                volume_size=head.root_volume_size_gib,
                encrypted=True,
                kms_key_id=head.kms_key_id,
                delete_on_termination=True,
            ),
            disable_api_termination=True,
            user_data_base64=self.head_user_data.apply(gzip_b64),
            tags=head_tags,
            volume_tags=head_tags,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[agent_object],
                # The interface and the data volume belong to one head node at a time; a new AMI in the
                # SSM parameter does not replace a running head node (replace it on purpose).
                delete_before_replace=True,
                ignore_changes=["ami"],
            ),
        )
        aws.ec2.VolumeAttachment(
            f"{name}-head-data",
            device_name=DATA_DEVICE,
            volume_id=volume.id,
            instance_id=instance.id,
            stop_instance_before_detaching=True,
            opts=child,
        )
        self.head_instance_id = instance.id
        self.head_private_ip = eni.private_ip

        # --- where compute nodes find slurmctld ----------------------------------------------------------
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
            records=[eni.private_ip],
            opts=child,
        )
        self.register_outputs(
            {
                "headInstanceId": self.head_instance_id,
                "headPrivateIp": self.head_private_ip,
                "controllerAddress": self.controller_address,
                "mungeSecretArn": self.munge_secret_arn,
                "headRoleArn": self.head_role_arn,
                "nodeRoleArn": self.node_role_arn,
                "dataVolumeId": self.data_volume_id,
                "nodeGroups": {n: ng.launch_template_id for n, ng in self.node_groups.items()},
            }
        )
