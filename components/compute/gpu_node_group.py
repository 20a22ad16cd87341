"""GpuNodeGroup: a group of identical GPU nodes in an Auto Scaling group — a launch template laid out
from the instance's network cards, a cluster placement group and the node IAM role.

The resources do not grow with the node count: 2 or 512 nodes are one launch template and one Auto
Scaling group. The launch template is the shared core in ``compute/_launch_template.py``; EKS managed node
groups and Slurm's node groups are their own thin variants over it, so this component has no mode flags.

Used on its own (not under GpuCluster), its nodes boot as a GpuCluster's plain group's do: without a ``userData``
of yours the launch template carries the node bootstrap (node facts, the NCCL/EFA environment, the EFA check, the
health thresholds) and the mount of the ``sharedStorage`` you pass (``[lustre.shared_storage]``):
``compute/_bootstrap.py``, docs/components.md.
"""

from typing import Required

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.config_types import NodeGroupConfig
from gpucluster.components._shared.edge import Adapted, at_edge, config_part, required, validate
from gpucluster.components._shared.inputs import Inputs
from gpucluster.components.compute._bootstrap import check_bootstrap, check_storage, node_bootstrap
from gpucluster.components.compute._launch_template import (
    ASG,
    TOKEN,
    NodeGroupResource,
    NodeWiring,
)
from gpucluster.components.storage.shared_storage import SharedStorage, as_shared_storage
from gpucluster.config.checks.cluster import validate_node_group
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.errors import ConfigError, error, raise_for
from gpucluster.config.naming import cluster_tags
from gpucluster.facts.catalog import load_catalog
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup, resolve_node_group

__all__ = ["TOKEN", "GpuNodeGroup", "GpuNodeGroupArgs"]

SOURCE = "GpuNodeGroup args"


class GpuNodeGroupArgs(NodeGroupConfig, total=False):
    """Inputs of :class:`GpuNodeGroup`: the node group's config (as in a stack's ``nodeGroups``) and its wiring.

    ``subnet_ids`` is required here (there is no network to pick subnets from); ``subnet_ids``,
    ``capacity.reservation_id``, ``capacity.resource_group_arn``, ``image_id`` and ``kms_key_id`` may be
    Outputs of other resources."""

    cluster_name: Required[str]
    """Cluster name: prefix of resource names and value of the cluster tag. Required."""
    security_group_ids: Required[pulumi.Input[list[pulumi.Input[str]]]]
    """Security groups for every interface (for EFA, one that allows all traffic within itself). Required."""
    shared_storage: list[SharedStorage]
    """File systems the nodes mount, in the shape storage components emit: ``[lustre.shared_storage]`` of a
    ``LustreStorage`` (one Lustre file system; its mount point and options obey the stack's rules, and the mount
    gets ``nosuid,nodev``). Default: none."""
    user_data: pulumi.Input[str]
    """cloud-init user data, plain text, in place of the node bootstrap; gzip-compressed and base64-encoded here
    (cloud-init unpacks it, so EC2's 16 KB limit applies to the compressed size). Default: the node bootstrap a
    GpuCluster's node gets (node facts, the NCCL/EFA environment and the EFA check, the health program's
    thresholds in ``/etc/gpucluster/health.json`` for NVIDIA GPUs, and the ``sharedStorage`` mounts). Give it only
    for nodes whose whole boot you write (e.g. ``SlurmCluster.compute_user_data[group]``); not with ``sharedStorage``."""
    instance_profile_arn: pulumi.Input[str]
    """Instance profile for the nodes. Default: a role with only SSM Session Manager access is created."""


class GpuNodeGroup(NodeGroupResource):
    """One group of identical GPU nodes, kept running by an Auto Scaling group."""

    # Outputs other languages get (the schema reads these annotations, re-declared here with their
    # descriptions). ``group`` and ``interfaces`` (the resolved group and its interface layout, which the
    # stack's Slurm and EKS code read) are annotated where ``NodeGroupResource._build`` assigns them.
    launch_template_id: pulumi.Output[str]
    """The launch template's id."""
    launch_template_version: pulumi.Output[int]
    """The launch template's latest (and default) version."""
    placement_group_name: pulumi.Output[str] | None
    """The cluster placement group the nodes launch into; absent when the group uses none."""
    auto_scaling_group_name: pulumi.Output[str] | None
    """The Auto Scaling group's name."""
    role_arn: pulumi.Output[str] | None
    """ARN of the node role created when no ``instanceProfileArn`` was given; absent otherwise."""
    role_name: pulumi.Output[str] | None
    """Name of that node role; absent when an instance profile was given."""
    instance_profile_arn: pulumi.Output[str] | None
    """The nodes' instance profile: ``instanceProfileArn`` as given, or the one created for the node role."""
    image_id: pulumi.Output[str] | None
    """The AMI the nodes boot: ``imageId`` as given, or the one the group's SSM image parameter names."""

    def __init__(self, name: str, args: GpuNodeGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        with at_edge("GpuNodeGroup"):
            adapted = from_args(args)  # every error before any resource
        super().__init__(TOKEN, name, None, opts)
        self._build(name, adapted.resolved, adapted.wiring, ASG, auto_scaling=True)


def from_args(args: GpuNodeGroupArgs) -> Adapted[ResolvedNodeGroup, NodeWiring]:
    """``args`` validated with the stack's model and checks and resolved as the stack resolves a group."""
    catalog = load_catalog()
    region = aws.config.region or "us-east-1"
    inputs = Inputs("GpuNodeGroup", region)
    findings = required(args, {"cluster_name": "clusterName", "security_group_ids": "securityGroupIds"})
    if not args.get("subnet_ids"):
        findings.append(error("args.subnetIds", "is required", "pass the subnets to launch in (one zone when EFA is on)"))
    try:
        spec: NodeGroupSpec = validate(
            NodeGroupSpec, inputs.prepare(config_part(args, GpuNodeGroupArgs, NodeGroupConfig), NodeGroupConfig), SOURCE
        )
    except ConfigError as exc:
        raise ConfigError([*findings, *exc.findings], SOURCE) from None
    storage = as_shared_storage(args.get("shared_storage", []))
    findings += check_storage(storage)
    if storage and args.get("user_data") is not None:
        findings.append(error("args.userData", "replaces the node bootstrap, so sharedStorage would not be mounted",
                              "pass sharedStorage or userData, not both (userData is the nodes' whole boot)"))  # fmt: skip
    raise_for([*findings, *validate_node_group(spec, catalog, path="args")], SOURCE)
    group = resolve_node_group(spec, catalog)
    user_data = args.get("user_data")
    if user_data is None:  # the node bootstrap, rendered with stand-ins first: any problem before any resource
        try:
            check_bootstrap(args["cluster_name"], group, storage, region)
        except ValueError as exc:
            raise_for([error("args", str(exc), "mount less, or shorten the group's ncclEnv values and labels")], SOURCE)
        user_data = node_bootstrap(args["cluster_name"], group, storage)
    wiring = NodeWiring(
        cluster_name=args["cluster_name"],
        subnet_ids=inputs.real_list(spec.subnet_ids),
        security_group_ids=args["security_group_ids"],
        user_data=user_data,
        instance_profile_arn=args.get("instance_profile_arn"),
        tags=cluster_tags(args["cluster_name"]),
        inputs=inputs,
    )
    return Adapted(group, wiring)
