"""The one way a component makes an EC2 instance role: trusted by EC2 only, with Session Manager access.

Every node role (GPU node groups without a profile of their own, the Slurm head node, Slurm compute
nodes) starts here; each caller then attaches only the rights its nodes need.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from gpucluster.components._aws.iam import assume_role_policy, managed_policy_arn


def ec2_ssm_role(
    prefix: str, *, description: str, tags: dict[str, str], partition: pulumi.Input[str], opts: pulumi.ResourceOptions
) -> aws.iam.Role:
    """``<prefix>-role`` (trusted by EC2) and ``<prefix>-ssm`` (AmazonSSMManagedInstanceCore attached)."""
    role = aws.iam.Role(
        f"{prefix}-role",
        assume_role_policy=assume_role_policy("ec2.amazonaws.com"),
        description=description,
        tags=tags,
        opts=opts,
    )
    aws.iam.RolePolicyAttachment(
        f"{prefix}-ssm",
        role=role.name,
        policy_arn=pulumi.Output.from_input(partition).apply(lambda p: managed_policy_arn(p, "AmazonSSMManagedInstanceCore")),
        opts=opts,
    )
    return role
