"""EKS Hybrid Nodes on the cluster's AWS side: the remote node and pod networks, the control plane's security group
opened to them on 443, and the hybrid node role — trusted by IAM Roles Anywhere (the site's CA as trust anchor, only
certificates whose common name is ``<credentials.certificateCn>-…``, and a profile that lets that common name be the
session name) or by an SSM hybrid activation — with a ``HYBRID_LINUX`` access entry so nodes that assume it join as
``system:node:<session name>``.

The role holds what the EKS user guide lists for hybrid nodes and no more: ``eks:DescribeCluster`` on this cluster
(nodeadm reads the endpoint and CA), ``AmazonEC2ContainerRegistryPullOnly`` (EKS images), and with SSM Session
Manager's rights (without reading SSM parameters), ``ssm:DescribeInstanceInformation`` and deregistering only the
managed instances this cluster's activations made. The rendered node files are :mod:`gpucluster.render.hybrid.eks_nodes`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.roles import session_manager_access
from gpucluster.components._shared.security import allow
from gpucluster.config.hybrid import HybridSpec
from gpucluster.config.naming import with_name
from gpucluster.render.hybrid.eks_nodes import HybridNodeIdentity, render_hybrid_nodes_bundle
from gpucluster.render.iam import ssm_hybrid_trust_policy

ROLES_ANYWHERE = "rolesanywhere.amazonaws.com"
MANAGED_POLICIES = ("AmazonEC2ContainerRegistryPullOnly",)
API_PORT = 443


def remote_network_config(hybrid: HybridSpec | None) -> aws.eks.ClusterRemoteNetworkConfigArgs | None:
    """The cluster's remote node and pod networks (EKS takes one list of each)."""
    if hybrid is None or hybrid.kubernetes is None:
        return None
    nodes = hybrid.kubernetes
    pods = (
        aws.eks.ClusterRemoteNetworkConfigRemotePodNetworksArgs(cidrs=list(nodes.remote_pod_cidrs))
        if nodes.remote_pod_cidrs
        else None
    )
    return aws.eks.ClusterRemoteNetworkConfigArgs(
        remote_node_networks=aws.eks.ClusterRemoteNetworkConfigRemoteNodeNetworksArgs(cidrs=list(nodes.remote_node_cidrs)),
        remote_pod_networks=pods,
    )


def roles_anywhere_trust(trust_anchor_arn: str, certificate_cn: str) -> dict[str, Any]:
    """Sessions from the site's trust anchor only, from certificates whose common name is ``<certificateCn>-…`` (the
    site's GPU nodes: any other certificate of the same CA is refused), named after that common name (the node name)."""
    condition = {
        "ArnEquals": {"aws:SourceArn": trust_anchor_arn},
        "StringLike": {"aws:PrincipalTag/x509Subject/CN": f"{certificate_cn}-?*"},
    }
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": ROLES_ANYWHERE},
                "Action": ["sts:TagSession", "sts:SetSourceIdentity"],
                "Condition": condition,
            },
            {
                "Effect": "Allow",
                "Principal": {"Service": ROLES_ANYWHERE},
                "Action": "sts:AssumeRole",
                "Condition": {**condition, "StringEquals": {"sts:RoleSessionName": "${aws:PrincipalTag/x509Subject/CN}"}},
            },
        ],
    }


def hybrid_node_policy(cluster_arn: str, credentials: str, partition: str, region: str, account: str) -> dict[str, Any]:
    """What a hybrid node's own AWS calls need beyond the managed policies."""
    statements: list[dict[str, Any]] = [
        {"Sid": "DescribeThisCluster", "Effect": "Allow", "Action": "eks:DescribeCluster", "Resource": cluster_arn}
    ]
    if credentials == "ssm":
        statements += [
            {"Sid": "DescribeManagedInstances", "Effect": "Allow", "Action": "ssm:DescribeInstanceInformation", "Resource": "*"},
            {
                "Sid": "DeregisterThisClustersNodes",
                "Effect": "Allow",
                "Action": "ssm:DeregisterManagedInstance",
                "Resource": f"arn:{partition}:ssm:{region}:{account}:managed-instance/*",
                "Condition": {"ArnLike": {"ssm:resourceTag/EKSClusterARN": cluster_arn}},
            },
        ]
    return {"Version": "2012-10-17", "Statement": statements}


@dataclass
class HybridNodes:
    """The hybrid node role and how the site's nodes get it; ``bundle`` is what each node installs."""

    role: aws.iam.Role
    access_entry: aws.eks.AccessEntry
    trust_anchor_arn: pulumi.Output[str] | None
    profile: aws.rolesanywhere.Profile | None
    bundle: pulumi.Output[dict[str, str]]


def hybrid_nodes(
    parent: pulumi.Resource,
    name: str,
    hybrid: HybridSpec,
    *,
    prefix: str,
    cluster: aws.eks.Cluster,
    cluster_security_group_id: pulumi.Output[str],
    managed_policy: Callable[[str], pulumi.Output[str]],
    region: str,
    kubernetes_version: str,
    tags: dict[str, str],
    trust_anchor_arn: pulumi.Input[str] | None = None,
) -> HybridNodes:
    """Everything the cluster needs for the site's nodes to join. ``trust_anchor_arn``: the site's Roles Anywhere
    trust anchor when another component made it; default: one made here from the credentials section's CA.
    ``prefix``: the cluster's name, for the Name tags."""
    if hybrid.kubernetes is None:
        raise ValueError("the hybrid section has no kubernetes part: no EKS Hybrid Nodes to join")
    child = pulumi.ResourceOptions(parent=parent)
    creds = hybrid.credentials
    invoke = pulumi.InvokeOutputOptions(parent=parent)
    partition = aws.get_partition_output(opts=invoke).partition
    account = aws.get_caller_identity_output(opts=invoke).account_id

    _api_access(name, hybrid, cluster_security_group_id, tags, child)
    anchor, trust = _trust(name, hybrid, prefix, tags, child, trust_anchor_arn, partition, account, region)
    role = aws.iam.Role(
        f"{name}-hybrid-node-role",
        assume_role_policy=trust,
        description=f"EKS Hybrid Nodes of site {hybrid.site} ({creds.type})",
        tags=with_name(tags, f"{prefix}-{hybrid.site}-hybrid-node"),
        opts=child,
    )
    for policy in MANAGED_POLICIES:
        aws.iam.RolePolicyAttachment(
            f"{name}-hybrid-node-{policy}", role=role.name, policy_arn=managed_policy(policy), opts=child
        )
    if creds.type == "ssm":
        # Systems Manager's agent registers and runs the node (Session Manager's rights, no SSM parameter reads).
        session_manager_access(f"{name}-hybrid-node-ssm", role, child)
    aws.iam.RolePolicy(
        f"{name}-hybrid-node",
        role=role.id,
        policy=pulumi.Output.all(cluster.arn, partition, account).apply(
            lambda v: json.dumps(hybrid_node_policy(v[0], creds.type, v[1], region, v[2]), indent=2)
        ),
        opts=child,
    )
    access = aws.eks.AccessEntry(
        f"{name}-hybrid-nodes",
        cluster_name=cluster.name,
        principal_arn=role.arn,
        type="HYBRID_LINUX",
        tags=tags,
        opts=child,
    )
    profile = None
    if anchor is not None:
        profile = aws.rolesanywhere.Profile(
            f"{name}-hybrid-nodes",
            role_arns=[role.arn],
            duration_seconds=creds.duration_seconds,
            accept_role_session_name=True,
            enabled=True,
            tags=with_name(tags, f"{prefix}-{hybrid.site}-hybrid-nodes"),
            opts=child,
        )

    def bundle(values: list[Any]) -> dict[str, str]:
        identity = HybridNodeIdentity(values[1], values[2] or None, values[3] or None)
        return render_hybrid_nodes_bundle(
            hybrid, cluster_name=values[0], region=region, kubernetes_version=kubernetes_version, identity=identity
        )

    files = pulumi.Output.all(cluster.name, role.arn, anchor or "", profile.arn if profile else "").apply(bundle)
    return HybridNodes(role=role, access_entry=access, trust_anchor_arn=anchor, profile=profile, bundle=files)


def _api_access(
    name: str,
    hybrid: HybridSpec,
    cluster_security_group_id: pulumi.Output[str],
    tags: dict[str, str],
    child: pulumi.ResourceOptions,
) -> None:
    """The Kubernetes API port open on the cluster security group to the site's node and pod networks."""
    if hybrid.kubernetes is None:
        return
    for i, cidr in enumerate((*hybrid.kubernetes.remote_node_cidrs, *hybrid.kubernetes.remote_pod_cidrs)):
        kind = "node" if i < len(hybrid.kubernetes.remote_node_cidrs) else "pod"
        allow(
            f"{name}-hybrid-api-{cidr.replace('/', '-')}",
            "in",
            cluster_security_group_id,
            description=f"Kubernetes API from the {hybrid.site} site's {kind} network {cidr} (EKS Hybrid Nodes)",
            tags=tags,
            opts=child,
            cidr=cidr,
            protocol="tcp",
            ports=(API_PORT, API_PORT),
        )


def _trust(
    name: str,
    hybrid: HybridSpec,
    prefix: str,
    tags: dict[str, str],
    child: pulumi.ResourceOptions,
    trust_anchor_arn: pulumi.Input[str] | None,
    partition: pulumi.Output[str],
    account: pulumi.Output[str],
    region: str,
) -> tuple[pulumi.Output[str] | None, pulumi.Output[str]]:
    """Who may assume the hybrid node role: a Roles Anywhere trust anchor (given, or one made from the CA) or SSM's
    hybrid activations. The anchor's ARN (Roles Anywhere) and the trust policy."""
    creds = hybrid.credentials
    anchor: pulumi.Output[str] | None = None
    if creds.type == "rolesanywhere":
        if trust_anchor_arn is None:
            source = aws.rolesanywhere.TrustAnchorSourceArgs(
                source_type="AWS_ACM_PCA" if creds.acm_pca_arn else "CERTIFICATE_BUNDLE",
                source_data=aws.rolesanywhere.TrustAnchorSourceSourceDataArgs(
                    acm_pca_arn=creds.acm_pca_arn, x509_certificate_data=creds.ca_certificate_pem
                ),
            )
            trust_anchor_arn = aws.rolesanywhere.TrustAnchor(
                f"{name}-hybrid-anchor",
                source=source,
                enabled=True,
                tags=with_name(tags, f"{prefix}-{hybrid.site}-ca"),
                opts=child,
            ).arn
        anchor = pulumi.Output.from_input(trust_anchor_arn)
        trust = anchor.apply(lambda a: json.dumps(roles_anywhere_trust(a, creds.certificate_cn), indent=2))
    else:
        trust = pulumi.Output.all(partition, account).apply(
            lambda v: ssm_hybrid_trust_policy(partition=v[0], region=region, account=v[1])
        )
    return anchor, trust
