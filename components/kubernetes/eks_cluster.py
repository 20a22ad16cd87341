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

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Required

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from gpucluster.components._shared.config_types import KubernetesConfig, NodeGroupConfig
from gpucluster.components._shared.inputs import Inputs
from gpucluster.components._shared.roles import session_manager_access
from gpucluster.components.kubernetes._args import as_list, node_group_subnets, resolve_args, with_id
from gpucluster.components.kubernetes._eks_access import BOOTSTRAP_ADMIN, access_config, access_entries
from gpucluster.components.kubernetes._eks_addons import BEFORE_NODES, addon, cni_identity
from gpucluster.components.kubernetes._eks_hybrid import HybridNodes, hybrid_nodes, remote_network_config
from gpucluster.components.kubernetes._eks_node_groups import EksNodeTemplate, gpu_node_group, system_node_group
from gpucluster.components.storage.shared_storage import SharedStorage, as_shared_storage
from gpucluster.config.hybrid import HybridSpec
from gpucluster.config.kubernetes import FSX_CSI_ADDON
from gpucluster.config.naming import with_name
from gpucluster.facts.catalog import Catalog, load_catalog
from gpucluster.render.iam import assume_role_policy
from gpucluster.render.kubernetes import fsx_csi_addon_configuration, vpc_cni_addon_configuration
from gpucluster.render.kubernetes_health import node_repair_config
from gpucluster.resolve.kubernetes import ResolvedKubernetes

TOKEN = "gpucluster:index:EksCluster"
# Node role: join the cluster, pull images (and Session Manager, a policy of our own: no SSM parameter reads).
# The CNI permissions go to vpc-cni alone.
NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly")


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


@dataclass(frozen=True)
class EksWiring:
    """What :class:`EksCluster` connects to, with defaults applied (shared by the stack and Args paths)."""

    region: str
    cluster_subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    node_group_subnet_ids: Mapping[str, pulumi.Input[Sequence[pulumi.Input[str]]]]
    security_group_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    user_data: Mapping[str, pulumi.Input[str]]
    protect_data: bool
    tags: dict[str, str]


def kubeconfig(cluster_name: str, endpoint: str, ca_data: str, region: str) -> str:
    """A kubeconfig that authenticates with ``aws eks get-token`` (no credentials in it)."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
            "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
            "current-context": cluster_name,
            "users": [
                {
                    "name": cluster_name,
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": "aws",
                            "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", region, "--output", "json"],
                        }
                    },
                }
            ],
        },
        indent=2,
    )


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

    def __init__(
        self,
        name: str,
        args: EksClusterArgs,
        opts: pulumi.ResourceOptions | None = None,
        *,
        _resolved: ResolvedKubernetes | None = None,
        _catalog: Catalog | None = None,
        _hybrid: HybridSpec | None = None,
    ) -> None:
        """``_resolved``: GpuCluster's path, the stack's own resolved section (``args``' config fields
        are then not read); otherwise ``args`` is validated, checked and resolved here, before any resource.
        ``_hybrid``: the stack's hybrid section; with ``kubernetes`` set, the site's servers join as EKS Hybrid Nodes."""
        region = args["region"]
        catalog = _catalog or load_catalog()
        if _resolved is None:
            lustre = any(s.fs_type == "lustre" for s in as_shared_storage(args.get("shared_storage", [])))
            resolved, inputs = resolve_args(
                "EksCluster",
                args,
                catalog,
                region=region,
                lustre=lustre,
                instance_store_for_pods=args.get("instance_store_for_pods", True),
            )
        else:
            resolved, inputs = _resolved, Inputs("EksCluster", region)
        wiring = EksWiring(
            region=region,
            cluster_subnet_ids=args["cluster_subnet_ids"],
            node_group_subnet_ids=node_group_subnets(resolved, inputs, args.get("node_group_subnet_ids", {})),
            security_group_ids=args.get("security_group_ids", []),
            user_data=args.get("user_data", {}),
            protect_data=args.get("protect_data", True),
            tags=dict(args.get("tags", {})),
        )
        super().__init__(TOKEN, name, None, opts)
        self._build(name, resolved, wiring, inputs, catalog, _hybrid if _hybrid and _hybrid.kubernetes else None)

    def _build(
        self,
        name: str,
        resolved: ResolvedKubernetes,
        wiring: EksWiring,
        inputs: Inputs,
        catalog: Catalog,
        hybrid: HybridSpec | None,
    ) -> None:
        spec = resolved.spec
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(wiring.tags)
        prefix = resolved.cluster_name
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition

        def managed_policy(policy: str) -> pulumi.Output[str]:
            return partition.apply(lambda p: f"arn:{p}:iam::aws:policy/{policy}")

        # Secrets are always envelope-encrypted: with the caller's key, or a new one that rotates.
        if spec.secrets_kms_key_arn:
            key_arn: pulumi.Input[str] = inputs.real(spec.secrets_kms_key_arn)
        else:
            key = aws.kms.Key(
                f"{name}-secrets",
                description=f"EKS Secrets envelope encryption for {prefix}",
                enable_key_rotation=True,
                deletion_window_in_days=30,
                tags=with_name(tags, f"{prefix}-eks-secrets"),
                opts=pulumi.ResourceOptions(parent=self, protect=wiring.protect_data, retain_on_delete=wiring.protect_data),
            )
            aws.kms.Alias(f"{name}-secrets", name=f"alias/{prefix}-eks-secrets", target_key_id=key.key_id, opts=child)
            key_arn = key.arn

        cluster_role = aws.iam.Role(
            f"{name}-cluster-role",
            assume_role_policy=assume_role_policy("eks.amazonaws.com", "sts:AssumeRole", "sts:TagSession"),
            description=f"EKS control plane of {prefix}",
            tags=with_name(tags, f"{prefix}-eks-cluster"),
            opts=child,
        )
        cluster_policy = aws.iam.RolePolicyAttachment(
            f"{name}-cluster-policy", role=cluster_role.name, policy_arn=managed_policy("AmazonEKSClusterPolicy"), opts=child
        )
        endpoint = spec.endpoint
        cluster = aws.eks.Cluster(
            f"{name}-eks",
            name=prefix,
            version=spec.version,
            role_arn=cluster_role.arn,
            vpc_config=aws.eks.ClusterVpcConfigArgs(
                subnet_ids=as_list(wiring.cluster_subnet_ids),
                endpoint_private_access=endpoint.private_access,
                endpoint_public_access=endpoint.public_access,
                public_access_cidrs=(list(endpoint.public_access_cidrs) or None) if endpoint.public_access else None,
            ),
            access_config=access_config(),
            encryption_config=aws.eks.ClusterEncryptionConfigArgs(
                provider=aws.eks.ClusterEncryptionConfigProviderArgs(key_arn=key_arn), resources=["secrets"]
            ),
            enabled_cluster_log_types=list(spec.enabled_log_types),
            # Add-ons are installed below, as managed add-ons at pinned versions, not EKS's unmanaged ones.
            bootstrap_self_managed_addons=False,
            remote_network_config=remote_network_config(hybrid),
            tags=with_name(tags, prefix),
            # A cluster made with the creator's hidden admin keeps it: changing the flag would replace the cluster.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster_policy], ignore_changes=[BOOTSTRAP_ADMIN]),
        )
        self.cluster_name = cluster.name
        self.endpoint = cluster.endpoint
        self.oidc_issuer = cluster.identities.apply(lambda ids: next((o.issuer or "" for i in ids for o in (i.oidcs or [])), ""))
        self.cluster_security_group_id = cluster.vpc_config.apply(lambda v: v.cluster_security_group_id or "")

        access_entries(self, name, resolved, inputs, cluster, partition, tags)
        self.hybrid_nodes: HybridNodes | None = None
        """The hybrid node role, its access entry and Roles Anywhere profile, and the files each site node installs."""
        if hybrid is not None:
            self.hybrid_nodes = hybrid_nodes(
                self,
                name,
                hybrid,
                prefix=prefix,
                cluster=cluster,
                cluster_security_group_id=self.cluster_security_group_id,
                managed_policy=managed_policy,
                region=wiring.region,
                kubernetes_version=spec.version,
                tags=tags,
            )

        node_role = aws.iam.Role(
            f"{name}-node-role",
            assume_role_policy=assume_role_policy("ec2.amazonaws.com", "sts:AssumeRole"),
            description=f"EKS nodes of {prefix}",
            tags=with_name(tags, f"{prefix}-eks-node"),
            opts=child,
        )
        node_policies: list[pulumi.Resource] = [
            aws.iam.RolePolicyAttachment(f"{name}-node-{p}", role=node_role.name, policy_arn=managed_policy(p), opts=child)
            for p in NODE_POLICIES
        ]
        node_policies.append(session_manager_access(f"{name}-node-ssm", node_role, child))
        self.node_role_arn = node_role.arn

        versions = resolved.addon_versions
        # The Pod Identity agent first: vpc-cni takes its AWS credentials through it.
        agent = addon(self, name, "eks-pod-identity-agent", versions, cluster, tags, [])
        early = [agent]
        for addon_name in ("vpc-cni", "kube-proxy"):
            associations = cni_identity(self, name, managed_policy, tags, cluster) if addon_name == "vpc-cni" else None
            config = vpc_cni_addon_configuration() if addon_name == "vpc-cni" else None
            early.append(addon(self, name, addon_name, versions, cluster, tags, [agent], associations, configuration=config))
        node_deps: list[pulumi.Resource] = [*node_policies, *early]

        self.managed_node_groups: dict[str, aws.eks.NodeGroup] = {
            "system": system_node_group(
                self,
                name,
                resolved.system_node_group,
                cluster,
                node_role,
                prefix,
                as_list(wiring.cluster_subnet_ids),
                tags,
                node_deps,
            )
        }
        """EKS managed node groups by node group name (``system`` included)."""
        self.gpu_node_groups: dict[str, EksNodeTemplate] = {}
        """The launch template (and placement group) of each GPU node group."""
        security_group_ids = with_id(wiring.security_group_ids, self.cluster_security_group_id)
        for group in resolved.node_groups:
            group_name = group.group.name
            self.gpu_node_groups[group_name], self.managed_node_groups[group_name] = gpu_node_group(
                self,
                name,
                group,
                cluster,
                node_role,
                cluster_name=prefix,
                subnet_ids=wiring.node_group_subnet_ids[group_name],
                security_group_ids=security_group_ids,
                user_data=wiring.user_data.get(group_name, "#cloud-config\n"),
                instance_store_for_pods=resolved.instance_store_for_pods,
                tags=tags,
                deps=node_deps,
                catalog=catalog,
                repair=node_repair_config(resolved.spec.health) if group.facts.gpus else None,
                boot_gate=resolved.spec.health.sweep,
            )
        # CoreDNS and the FSx CSI driver become healthy only once nodes run them.
        nodes: list[pulumi.Resource] = list(self.managed_node_groups.values())
        for addon_name in versions:
            if addon_name not in BEFORE_NODES:
                config = fsx_csi_addon_configuration(wiring.region) if addon_name == FSX_CSI_ADDON else None
                addon(self, name, addon_name, versions, cluster, tags, nodes, configuration=config)

        ca_data = cluster.certificate_authority.apply(lambda ca: ca.data or "")
        self.kubeconfig = pulumi.Output.all(cluster.name, cluster.endpoint, ca_data).apply(
            lambda v: kubeconfig(v[0], v[1], v[2], wiring.region)
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(self.managed_node_groups.values())),
        )
        self.register_outputs(
            {
                "clusterName": self.cluster_name,
                "endpoint": self.endpoint,
                "oidcIssuer": self.oidc_issuer,
                "clusterSecurityGroupId": self.cluster_security_group_id,
                "nodeRoleArn": self.node_role_arn,
                "nodeGroups": {n: ng.node_group_name for n, ng in self.managed_node_groups.items()},
                "hybridNodeRoleArn": self.hybrid_nodes.role.arn if self.hybrid_nodes else None,
            }
        )
