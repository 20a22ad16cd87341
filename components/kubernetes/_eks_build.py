"""The builder of :class:`~gpucluster.components.kubernetes.eks_cluster.EksCluster`: the control plane, its access
entries and Secrets key, the node role, the add-ons and the managed node groups, from resolved values, under the
parent it is given (the ``EksCluster`` itself, or ``GpuCluster``'s part of that type)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from gpucluster.components._shared.inputs import Inputs, as_list, with_id
from gpucluster.components._shared.roles import session_manager_access
from gpucluster.components.kubernetes._eks_access import BOOTSTRAP_ADMIN, access_config, access_entries
from gpucluster.components.kubernetes._eks_addons import BEFORE_NODES, addon, cni_identity
from gpucluster.components.kubernetes._eks_hybrid import HybridNodes, hybrid_nodes, remote_network_config
from gpucluster.components.kubernetes._eks_node_groups import EksNodeTemplate, gpu_node_group, system_node_group
from gpucluster.config.hybrid import HybridSpec
from gpucluster.config.kubernetes import FSX_CSI_ADDON
from gpucluster.config.naming import with_name
from gpucluster.render.iam import assume_role_policy
from gpucluster.render.kubernetes import fsx_csi_addon_configuration, vpc_cni_addon_configuration
from gpucluster.render.kubernetes.health import node_repair_config
from gpucluster.resolve.kubernetes import ResolvedKubernetes

NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly")


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
    inputs: Inputs
    """Gives back the Outputs a program passed in reference fields (the Secrets key, access principals)."""
    hybrid: HybridSpec | None = None
    """A site whose servers join as EKS Hybrid Nodes (``hybrid.kubernetes`` set): the stack's path only."""


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


@dataclass
class EksParts:
    """What :func:`build_eks_cluster` made: an ``EksCluster``'s outputs, its node groups and its provider."""

    cluster_name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]
    cluster_security_group_id: pulumi.Output[str]
    node_role_arn: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    hybrid_nodes: HybridNodes | None
    """The hybrid node role, its access entry and Roles Anywhere profile, and the files each site node installs."""
    managed_node_groups: dict[str, aws.eks.NodeGroup]
    """EKS managed node groups by node group name (``system`` included)."""
    gpu_node_groups: dict[str, EksNodeTemplate]
    """The launch template (and placement group) of each GPU node group."""
    cluster_arn: pulumi.Output[str] | None = None
    """The EKS cluster's ARN (what an AMP scraper's source names)."""


@dataclass(frozen=True)
class _Plane:
    cluster: aws.eks.Cluster
    partition: pulumi.Output[str]
    managed_policy: Callable[[str], pulumi.Output[str]]


def build_eks_cluster(
    parent: pulumi.ComponentResource,
    name: str,
    resolved: ResolvedKubernetes,
    wiring: EksWiring,
) -> EksParts:
    """EKS for ``resolved`` (the Kubernetes section and its node groups), children of ``parent``; registers
    ``parent``'s outputs."""
    inputs, hybrid = wiring.inputs, wiring.hybrid
    hybrid = hybrid if hybrid is not None and hybrid.kubernetes is not None else None
    plane = _control_plane(parent, name, resolved, wiring, inputs, hybrid)
    cluster, tags, prefix = plane.cluster, dict(wiring.tags), resolved.cluster_name
    cluster_sg = cluster.vpc_config.apply(lambda v: v.cluster_security_group_id or "")
    access_entries(parent, name, resolved, inputs, cluster, plane.partition, tags)
    nodes_of_site = None
    if hybrid is not None:
        nodes_of_site = hybrid_nodes(
            parent,
            name,
            hybrid,
            prefix=prefix,
            cluster=cluster,
            cluster_security_group_id=cluster_sg,
            managed_policy=plane.managed_policy,
            region=wiring.region,
            kubernetes_version=resolved.spec.version,
            tags=tags,
        )
    node_role, node_policies = _node_role(parent, name, prefix, plane.managed_policy, tags)
    managed, gpu = _node_groups(parent, name, resolved, wiring, plane, node_role, node_policies, cluster_sg)
    ca_data = cluster.certificate_authority.apply(lambda ca: ca.data or "")
    config = pulumi.Output.all(cluster.name, cluster.endpoint, ca_data).apply(
        lambda v: kubeconfig(v[0], v[1], v[2], wiring.region)
    )
    provider = k8s.Provider(
        f"{name}-k8s", kubeconfig=config, opts=pulumi.ResourceOptions(parent=parent, depends_on=list(managed.values()))
    )
    parts = EksParts(
        cluster_name=cluster.name,
        endpoint=cluster.endpoint,
        oidc_issuer=cluster.identities.apply(lambda ids: next((o.issuer or "" for i in ids for o in (i.oidcs or [])), "")),
        cluster_security_group_id=cluster_sg,
        node_role_arn=node_role.arn,
        kubeconfig=config,
        provider=provider,
        hybrid_nodes=nodes_of_site,
        managed_node_groups=managed,
        gpu_node_groups=gpu,
        cluster_arn=cluster.arn,
    )
    parent.register_outputs(
        {
            "clusterName": parts.cluster_name,
            "endpoint": parts.endpoint,
            "oidcIssuer": parts.oidc_issuer,
            "clusterSecurityGroupId": parts.cluster_security_group_id,
            "nodeRoleArn": parts.node_role_arn,
            "nodeGroups": {n: ng.node_group_name for n, ng in managed.items()},
            "hybridNodeRoleArn": nodes_of_site.role.arn if nodes_of_site else None,
        }
    )
    return parts


def _control_plane(
    parent: pulumi.ComponentResource,
    name: str,
    resolved: ResolvedKubernetes,
    wiring: EksWiring,
    inputs: Inputs,
    hybrid: HybridSpec | None,
) -> _Plane:
    """The Secrets key, the cluster role and the EKS cluster."""
    spec, tags, prefix = resolved.spec, dict(wiring.tags), resolved.cluster_name
    child = pulumi.ResourceOptions(parent=parent)
    partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=parent)).partition

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
            opts=pulumi.ResourceOptions(parent=parent, protect=wiring.protect_data, retain_on_delete=wiring.protect_data),
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
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[cluster_policy], ignore_changes=[BOOTSTRAP_ADMIN]),
    )
    return _Plane(cluster, partition, managed_policy)


def _node_role(
    parent: pulumi.ComponentResource,
    name: str,
    prefix: str,
    managed_policy: Callable[[str], pulumi.Output[str]],
    tags: dict[str, str],
) -> tuple[aws.iam.Role, list[pulumi.Resource]]:
    """The role every node (system and GPU) runs as, with its managed policies and Session Manager access."""
    child = pulumi.ResourceOptions(parent=parent)
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
    return node_role, node_policies


def _node_groups(
    parent: pulumi.ComponentResource,
    name: str,
    resolved: ResolvedKubernetes,
    wiring: EksWiring,
    plane: _Plane,
    node_role: aws.iam.Role,
    node_policies: list[pulumi.Resource],
    cluster_security_group_id: pulumi.Output[str],
) -> tuple[dict[str, aws.eks.NodeGroup], dict[str, EksNodeTemplate]]:
    """The add-ons nodes need, the system and GPU managed node groups, then the add-ons that need nodes."""
    cluster, tags, prefix = plane.cluster, dict(wiring.tags), resolved.cluster_name
    versions = resolved.addon_versions
    # The Pod Identity agent first: vpc-cni takes its AWS credentials through it.
    agent = addon(parent, name, "eks-pod-identity-agent", versions, cluster, tags, [])
    early = [agent]
    for addon_name in ("vpc-cni", "kube-proxy"):
        associations = cni_identity(parent, name, plane.managed_policy, tags, cluster) if addon_name == "vpc-cni" else None
        config = vpc_cni_addon_configuration() if addon_name == "vpc-cni" else None
        early.append(addon(parent, name, addon_name, versions, cluster, tags, [agent], associations, configuration=config))
    node_deps: list[pulumi.Resource] = [*node_policies, *early]
    subnets = as_list(wiring.cluster_subnet_ids)
    managed: dict[str, aws.eks.NodeGroup] = {
        "system": system_node_group(
            parent, name, resolved.system_node_group, cluster, node_role, prefix, subnets, tags, node_deps
        )
    }
    gpu: dict[str, EksNodeTemplate] = {}
    security_group_ids = with_id(wiring.security_group_ids, cluster_security_group_id)
    for group in resolved.node_groups:
        group_name = group.group.name
        gpu[group_name], managed[group_name] = gpu_node_group(
            parent,
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
            repair=node_repair_config(resolved.spec.health) if group.facts.gpus else None,
            boot_gate=resolved.spec.health.sweep,
            max_unavailable_percentage=resolved.spec.gpu_node_update.max_unavailable_percentage,
        )
    # CoreDNS and the FSx CSI driver become healthy only once nodes run them.
    nodes: list[pulumi.Resource] = list(managed.values())
    for addon_name in versions:
        if addon_name not in BEFORE_NODES:
            config = fsx_csi_addon_configuration(wiring.region) if addon_name == FSX_CSI_ADDON else None
            addon(parent, name, addon_name, versions, cluster, tags, nodes, configuration=config)
    return managed, gpu
