"""The AMP managed scraper of the EKS cluster, and its rights inside Kubernetes.

The scraper runs in AWS with ENIs in the cluster's subnets and security groups (the EFA group: all traffic between
its members, so it reaches the exporters' ports). AMP creates the scraper's IAM role (``role_arn``); an EKS access
entry maps that role to the Kubernetes user ``aps-collector-user``, which a ClusterRole lets discover and scrape
pods (Amazon Managed Service for Prometheus User Guide, "Configuring your Amazon EKS cluster").
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from gpucluster.components.monitoring._wiring import MonitoringWiring
from gpucluster.render.monitoring.collection import scraper_config
from gpucluster.render.monitoring.policies import SCRAPER_CLUSTER_ROLE_RULES, SCRAPER_USER
from gpucluster.resolve.cluster import ResolvedCluster

GPU_OPERATOR_NAMESPACE = "gpu-operator"
KUEUE_NAMESPACE = "kueue-system"
CLUSTER_ROLE = "aps-collector-role"


def eks_scraper(
    parent: pulumi.Resource,
    name: str,
    cluster: ResolvedCluster,
    wiring: MonitoringWiring,
    workspace_arn: pulumi.Input[str],
    tags: dict[str, str],
) -> pulumi.Output[str]:
    """The scraper, its access entry and its ClusterRole(Binding); the scraper's role ARN."""
    if wiring.eks_cluster_arn is None or wiring.kubernetes_provider is None:
        raise ValueError("the EKS scraper needs the EKS cluster's ARN and its Kubernetes provider")
    monitoring = cluster.monitoring
    if monitoring is None:
        raise ValueError("eks_scraper: the cluster's monitoring is off")
    child = pulumi.ResourceOptions(parent=parent)
    config = scraper_config(cluster.name, monitoring.spec.scrape_interval_seconds, GPU_OPERATOR_NAMESPACE, KUEUE_NAMESPACE)
    scraper = aws.amp.Scraper(
        f"{name}-scraper",
        alias=f"{cluster.name}-eks",
        source={
            "eks": {
                "cluster_arn": wiring.eks_cluster_arn,
                "subnet_ids": list(wiring.eks_subnet_ids),
                "security_group_ids": list(wiring.eks_security_group_ids),
            }
        },
        destination={"amp": {"workspace_arn": workspace_arn}},
        scrape_configuration=config,
        tags=tags,
        opts=child,
    )
    aws.eks.AccessEntry(
        f"{name}-scraper-access",
        cluster_name=wiring.eks_cluster_name,
        principal_arn=scraper.role_arn,
        user_name=SCRAPER_USER,
        type="STANDARD",
        tags=tags,
        opts=child,
    )
    k8s_opts = pulumi.ResourceOptions(parent=parent, provider=wiring.kubernetes_provider)
    role = k8s.rbac.v1.ClusterRole(
        f"{name}-scraper-role",
        metadata={"name": CLUSTER_ROLE},
        rules=[_rule(r) for r in SCRAPER_CLUSTER_ROLE_RULES],
        opts=k8s_opts,
    )
    k8s.rbac.v1.ClusterRoleBinding(
        f"{name}-scraper-binding",
        metadata={"name": f"{CLUSTER_ROLE}-binding"},
        role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=CLUSTER_ROLE),
        subjects=[k8s.rbac.v1.SubjectArgs(kind="User", name=SCRAPER_USER, api_group="rbac.authorization.k8s.io")],
        opts=pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[role])),
    )
    return scraper.role_arn


def _rule(rule: dict[str, list[str]]) -> k8s.rbac.v1.PolicyRuleArgs:
    return k8s.rbac.v1.PolicyRuleArgs(
        api_groups=rule.get("apiGroups"),
        resources=rule.get("resources"),
        non_resource_urls=rule.get("nonResourceURLs"),
        verbs=rule["verbs"],
    )
