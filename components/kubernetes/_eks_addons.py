"""EKS managed add-ons at pinned versions, and the Pod Identity role that gives vpc-cni its AWS
permissions instead of the node role: the add-on half of :class:`~gpucluster.components.kubernetes.eks_cluster.EksCluster`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

from gpucluster.render.iam import pod_identity_trust_policy

CNI_SERVICE_ACCOUNT = "aws-node"  # vpc-cni's, in kube-system
# Add-ons that must run before nodes can become Ready; CoreDNS (and the CSI driver) need nodes.
BEFORE_NODES = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")


def cni_identity(
    parent: pulumi.Resource,
    name: str,
    managed_policy: Callable[[str], pulumi.Output[str]],
    tags: dict[str, str],
    cluster: aws.eks.Cluster,
) -> list[aws.eks.AddonPodIdentityAssociationArgs]:
    """Least privilege: the CNI's EC2 permissions go to the aws-node service account (EKS Pod
    Identity), not to the node role every pod on the node could use. The role trusts Pod Identity of this account
    only, and only for kube-system/aws-node of this cluster."""
    account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=parent)).account_id
    trust = pulumi.Output.all(account, cluster.arn).apply(
        lambda v: pod_identity_trust_policy(
            account=v[0], cluster_arn=v[1], namespace="kube-system", service_account=CNI_SERVICE_ACCOUNT
        )
    )
    role = aws.iam.Role(
        f"{name}-vpc-cni",
        assume_role_policy=trust,
        description="vpc-cni (kube-system/aws-node) through EKS Pod Identity",
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    aws.iam.RolePolicyAttachment(
        f"{name}-vpc-cni",
        role=role.name,
        policy_arn=managed_policy("AmazonEKS_CNI_Policy"),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return [aws.eks.AddonPodIdentityAssociationArgs(role_arn=role.arn, service_account=CNI_SERVICE_ACCOUNT)]


def addon(
    parent: pulumi.Resource,
    name: str,
    addon_name: str,
    versions: Mapping[str, str | None],
    cluster: aws.eks.Cluster,
    tags: dict[str, str],
    depends_on: Sequence[pulumi.Resource],
    associations: Sequence[aws.eks.AddonPodIdentityAssociationArgs] | None = None,
    configuration: dict[str, Any] | None = None,
) -> aws.eks.Addon:
    """One managed add-on at its pinned version (``None``: EKS's default for the cluster version)."""
    return aws.eks.Addon(
        f"{name}-{addon_name}",
        cluster_name=cluster.name,
        addon_name=addon_name,
        addon_version=versions[addon_name],
        resolve_conflicts_on_create="OVERWRITE",
        resolve_conflicts_on_update="OVERWRITE",
        pod_identity_associations=list(associations) if associations else None,
        configuration_values=json.dumps(configuration, sort_keys=True) if configuration else None,
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on)),
    )
