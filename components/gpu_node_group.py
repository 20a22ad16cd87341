"""GpuNodeGroup: a launch template laid out from the instance's network cards, a cluster placement
group, the node IAM role, and (for static groups) an Auto Scaling group.

The resources do not grow with the node count: 2 or 512 nodes are one launch template and one Auto
Scaling group. EKS managed node groups and Slurm's on-demand nodes reuse the launch template
(``create_auto_scaling_group=False``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from gpucluster.config.checks.cluster import validate_node_group
from gpucluster.config.errors import errors_in
from gpucluster.config.naming import NODE_GROUP_TAG, with_name
from gpucluster.config.node_group import NodeGroupSpec
from gpucluster.facts.catalog import InstanceFacts, load_catalog
from gpucluster.facts.efa import InterfaceSlot, interface_layout
from gpucluster.render.core import b64, gzip_b64
from gpucluster.resolve.cluster import resolve_group

TOKEN = "gpucluster:index:GpuNodeGroup"
UBUNTU_ROOT_DEVICE = "/dev/sda1"


@dataclass
class GpuNodeGroupArgs:
    """Inputs of :class:`GpuNodeGroup`."""

    node_group: NodeGroupSpec
    """The node group: instance type, sizes, EFA, capacity. Validated (errors raise
    ``pulumi.InputPropertiesError``) and resolved here when it does not come from ``load_spec``."""

    cluster_name: str
    """Cluster name: prefix of resource names and value of the cluster tag."""

    subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    """Subnets to launch in (one zone when EFA is on). Required."""

    security_group_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    """Security groups for every interface (the EFA group and the node group). Required."""

    user_data: pulumi.Input[str] | None = None
    """cloud-init user data, plain text (gzip-compressed and base64-encoded here). Default: none."""

    gzip_user_data: bool = True
    """Compress the user data (cloud-init unpacks gzip'd user data, so EC2's 16 KB limit applies to
    the compressed size, as for the Slurm head node). Default true; false for EKS managed node groups,
    whose launch-template user data must stay MIME multi-part text: EKS merges its own nodeadm part
    into it and refuses anything else."""

    instance_profile_arn: pulumi.Input[str] | None = None
    """Instance profile for the nodes. Default: a role with only SSM Session Manager access is created."""

    create_auto_scaling_group: bool = True
    """Run the nodes in an Auto Scaling group (static nodes). Default true; false for EKS managed node
    groups and Slurm on-demand nodes, which launch from the template themselves."""

    root_device_name: str = UBUNTU_ROOT_DEVICE
    """Root device of the AMI (``/dev/sda1`` for Ubuntu AMIs, ``/dev/xvda`` for Amazon Linux). Default
    ``/dev/sda1``."""

    include_subnet_in_interfaces: bool = False
    """Put the subnet into each launch-template interface. Default false: EKS managed node groups reject
    templates with several interfaces that name subnets; the Auto Scaling group supplies them instead."""

    expose_tags_in_metadata: bool = False
    """Let nodes read their instance tags from IMDS (Slurm nodes learn their node name this way).
    Default false: tags stay out of reach of every process on the node, and EC2 refuses it for
    instances carrying tag keys with ``/`` (EKS adds ``kubernetes.io/cluster/…``)."""

    set_image_id: bool = True
    """Name the AMI in the launch template. Default true; false for EKS managed node groups that boot
    the EKS-optimized AMI of their ``amiType`` (EKS rejects a template naming an image then)."""

    set_instance_profile: bool = True
    """Give the launch template an instance profile (``instance_profile_arn``, or a new SSM-only role).
    Default true; false for EKS managed node groups, which take their node role themselves and reject
    a template with an instance profile."""

    tags: dict[str, str] = field(default_factory=dict)
    """Tags on every taggable child and on the instances, volumes and interfaces launched. Default: none."""


def network_interfaces(
    slots: Sequence[InterfaceSlot],
    security_group_ids: pulumi.Input[Sequence[pulumi.Input[str]]],
    associate_public_ip: bool,
    subnet_id: pulumi.Input[str] | None = None,
) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgs]:
    return [
        aws.ec2.LaunchTemplateNetworkInterfaceArgs(
            network_card_index=slot.network_card_index,
            device_index=slot.device_index,
            interface_type=slot.interface_type,
            security_groups=security_group_ids,
            delete_on_termination="true",
            associate_public_ip_address="true" if associate_public_ip and i == 0 else None,
            subnet_id=subnet_id,
            description=f"{slot.interface_type} card {slot.network_card_index} device {slot.device_index}",
        )
        for i, slot in enumerate(slots)
    ]


def capacity_options(
    group: NodeGroupSpec,
) -> tuple[
    aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs | None, aws.ec2.LaunchTemplateInstanceMarketOptionsArgs | None
]:
    cap = group.capacity
    reservation = None
    market = None
    if cap.reserved:
        reservation = aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
            capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                capacity_reservation_id=cap.reservation_id,
                capacity_reservation_resource_group_arn=cap.resource_group_arn,
            )
        )
    if cap.type == "capacity-block":
        market = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
    elif cap.type == "spot":
        market = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(
            market_type="spot",
            spot_options=aws.ec2.LaunchTemplateInstanceMarketOptionsSpotOptionsArgs(
                max_price=None if cap.spot_max_price is None else str(cap.spot_max_price),
                spot_instance_type="one-time",
                instance_interruption_behavior="terminate",
            ),
        )
    return reservation, market


class GpuNodeGroup(pulumi.ComponentResource):
    """One group of identical GPU nodes."""

    launch_template_id: pulumi.Output[str]
    launch_template_version: pulumi.Output[int]
    placement_group_name: pulumi.Output[str] | None
    auto_scaling_group_name: pulumi.Output[str] | None
    role_arn: pulumi.Output[str] | None
    role_name: pulumi.Output[str] | None
    instance_profile_arn: pulumi.Output[str] | None
    image_id: pulumi.Output[str] | None
    interfaces: tuple[InterfaceSlot, ...]
    facts: InstanceFacts

    def __init__(self, name: str, args: GpuNodeGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        catalog = load_catalog()
        group = args.node_group
        problems = errors_in(validate_node_group(group, catalog))
        if problems:
            raise pulumi.InputPropertiesError(
                f"node group {group.name!r} is invalid: " + "; ".join(f.render() for f in problems),
                [{"property_path": f.path, "reason": f"{f.message}. {f.fix}"} for f in problems],
            )
        group = resolve_group(group, catalog)  # a no-op for specs that come resolved from load_spec
        child = pulumi.ResourceOptions(parent=self)
        self.facts = catalog[group.instance_type]
        tags = {**args.tags, **group.tags, NODE_GROUP_TAG: group.name}
        prefix = f"{args.cluster_name}-{group.name}"
        self.interfaces = interface_layout(self.facts, bool(group.enable_efa_support), group.efa_layout)

        # Placement group: its own switch (resolved in the spec), never implied by EFA here.
        self.placement_group_name = None
        if group.create_placement_group:
            pg = aws.ec2.PlacementGroup(f"{name}-pg", strategy="cluster", tags=with_name(tags, prefix), opts=child)
            self.placement_group_name = pg.name
        elif group.placement_group_name:
            self.placement_group_name = pulumi.Output.from_input(group.placement_group_name)

        # Node identity: SSM Session Manager only, unless the caller brings a profile.
        self.role_arn = self.role_name = self.instance_profile_arn = None
        if args.set_instance_profile and args.instance_profile_arn is None:
            partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition
            role = aws.iam.Role(
                f"{name}-role",
                assume_role_policy=json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
                        ],
                    }
                ),
                description=f"GPU nodes of {prefix}",
                tags=with_name(tags, prefix),
                opts=child,
            )
            aws.iam.RolePolicyAttachment(
                f"{name}-ssm",
                role=role.name,
                policy_arn=partition.apply(lambda p: f"arn:{p}:iam::aws:policy/AmazonSSMManagedInstanceCore"),
                opts=child,
            )
            profile = aws.iam.InstanceProfile(f"{name}-profile", role=role.name, tags=with_name(tags, prefix), opts=child)
            self.role_arn, self.role_name = role.arn, role.name
            self.instance_profile_arn = profile.arn
        elif args.set_instance_profile and args.instance_profile_arn is not None:
            self.instance_profile_arn = pulumi.Output.from_input(args.instance_profile_arn)

        if not args.set_image_id:
            self.image_id = None
        elif group.image_id:
            self.image_id = pulumi.Output.from_input(group.image_id)
        else:
            assert group.image_ssm_parameter is not None
            self.image_id = aws.ssm.get_parameter_output(
                name=group.image_ssm_parameter, opts=pulumi.InvokeOutputOptions(parent=self)
            ).value

        reservation, market = capacity_options(group)
        first_subnet = pulumi.Output.from_input(args.subnet_ids).apply(lambda ids: ids[0])
        launch_template = aws.ec2.LaunchTemplate(
            f"{name}-lt",
            description=f"{prefix}: {group.instance_type}, {sum(s.is_efa for s in self.interfaces)} EFA interfaces",
            image_id=self.image_id,
            instance_type=group.instance_type,
            key_name=group.key_name,
            iam_instance_profile=aws.ec2.LaunchTemplateIamInstanceProfileArgs(arn=self.instance_profile_arn)
            if self.instance_profile_arn is not None
            else None,
            network_interfaces=network_interfaces(
                self.interfaces,
                args.security_group_ids,
                group.associate_public_ip_address,
                first_subnet if args.include_subnet_in_interfaces else None,
            ),
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",
                http_put_response_hop_limit=1,
                instance_metadata_tags="enabled" if args.expose_tags_in_metadata else "disabled",
            ),
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name=args.root_device_name,
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=group.root_volume_size_gib,
                        volume_type="gp3",
                        iops=group.root_volume_iops,
                        throughput=group.root_volume_throughput,
                        encrypted="true",
                        kms_key_id=group.kms_key_id,
                        delete_on_termination="true",
                    ),
                )
            ],
            placement=aws.ec2.LaunchTemplatePlacementArgs(group_name=self.placement_group_name)
            if self.placement_group_name is not None
            else None,
            capacity_reservation_specification=reservation,
            instance_market_options=market,
            user_data=pulumi.Output.from_input(args.user_data).apply(
                lambda text: (gzip_b64(text) if args.gzip_user_data else b64(text)) if text else None
            )
            if args.user_data is not None
            else None,
            update_default_version=True,
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=with_name(tags, prefix))
                for kind in ("instance", "volume", "network-interface")
            ],
            tags=with_name(tags, prefix),
            opts=child,
        )
        self.launch_template_id = launch_template.id
        self.launch_template_version = launch_template.latest_version

        self.auto_scaling_group_name = None
        if args.create_auto_scaling_group:
            asg = aws.autoscaling.Group(
                f"{name}-asg",
                min_size=group.min_size,
                max_size=group.max_size,
                desired_capacity=group.desired_size,
                vpc_zone_identifiers=args.subnet_ids,
                launch_template=aws.autoscaling.GroupLaunchTemplateArgs(
                    id=launch_template.id, version=launch_template.latest_version.apply(str)
                ),
                # GPU capacity can take long to arrive (or, for a capacity block, not before its start):
                # do not hold `pulumi up` waiting for instances.
                wait_for_capacity_timeout="0",
                # Keep training nodes where they are: no rebalancing across zones mid-job.
                suspended_processes=["AZRebalance"],
                tags=[
                    aws.autoscaling.GroupTagArgs(key=k, value=v, propagate_at_launch=False)
                    for k, v in sorted(with_name(tags, prefix).items())
                ],
                opts=child,
            )
            self.auto_scaling_group_name = asg.name

        self.register_outputs(
            {
                "launchTemplateId": self.launch_template_id,
                "launchTemplateVersion": self.launch_template_version,
                "placementGroupName": self.placement_group_name,
                "autoScalingGroupName": self.auto_scaling_group_name,
                "instanceProfileArn": self.instance_profile_arn,
                "imageId": self.image_id,
            }
        )
