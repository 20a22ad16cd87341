"""The EKS managed node groups of :class:`~gpucluster.components.kubernetes.eks_cluster.EksCluster`: the small
system node group for cluster services, and one per ``scheduler: kubernetes`` GPU node group, built on
the shared launch-template core (`compute/_launch_template.py`: every EFA interface,
the placement group, the capacity reservation or block) with the EKS-optimized AL2023 AMI of its
accelerator, tainted and labelled for Kueue.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

from gpucluster.components.compute._launch_template import (
    AL2023_ROOT_DEVICE,
    EKS_MANAGED,
    TOKEN,
    NodeGroupResource,
    NodeWiring,
)
from gpucluster.config.naming import NODE_GROUP_TAG, with_name
from gpucluster.render.kubernetes import node_config, node_labels, node_taints, nodeadm_user_data
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup
from gpucluster.resolve.kubernetes import ResolvedEksNodeGroup, ResolvedSystemNodeGroup


class EksNodeTemplate(NodeGroupResource):
    """The launch-template core as EKS managed node groups need it: MIME multi-part user data (EKS
    merges its nodeadm part into it and refuses gzip), no AMI (the group's ``amiType`` picks it) and no
    instance profile (EKS gives the node role) — EKS rejects a template with either. EKS runs the nodes."""

    def __init__(
        self, name: str, group: ResolvedNodeGroup, wiring: NodeWiring, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        """``group``: the resolved group its template is laid out from; ``wiring``: the subnets, security groups
        and user data it takes from the EKS cluster."""
        super().__init__(TOKEN, name, None, opts)
        self._build(name, group, wiring, EKS_MANAGED, auto_scaling=False)


def system_node_group(
    parent: pulumi.Resource,
    name: str,
    system: ResolvedSystemNodeGroup,
    cluster: aws.eks.Cluster,
    node_role: aws.iam.Role,
    cluster_name: str,
    subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]],
    tags: dict[str, str],
    deps: Sequence[pulumi.Resource],
) -> aws.eks.NodeGroup:
    """The system node group: on-demand, IMDSv2 with hop limit 1, an encrypted gp3 root volume."""
    group_tags = {**tags, NODE_GROUP_TAG: "system"}
    template = aws.ec2.LaunchTemplate(
        f"{name}-system-lt",
        description=f"{cluster_name}: EKS system nodes",
        instance_type=system.instance_type,
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
            http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1
        ),
        block_device_mappings=[
            aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name=AL2023_ROOT_DEVICE,
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=system.disk_size_gib,
                    volume_type="gp3",
                    iops=3000,
                    throughput=125,
                    encrypted="true",
                    delete_on_termination="true",
                ),
            )
        ],
        update_default_version=True,
        tag_specifications=[
            aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=with_name(group_tags, f"{cluster_name}-system"))
            for kind in ("instance", "volume")
        ],
        tags=with_name(group_tags, f"{cluster_name}-system"),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return aws.eks.NodeGroup(
        f"{name}-system",
        cluster_name=cluster.name,
        node_group_name=f"{cluster_name}-system",
        node_role_arn=node_role.arn,
        subnet_ids=subnet_ids,
        ami_type=system.ami_type,
        capacity_type="ON_DEMAND",
        launch_template=aws.eks.NodeGroupLaunchTemplateArgs(id=template.id, version=template.latest_version.apply(str)),
        scaling_config=aws.eks.NodeGroupScalingConfigArgs(
            min_size=system.min_size, max_size=system.max_size, desired_size=system.desired_size
        ),
        update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
        labels={"gpucluster/node-group": "system"},
        tags=with_name(group_tags, f"{cluster_name}-system"),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(deps)),
    )


def gpu_node_group(
    parent: pulumi.Resource,
    name: str,
    resolved: ResolvedEksNodeGroup,
    cluster: aws.eks.Cluster,
    node_role: aws.iam.Role,
    *,
    cluster_name: str,
    subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]],
    security_group_ids: pulumi.Input[Sequence[pulumi.Input[str]]],
    user_data: pulumi.Input[str],
    instance_store_for_pods: bool,
    tags: dict[str, str],
    deps: Sequence[pulumi.Resource],
    repair: dict[str, Any] | None = None,
    boot_gate: bool = False,
    max_unavailable_percentage: int = 10,
) -> tuple[EksNodeTemplate, aws.eks.NodeGroup]:
    """A GPU node group: its :class:`EksNodeTemplate` (launch template, placement group) and the EKS
    managed node group on that template. ``user_data`` is the group's cloud-config, wrapped into
    MIME multi-part nodeadm user data here. ``repair``: EKS node auto repair
    (:func:`gpucluster.render.kubernetes.health.node_repair_config`), None for none. ``boot_gate``: GPU nodes
    register with the boot taint, which the health sweep's first (``boot``) run takes off. A new image rolls with
    EKS's ``MINIMAL`` strategy (terminate, then launch: a capacity block or reservation has no spare instance for the
    default launch-first) and ``max_unavailable_percentage`` (``kubernetes.gpuNodeUpdate``) of the nodes at once."""
    group, facts = resolved.group, resolved.facts
    config = node_config(facts, instance_store_for_pods, boot_gate)
    node_user_data = pulumi.Output.from_input(user_data).apply(lambda text: nodeadm_user_data(text, config))
    subnets = list(subnet_ids) if isinstance(subnet_ids, (list, tuple)) else subnet_ids
    ng = EksNodeTemplate(
        f"{name}-{group.name}",
        resolved.template,
        NodeWiring(
            cluster_name=cluster_name,
            subnet_ids=subnets,
            security_group_ids=security_group_ids,
            user_data=node_user_data,
            tags=tags,
        ),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    managed = aws.eks.NodeGroup(
        f"{name}-{group.name}-mng",
        cluster_name=cluster.name,
        node_group_name=f"{cluster_name}-{group.name}",
        node_role_arn=node_role.arn,
        subnet_ids=subnets,
        ami_type=resolved.ami_type,
        capacity_type=resolved.capacity_type,
        launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
            id=ng.launch_template_id, version=ng.launch_template_version.apply(str)
        ),
        scaling_config=aws.eks.NodeGroupScalingConfigArgs(
            min_size=group.min_size, max_size=group.max_size, desired_size=resolved.desired_size
        ),
        update_config=aws.eks.NodeGroupUpdateConfigArgs(
            update_strategy="MINIMAL", max_unavailable_percentage=max_unavailable_percentage
        ),
        node_repair_config=aws.eks.NodeGroupNodeRepairConfigArgs(**repair) if repair else None,
        labels=node_labels(resolved.node),
        taints=[aws.eks.NodeGroupTaintArgs(key=t["key"], value=t["value"], effect="NO_SCHEDULE") for t in node_taints(facts)],
        tags=with_name({**tags, **group.tags, NODE_GROUP_TAG: group.name}, f"{cluster_name}-{group.name}"),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(deps)),
    )
    return ng, managed
