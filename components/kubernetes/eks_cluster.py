"""EksCluster: an Amazon EKS cluster for GPU training, and a Kubernetes provider for what runs on it.

The control plane has a private endpoint by default, envelope-encrypts Secrets with a KMS key that
rotates, and lets IAM principals in through access entries (API authentication mode). Managed add-ons
are pinned (vpc-cni at a version that handles EFA-only interfaces; it gets AWS credentials through EKS
Pod Identity, not the node role). A small system node group runs cluster services. Each
``scheduler: kubernetes`` node group becomes an EKS managed node group built on
:class:`~gpucluster.components.compute.gpu_node_group.GpuNodeGroup`'s launch template — every EFA interface, the placement
group, the capacity reservation or block — booting the EKS-optimized AL2023 AMI of its accelerator,
tainted ``nvidia.com/gpu=true:NoSchedule`` and labelled for Kueue.

This module holds the control plane and wires the rest; who may use the API is
:mod:`gpucluster.components.kubernetes._eks_access` (access entries only: no hidden admin for the cluster's creator), the
add-ons :mod:`gpucluster.components.kubernetes._eks_addons`, the node groups :mod:`gpucluster.components.kubernetes._eks_node_groups`.
"""

from typing import Required

import pulumi
import pulumi_kubernetes as k8s

from gpucluster.components._shared.build import adopt
from gpucluster.components._shared.config_types import KubernetesConfig, NodeGroupConfig
from gpucluster.components._shared.edge import Adapted, at_edge, required
from gpucluster.components.kubernetes._args import node_group_subnets, resolve_section
from gpucluster.components.kubernetes._eks_build import NODE_POLICIES, EksParts, EksWiring, build_eks_cluster, kubeconfig
from gpucluster.components.storage.shared_storage import SharedStorage, as_shared_storage
from gpucluster.config.errors import raise_for
from gpucluster.config.naming import cluster_tags
from gpucluster.facts.catalog import load_catalog
from gpucluster.resolve.kubernetes import ResolvedKubernetes

__all__ = ["NODE_POLICIES", "TOKEN", "EksCluster", "EksClusterArgs", "EksParts", "EksWiring", "build_eks_cluster", "kubeconfig"]

TOKEN = "gpucluster:index:EksCluster"
# Node role: join the cluster, pull images (and Session Manager, a policy of our own: no SSM parameter reads).
# The CNI permissions go to vpc-cni alone.


class EksClusterArgs(KubernetesConfig, total=False):
    """Inputs of :class:`EksCluster`: the ``gpucluster:kubernetes`` section (version, endpoint, access
    entries, add-ons, system nodes; validated, checked and resolved like the stack's) and its wiring."""

    cluster_name: Required[str]
    """Name of the EKS cluster (and prefix of its resources' names). Required."""

    region: Required[str]
    """AWS region, for the kubeconfig's ``aws eks get-token`` and the FSx CSI driver. Required."""

    cluster_subnet_ids: Required[pulumi.Input[list[pulumi.Input[str]]]]
    """Private subnets, in at least two Availability Zones, for the control plane's interfaces and the
    system node group. Required."""

    node_groups: list[NodeGroupConfig]
    """The GPU node groups to run as EKS managed node groups (``scheduler`` is ``kubernetes``), each
    validated and resolved like a stack's node group. Default: none."""

    node_group_subnet_ids: dict[str, pulumi.Input[list[pulumi.Input[str]]]]
    """Subnets per node group name (one zone for EFA groups). Default: the group's own ``subnetIds``;
    a group needs one or the other."""

    security_group_ids: pulumi.Input[list[pulumi.Input[str]]]
    """Security groups for the GPU nodes' interfaces (EFA and node groups); the cluster security group
    is added so nodes and the control plane talk. Default: none."""

    user_data: dict[str, pulumi.Input[str]]
    """cloud-config per node group name; wrapped with a nodeadm ``NodeConfig`` into MIME multi-part
    user data, which EKS merges with its own. Default: an empty cloud-config."""

    shared_storage: list[SharedStorage]
    """File systems of the cluster: a Lustre one adds the FSx CSI driver add-on. Default: none."""

    instance_store_for_pods: bool
    """Put instance-store NVMe disks under containerd and kubelet (nodeadm RAID 0) on nodes that have
    them. Default true; false when the disks are already used for scratch space."""

    protect_data: bool
    """Protect and retain the Secrets encryption key it creates (``pulumi destroy`` refuses; deleting
    the stack leaves it): a deleted key leaves every Secret of the cluster unreadable. Default true."""

    tags: dict[str, str]
    """Tags on every taggable child. Default: none."""


class EksCluster(pulumi.ComponentResource):
    """An EKS cluster with access entries, KMS-encrypted Secrets, pinned add-ons, system and GPU node groups."""

    cluster_name: pulumi.Output[str]
    """Name of the EKS cluster."""
    endpoint: pulumi.Output[str]
    """URL of the Kubernetes API server."""
    oidc_issuer: pulumi.Output[str]
    """OIDC issuer URL of the cluster (IRSA)."""
    cluster_security_group_id: pulumi.Output[str]
    """Security group EKS created for the control plane and nodes."""
    node_role_arn: pulumi.Output[str]
    """IAM role of every node (system and GPU)."""
    kubeconfig: pulumi.Output[str]
    """A kubeconfig that authenticates with ``aws eks get-token`` (no credentials in it)."""
    provider: k8s.Provider
    """Kubernetes provider for this cluster: hand it to GpuOperator, Kueue… through ``opts``."""
    # Python-only attributes (not schema outputs: the analyzer reads every class annotation as one) are
    # annotated where __init__'s builder sets them: gpu_node_groups, managed_node_groups.

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        with at_edge("EksCluster"):
            adapted = from_args(args)  # every error before any resource
        super().__init__(TOKEN, name, None, opts)
        adopt(self, build_eks_cluster(self, name, adapted.resolved, adapted.wiring))


def from_args(args: EksClusterArgs) -> Adapted[ResolvedKubernetes, EksWiring]:
    """``args`` validated, checked and resolved as the stack's Kubernetes section is; errors name ``args.<field>``."""
    region = args.get("region") or pulumi.Config("aws").get("region") or "us-east-1"
    raise_for(required(args, {"cluster_name": "clusterName", "cluster_subnet_ids": "clusterSubnetIds"}), "EksCluster args")
    lustre = any(s.fs_type == "lustre" for s in as_shared_storage(args.get("shared_storage", [])))
    resolved, inputs = resolve_section(
        "EksCluster",
        args,
        load_catalog(),
        args_type=EksClusterArgs,
        region=region,
        lustre=lustre,
        instance_store_for_pods=args.get("instance_store_for_pods", True),
    )
    wiring = EksWiring(
        region=region,
        cluster_subnet_ids=args["cluster_subnet_ids"],
        node_group_subnet_ids=node_group_subnets(resolved, inputs, args.get("node_group_subnet_ids", {})),
        security_group_ids=args.get("security_group_ids", []),
        user_data=args.get("user_data", {}),
        protect_data=args.get("protect_data", True),
        tags=cluster_tags(args["cluster_name"], args.get("tags", {})),
        inputs=inputs,
    )
    return Adapted(resolved, wiring)
