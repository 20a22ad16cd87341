"""EksCluster and KubernetesPlatform as a Python user writes them: dict literals and lists, Outputs of
other resources in the fields that name them. Pyright checks this file (pyproject's include), so a
field the Args do not have, or a value of the wrong type, is a type error; the tests run it under mocks."""

import pulumi
import pulumi_aws as aws

from gpucluster.components.kubernetes.eks_cluster import EksCluster
from gpucluster.components.kubernetes.kubernetes_platform import KubernetesPlatform

SUBNETS = ["subnet-0aaa1111", "subnet-0bbb2222"]  # what plain_eks names, for the tests


def plain_eks() -> EksCluster:
    """Everything plain: the node group's subnets in the group itself."""
    return EksCluster(
        "plain",
        {
            "cluster_name": "plain",
            "region": "us-east-1",
            "cluster_subnet_ids": ["subnet-0aaa1111", "subnet-0bbb2222"],
            "version": "1.33",
            "access_entries": [
                {"principal_arn": "arn:aws:iam::123456789012:role/admins", "policies": ["AmazonEKSClusterAdminPolicy"]}
            ],
            "system_node_group": {"min_size": 3},
            "node_groups": [
                {
                    "name": "gpu",
                    "instance_type": "p5.48xlarge",
                    "availability_zones": ["us-east-1a"],
                    "max_size": 2,
                    "subnet_ids": ["subnet-0aaa1111"],
                }
            ],
            "security_group_ids": ["sg-0123456789abcdef0"],
            "tags": {"team": "ml"},
        },
    )


def wired_eks() -> EksCluster:
    """Outputs of other resources: the Secrets key, an admin role, subnets and security groups."""
    vpc = aws.ec2.Vpc("vpc", cidr_block="10.0.0.0/16")
    subnets = [
        aws.ec2.Subnet(f"s{i}", vpc_id=vpc.id, cidr_block=f"10.0.{i}.0/24", availability_zone=z)
        for i, z in enumerate(["us-east-1a", "us-east-1b"])
    ]
    key = aws.kms.Key("secrets")
    admins = aws.iam.Role("admins", assume_role_policy="{}")
    sg = aws.ec2.SecurityGroup("nodes", vpc_id=vpc.id)
    return EksCluster(
        "wired",
        {
            "cluster_name": "wired",
            "region": "us-east-1",
            "cluster_subnet_ids": [s.id for s in subnets],
            "secrets_kms_key_arn": key.arn,
            "access_entries": [{"principal_arn": admins.arn, "policies": ["AmazonEKSViewPolicy"]}],
            "node_groups": [
                {
                    "name": "gpu",
                    "instance_type": "p5.48xlarge",
                    "availability_zones": ["us-east-1a"],
                    "max_size": 2,
                    "subnet_ids": [subnets[0].id],
                }
            ],
            "security_group_ids": pulumi.Output.all(sg.id).apply(lambda ids: list(ids)),
        },
    )


def platform_on(eks: EksCluster) -> KubernetesPlatform:
    """The GPU platform on that cluster, its provider given as an argument."""
    return KubernetesPlatform(
        "platform",
        {
            "cluster_name": "plain",
            "provider": eks.provider,
            "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "availability_zones": ["us-east-1a"], "max_size": 2}],
            "teams": [{"name": "research", "gpu_quota": {"h100": 16}, "groups": ["research"]}],
            "kueue": {"pods_ready_timeout": "15m"},
        },
    )
