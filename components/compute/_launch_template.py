"""The launch-template core every GPU node group variant shares: placement group, node identity and a
launch template laid out from the resolved group's network interfaces.

Three callers launch GPU nodes, each its own way: a plain Auto Scaling group (``GpuNodeGroup``), an EKS
managed node group, and Slurm's agent (on-demand groups) or an Auto Scaling group (static Slurm groups).
They differ in a handful of launch-template details, stated once per variant as a frozen
:class:`TemplateSettings`; everything else (interfaces, capacity, volumes, tags) is this one builder, so
an EFA layout or capacity fix reaches all three.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.inputs import Inputs
from gpucluster.components._shared.roles import ec2_ssm_role
from gpucluster.config.naming import NODE_GROUP_TAG, with_name
from gpucluster.facts.efa import InterfaceSlot
from gpucluster.render.core import b64, gzip_b64
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup

# Every variant registers as GpuNodeGroup: the stack's resources (and their URNs) stay what they were.
TOKEN = "gpucluster:index:GpuNodeGroup"
UBUNTU_ROOT_DEVICE = "/dev/sda1"
AL2023_ROOT_DEVICE = "/dev/xvda"


@dataclass(frozen=True)
class TemplateSettings:
    """How one variant's launch template differs from the others'."""

    gzip_user_data: bool
    """Compress the user data: cloud-init unpacks gzip, so EC2's 16 KB limit applies to the compressed
    size. EKS managed groups need MIME multi-part text instead (EKS merges its nodeadm part into it)."""
    expose_tags_in_metadata: bool
    """Let nodes read their tags from IMDS (Slurm nodes learn their node name so). Off elsewhere: EC2
    refuses it for tag keys with ``/`` (EKS adds ``kubernetes.io/cluster/…``)."""
    name_image: bool
    """Name the AMI. EKS managed groups boot the AMI of their ``amiType`` and reject a template naming one."""
    instance_profile: bool
    """Give the template an instance profile (the one brought, or a new SSM-only role). EKS managed
    groups take their node role themselves and reject a template with a profile."""
    root_device_name: str
    """The AMI's root device: ``/dev/sda1`` (Ubuntu), ``/dev/xvda`` (Amazon Linux)."""


ASG = TemplateSettings(True, False, True, True, UBUNTU_ROOT_DEVICE)
SLURM = TemplateSettings(True, True, True, True, UBUNTU_ROOT_DEVICE)
EKS_MANAGED = TemplateSettings(False, False, False, False, AL2023_ROOT_DEVICE)


@dataclass(frozen=True)
class NodeWiring:
    """What a node group takes from other resources; any of it may be an Output."""

    cluster_name: str
    subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    security_group_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    user_data: pulumi.Input[str] | None = None
    instance_profile_arn: pulumi.Input[str] | None = None
    tags: dict[str, str] = field(default_factory=dict)
    """Tags on every child and every instance, volume and interface, under the group's own."""
    inputs: Inputs = field(default_factory=lambda: Inputs("GpuNodeGroup"))
    """Maps the stand-ins in the resolved spec back to the Outputs they replaced (none in the stack)."""
    image_id: pulumi.Input[str] | None = None
    """The AMI the template names instead of the group's own (a Slurm group's baked image, ``components/images``)."""


@dataclass(frozen=True)
class NodeTemplate:
    """What the core built."""

    launch_template: aws.ec2.LaunchTemplate
    placement_group_name: pulumi.Output[str] | None
    role: aws.iam.Role | None
    instance_profile_arn: pulumi.Output[str] | None
    image_id: pulumi.Output[str] | None
    tags: dict[str, str]
    prefix: str


def group_tags(group: ResolvedNodeGroup, wiring: NodeWiring) -> dict[str, str]:
    return {**wiring.tags, **group.spec.tags, NODE_GROUP_TAG: group.name}


def network_interfaces(
    slots: Sequence[InterfaceSlot], security_group_ids: pulumi.Input[Sequence[pulumi.Input[str]]], associate_public_ip: bool
) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgs]:
    """One interface per slot, no subnet: the Auto Scaling group, EKS or the agent supplies it (EKS
    rejects templates with several interfaces that name subnets)."""
    return [
        aws.ec2.LaunchTemplateNetworkInterfaceArgs(
            network_card_index=slot.network_card_index,
            device_index=slot.device_index,
            interface_type=slot.interface_type,
            security_groups=security_group_ids,
            delete_on_termination="true",
            associate_public_ip_address="true" if associate_public_ip and i == 0 else None,
            description=f"{slot.interface_type} card {slot.network_card_index} device {slot.device_index}",
        )
        for i, slot in enumerate(slots)
    ]


def capacity_options(
    group: ResolvedNodeGroup, inputs: Inputs
) -> tuple[
    aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs | None, aws.ec2.LaunchTemplateInstanceMarketOptionsArgs | None
]:
    cap = group.spec.capacity
    reservation = None
    market = None
    if cap.reserved:
        reservation = aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
            capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                capacity_reservation_id=inputs.real_optional(cap.reservation_id),
                capacity_reservation_resource_group_arn=inputs.real_optional(cap.resource_group_arn),
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


def _ssm_only_profile(
    parent: pulumi.Resource, name: str, prefix: str, tags: dict[str, str]
) -> tuple[aws.iam.Role, pulumi.Output[str]]:
    """A node role with SSM Session Manager access only, and its instance profile."""
    child = pulumi.ResourceOptions(parent=parent)
    role = ec2_ssm_role(name, description=f"GPU nodes of {prefix}", tags=with_name(tags, prefix), opts=child)
    profile = aws.iam.InstanceProfile(f"{name}-profile", role=role.name, tags=with_name(tags, prefix), opts=child)
    return role, profile.arn


def build_node_template(
    parent: pulumi.Resource, name: str, group: ResolvedNodeGroup, wiring: NodeWiring, settings: TemplateSettings
) -> NodeTemplate:
    """Placement group, node identity and launch template of ``group``, children of ``parent``."""
    spec, real = group.spec, wiring.inputs
    child = pulumi.ResourceOptions(parent=parent)
    tags = group_tags(group, wiring)
    prefix = f"{wiring.cluster_name}-{group.name}"

    # Placement group: its own switch (resolved), never implied by EFA here.
    placement: pulumi.Output[str] | None = None
    if group.create_placement_group:
        placement = aws.ec2.PlacementGroup(f"{name}-pg", strategy="cluster", tags=with_name(tags, prefix), opts=child).name
    elif spec.placement_group_name:
        placement = pulumi.Output.from_input(spec.placement_group_name)

    role: aws.iam.Role | None = None
    profile_arn: pulumi.Output[str] | None = None
    if settings.instance_profile and wiring.instance_profile_arn is None:
        role, profile_arn = _ssm_only_profile(parent, name, prefix, tags)
    elif settings.instance_profile and wiring.instance_profile_arn is not None:
        profile_arn = pulumi.Output.from_input(wiring.instance_profile_arn)

    image_id: pulumi.Output[str] | None = None
    if settings.name_image and wiring.image_id is not None:
        image_id = pulumi.Output.from_input(wiring.image_id)
    elif settings.name_image:
        image_id = base_image(parent, group, real)

    reservation, market = capacity_options(group, real)
    gzip = settings.gzip_user_data
    launch_template = aws.ec2.LaunchTemplate(
        f"{name}-lt",
        description=f"{prefix}: {spec.instance_type}, {sum(s.is_efa for s in group.interfaces)} EFA interfaces",
        image_id=image_id,
        instance_type=spec.instance_type,
        key_name=spec.key_name,
        iam_instance_profile=aws.ec2.LaunchTemplateIamInstanceProfileArgs(arn=profile_arn) if profile_arn is not None else None,
        network_interfaces=network_interfaces(group.interfaces, wiring.security_group_ids, spec.associate_public_ip_address),
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
            http_endpoint="enabled",
            http_tokens="required",
            http_put_response_hop_limit=1,
            instance_metadata_tags="enabled" if settings.expose_tags_in_metadata else "disabled",
        ),
        block_device_mappings=[
            aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name=settings.root_device_name,
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=spec.root_volume_size_gib,
                    volume_type="gp3",
                    iops=spec.root_volume_iops,
                    throughput=spec.root_volume_throughput,
                    encrypted="true",
                    kms_key_id=real.real_optional(spec.kms_key_id),
                    delete_on_termination="true",
                ),
            )
        ],
        placement=aws.ec2.LaunchTemplatePlacementArgs(group_name=placement) if placement is not None else None,
        capacity_reservation_specification=reservation,
        instance_market_options=market,
        user_data=pulumi.Output.from_input(wiring.user_data).apply(
            lambda text: (gzip_b64(text) if gzip else b64(text)) if text else None
        )
        if wiring.user_data is not None
        else None,
        update_default_version=True,
        tag_specifications=[
            aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=with_name(tags, prefix))
            for kind in ("instance", "volume", "network-interface")
        ],
        tags=with_name(tags, prefix),
        opts=child,
    )
    return NodeTemplate(launch_template, placement, role, profile_arn, image_id, tags, prefix)


def base_image(parent: pulumi.Resource, group: ResolvedNodeGroup, real: Inputs) -> pulumi.Output[str]:
    """The group's own AMI: ``imageId`` or its lock as given, else what the SSM parameter names at deploy time."""
    if group.image.source == "ami":
        return pulumi.Output.from_input(real.real(group.image.value))
    return aws.ssm.get_parameter_output(name=group.image.value, opts=pulumi.InvokeOutputOptions(parent=parent)).value


def build_auto_scaling_group(
    parent: pulumi.Resource, name: str, group: ResolvedNodeGroup, wiring: NodeWiring, template: NodeTemplate
) -> aws.autoscaling.Group:
    """The Auto Scaling group that keeps ``group``'s static nodes running from ``template``."""
    spec = group.spec
    return aws.autoscaling.Group(
        f"{name}-asg",
        min_size=spec.min_size,
        max_size=spec.max_size,
        desired_capacity=group.desired_size,
        vpc_zone_identifiers=wiring.subnet_ids,
        launch_template=aws.autoscaling.GroupLaunchTemplateArgs(
            id=template.launch_template.id, version=template.launch_template.latest_version.apply(str)
        ),
        # GPU capacity can take long to arrive (or, for a capacity block, not before its start):
        # do not hold `pulumi up` waiting for instances.
        wait_for_capacity_timeout="0",
        # Keep training nodes where they are: no rebalancing across zones mid-job.
        suspended_processes=["AZRebalance"],
        tags=[
            aws.autoscaling.GroupTagArgs(key=k, value=v, propagate_at_launch=False)
            for k, v in sorted(with_name(template.tags, template.prefix).items())
        ],
        opts=pulumi.ResourceOptions(parent=parent),
    )


@dataclass(frozen=True)
class NodeGroupParts:
    """What :func:`build_node_group` made: the launch template and what it names."""

    group: ResolvedNodeGroup
    """The resolved group the template was laid out from."""
    interfaces: tuple[InterfaceSlot, ...]
    """The template's network interfaces, one slot per card/device index."""
    launch_template_id: pulumi.Output[str]
    launch_template_version: pulumi.Output[int]
    placement_group_name: pulumi.Output[str] | None
    auto_scaling_group_name: pulumi.Output[str] | None
    role_arn: pulumi.Output[str] | None
    role_name: pulumi.Output[str] | None
    instance_profile_arn: pulumi.Output[str] | None
    image_id: pulumi.Output[str] | None


def build_node_group(
    parent: pulumi.ComponentResource,
    name: str,
    group: ResolvedNodeGroup,
    wiring: NodeWiring,
    settings: TemplateSettings,
    *,
    auto_scaling: bool,
) -> NodeGroupParts:
    """``group``'s launch template (and Auto Scaling group), children of ``parent``; registers ``parent``'s outputs."""
    template = build_node_template(parent, name, group, wiring, settings)
    asg = build_auto_scaling_group(parent, name, group, wiring, template).name if auto_scaling else None
    parts = NodeGroupParts(
        group=group,
        interfaces=group.interfaces,
        launch_template_id=template.launch_template.id,
        launch_template_version=template.launch_template.latest_version,
        placement_group_name=template.placement_group_name,
        auto_scaling_group_name=asg,
        role_arn=template.role.arn if template.role is not None else None,
        role_name=template.role.name if template.role is not None else None,
        instance_profile_arn=template.instance_profile_arn,
        image_id=template.image_id,
    )
    parent.register_outputs(
        {
            "launchTemplateId": parts.launch_template_id,
            "launchTemplateVersion": parts.launch_template_version,
            "placementGroupName": parts.placement_group_name,
            "autoScalingGroupName": parts.auto_scaling_group_name,
            "instanceProfileArn": parts.instance_profile_arn,
            "imageId": parts.image_id,
        }
    )
    return parts


class NodeGroupResource(pulumi.ComponentResource):
    """What every variant exposes: the launch template and what it names. Registers as GpuNodeGroup."""

    launch_template_id: pulumi.Output[str]
    launch_template_version: pulumi.Output[int]
    placement_group_name: pulumi.Output[str] | None
    auto_scaling_group_name: pulumi.Output[str] | None
    role_arn: pulumi.Output[str] | None
    role_name: pulumi.Output[str] | None
    instance_profile_arn: pulumi.Output[str] | None
    image_id: pulumi.Output[str] | None

    def _build(
        self, name: str, group: ResolvedNodeGroup, wiring: NodeWiring, settings: TemplateSettings, *, auto_scaling: bool
    ) -> None:
        parts = build_node_group(self, name, group, wiring, settings, auto_scaling=auto_scaling)
        # Not class annotations: the schema analyzer would take them for outputs of the public GpuNodeGroup.
        self.group: ResolvedNodeGroup = parts.group
        """The resolved group the template was laid out from."""
        self.interfaces: tuple[InterfaceSlot, ...] = parts.interfaces
        """The template's network interfaces, one slot per card/device index."""
        self.launch_template_id = parts.launch_template_id
        self.launch_template_version = parts.launch_template_version
        self.placement_group_name = parts.placement_group_name
        self.auto_scaling_group_name = parts.auto_scaling_group_name
        self.role_arn, self.role_name = parts.role_arn, parts.role_name
        self.instance_profile_arn, self.image_id = parts.instance_profile_arn, parts.image_id
