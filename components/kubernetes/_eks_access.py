"""Who may use an EKS cluster's Kubernetes API: one access entry per ``kubernetes.accessEntries`` principal, with its
access policies, and nobody else.

The cluster is created with ``bootstrapClusterCreatorAdminPermissions`` false: EKS would otherwise make whoever
runs ``pulumi up`` a cluster admin through an access entry no program, plan or review shows. Pulumi itself creates
the in-cluster objects (GPU Operator, Kueue, team namespaces) with the deploying identity's credentials, so that
identity must be one of the entries, with ``AmazonEKSClusterAdminPolicy`` at cluster scope: an explicit, named
resource of the plan (``<cluster>-access-<principal>``), visible and removable like any other. A config without such
an entry gets a warning (``gpucluster.config.checks.kubernetes``).

Changing the bootstrap flag replaces an EKS cluster, so a cluster created before it was turned off keeps its value
(``ignore_changes``; the plan diff says the change is ignored): its creator stays an admin until that access entry
is deleted by hand (``docs/kubernetes.md``, "Who administers the EKS cluster").
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.inputs import Inputs
from gpucluster.resolve.kubernetes import ResolvedKubernetes

# The cluster's input path of the bootstrap flag, which ignore_changes keeps for clusters that exist.
BOOTSTRAP_ADMIN = "accessConfig.bootstrapClusterCreatorAdminPermissions"


def access_config() -> aws.eks.ClusterAccessConfigArgs:
    """API authentication (access entries only) and no hidden admin for the cluster's creator."""
    return aws.eks.ClusterAccessConfigArgs(authentication_mode="API", bootstrap_cluster_creator_admin_permissions=False)


def access_entries(
    parent: pulumi.Resource,
    name: str,
    resolved: ResolvedKubernetes,
    inputs: Inputs,
    cluster: aws.eks.Cluster,
    partition: pulumi.Output[str],
    tags: dict[str, str],
) -> None:
    """One access entry per configured principal, and its access policies."""
    for entry in resolved.spec.access_entries:
        principal = inputs.real(entry.principal_arn)
        # Named by the principal (account:role/…), never its position: inserting one must not re-target the others.
        key = entry.principal_arn.split(":", 4)[-1]
        access = aws.eks.AccessEntry(
            f"{name}-access-{key}",
            cluster_name=cluster.name,
            principal_arn=principal,
            kubernetes_groups=list(entry.kubernetes_groups) or None,
            type="STANDARD",
            tags=tags,
            opts=pulumi.ResourceOptions(parent=parent),
        )
        for policy in entry.policies:
            aws.eks.AccessPolicyAssociation(
                f"{name}-access-{key}-{policy}",
                cluster_name=cluster.name,
                principal_arn=principal,
                policy_arn=partition.apply(lambda p, policy=policy: f"arn:{p}:eks::aws:cluster-access-policy/{policy}"),
                access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(
                    type="namespace" if entry.namespaces else "cluster", namespaces=list(entry.namespaces) or None
                ),
                opts=pulumi.ResourceOptions(parent=parent, depends_on=[access]),
            )
