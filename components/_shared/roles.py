"""The one way a component makes an EC2 instance role: trusted by EC2 only, with Session Manager access.

Every node role (GPU node groups without a profile of their own, the Slurm head node, Slurm compute
nodes) starts here; each caller then attaches only the rights its nodes need. Session Manager's rights are a
policy of our own (:func:`~gpucluster.render.iam.session_manager_policy`), never the managed
AmazonSSMManagedInstanceCore, which lets a node read every SSM parameter of the account.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from gpucluster.render.iam import assume_role_policy, policy_json, session_manager_policy


def session_manager_access(name: str, role: aws.iam.Role, opts: pulumi.ResourceOptions) -> aws.iam.RolePolicy:
    """``name``: Session Manager's rights on ``role`` (Systems Manager's agent, no parameter reads)."""
    return aws.iam.RolePolicy(name, role=role.id, policy=policy_json(session_manager_policy()), opts=opts)


def ec2_ssm_role(prefix: str, *, description: str, tags: dict[str, str], opts: pulumi.ResourceOptions) -> aws.iam.Role:
    """``<prefix>-role`` (trusted by EC2) and ``<prefix>-ssm`` (Session Manager's rights)."""
    role = aws.iam.Role(
        f"{prefix}-role",
        assume_role_policy=assume_role_policy("ec2.amazonaws.com"),
        description=description,
        tags=tags,
        opts=opts,
    )
    session_manager_access(f"{prefix}-ssm", role, opts)
    return role
