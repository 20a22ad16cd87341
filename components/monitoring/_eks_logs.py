"""The EKS nodes' log shipping: Fluent Bit (the pinned ``aws-for-fluent-bit`` chart, values from
:mod:`gpucluster.render.kubernetes.logs`) writing into the cluster's log group, with its AWS rights through EKS Pod
Identity.

The role trusts Pod Identity of this account for the Fluent Bit service account of this cluster only (its namespace
holds nothing else); its one policy is the Slurm nodes' shipping policy with the EKS streams (``*/kubelet``,
``*/containerd``, ``*/containers``): no log group creation, no retention change, no KMS right (CloudWatch Logs
encrypts with the key itself). The association exists before the release, so the first pods get credentials.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from gpucluster.components.kubernetes._helm import helm_release
from gpucluster.components.monitoring._wiring import MonitoringWiring
from gpucluster.config.kubernetes import FLUENT_BIT_CHART
from gpucluster.render.iam import pod_identity_trust_policy, policy_json
from gpucluster.render.kubernetes.logs import (
    EKS_STREAM_PATTERNS,
    FLUENT_BIT_NAMESPACE,
    FLUENT_BIT_RELEASE,
    FLUENT_BIT_SERVICE_ACCOUNT,
    fluent_bit_values,
)
from gpucluster.render.monitoring.policies import log_shipping_policy
from gpucluster.resolve.cluster import ResolvedCluster


def eks_log_shipping(
    parent: pulumi.Resource,
    name: str,
    cluster: ResolvedCluster,
    wiring: MonitoringWiring,
    group_arn: pulumi.Output[str],
    account: pulumi.Input[str],
    tags: dict[str, str],
) -> None:
    """Fluent Bit's role, its policy, its Pod Identity association and the release, under ``parent``."""
    if wiring.eks_cluster_arn is None or wiring.eks_cluster_name is None or wiring.kubernetes_provider is None:
        raise ValueError("the EKS log shipping needs the EKS cluster's ARN, name and Kubernetes provider")
    child = pulumi.ResourceOptions(parent=parent)
    trust = pulumi.Output.all(account, wiring.eks_cluster_arn).apply(
        lambda v: pod_identity_trust_policy(
            account=v[0], cluster_arn=v[1], namespace=FLUENT_BIT_NAMESPACE, service_account=FLUENT_BIT_SERVICE_ACCOUNT
        )
    )
    role = aws.iam.Role(
        f"{name}-fluent-bit",
        assume_role_policy=trust,
        description=f"Fluent Bit ({FLUENT_BIT_NAMESPACE}/{FLUENT_BIT_SERVICE_ACCOUNT}) through EKS Pod Identity",
        tags=tags,
        opts=child,
    )
    policy = aws.iam.RolePolicy(
        f"{name}-fluent-bit-logs",
        role=role.id,
        policy=group_arn.apply(lambda arn: policy_json(log_shipping_policy(arn, EKS_STREAM_PATTERNS))),
        opts=child,
    )
    association = aws.eks.PodIdentityAssociation(
        f"{name}-fluent-bit",
        cluster_name=wiring.eks_cluster_name,
        namespace=FLUENT_BIT_NAMESPACE,
        service_account=FLUENT_BIT_SERVICE_ACCOUNT,
        role_arn=role.arn,
        tags=tags,
        opts=child,
    )
    helm_release(
        f"{name}-fluent-bit",
        FLUENT_BIT_RELEASE,
        FLUENT_BIT_CHART,
        FLUENT_BIT_NAMESPACE,
        parent,
        fluent_bit_values(cluster.name, cluster.region),
        provider=wiring.kubernetes_provider,
        depends_on=[association, policy],
    )
