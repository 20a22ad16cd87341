"""The IAM documents components write, in one place so they can be read and reviewed together.

Trust policies of the service roles every component creates, Session Manager's rights for node roles, and the
Slurm cluster's permission policies: the head node's own needs, the compute nodes' (the node agent's EC2 rights
are :mod:`gpucluster.components._shared.agent_iam`).
Pure functions: plain values in, the policy document out; the components resolve the ARNs and attach.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

# AmazonSSMManagedInstanceCore's actions (its three statements, all on "*"), less ssm:GetParameter and
# ssm:GetParameters: the managed policy lets every node read every parameter of the account, SecureStrings
# included, and no gpucluster node reads one (their AMIs are resolved by Pulumi, not at boot).
SESSION_MANAGER_ACTIONS = {
    "SystemsManagerAgent": (
        "ssm:DescribeAssociation",
        "ssm:GetDeployablePatchSnapshotForInstance",
        "ssm:GetDocument",
        "ssm:DescribeDocument",
        "ssm:GetManifest",
        "ssm:ListAssociations",
        "ssm:ListInstanceAssociations",
        "ssm:PutInventory",
        "ssm:PutComplianceItems",
        "ssm:PutConfigurePackageResult",
        "ssm:UpdateAssociationStatus",
        "ssm:UpdateInstanceAssociationStatus",
        "ssm:UpdateInstanceInformation",
    ),
    "SessionManagerChannels": (
        "ssmmessages:CreateControlChannel",
        "ssmmessages:CreateDataChannel",
        "ssmmessages:OpenControlChannel",
        "ssmmessages:OpenDataChannel",
    ),
    "RunCommandMessages": (
        "ec2messages:AcknowledgeMessage",
        "ec2messages:DeleteMessage",
        "ec2messages:FailMessage",
        "ec2messages:GetEndpoint",
        "ec2messages:GetMessages",
        "ec2messages:SendReply",
    ),
}


def session_manager_policy() -> dict[str, Any]:
    """What a node role needs for Systems Manager (Session Manager, Run Command, inventory): the managed
    AmazonSSMManagedInstanceCore policy without its ``ssm:GetParameter``/``ssm:GetParameters`` on ``*``. A policy
    of our own rather than the managed one plus a deny: the document is the list a reviewer reads, and an action
    AWS adds to the managed policy later reaches no node until it is added here on purpose."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": sid, "Effect": "Allow", "Action": list(actions), "Resource": "*"}
            for sid, actions in SESSION_MANAGER_ACTIONS.items()
        ],
    }


def assume_role_policy(service: str, *actions: str) -> str:
    """A trust policy letting the AWS ``service`` principal take the role with ``actions`` (default
    ``sts:AssumeRole``)."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": list(actions) or "sts:AssumeRole"}],
        }
    )


def policy_json(policy: dict[str, Any]) -> str:
    """A permission policy as the role policy's text (indented: the plan and the console show it as read)."""
    return json.dumps(policy, indent=2)


def managed_policy_arn(partition: str, policy: str) -> str:
    """The ARN of the AWS managed policy ``policy`` in ``partition`` (aws, aws-cn, aws-us-gov)."""
    return f"arn:{partition}:iam::aws:policy/{policy}"


def users_statement(users_arn: str) -> dict[str, Any]:
    """Read the declared users' object (``users/users.json``: every Slurm node fetches it, render/slurm/identity.py),
    that one key only: the head node's bundles and the node maps stay out of the login and compute roles' reach."""
    return {"Sid": "ReadTheDeclaredUsers", "Effect": "Allow", "Action": "s3:GetObject", "Resource": users_arn}


def slurm_head_policy(
    *,
    secret_arn: str,
    bundle_arn: str,
    node_maps_arn: str,
    head_files_arn: str | None = None,
    users_arn: str | None = None,
    usage_arn: str | None = None,
    baselines_arn: str | None = None,
) -> dict[str, Any]:
    """The Slurm head node's own needs: make and read the munge key, fetch the agent package, publish the
    launches' node maps (one object per CreateFleet batch, ``gpucluster_agents/power/nodemap.py``) and read them back
    when its own record of the node names is lost (``gpucluster_agents/power/names.py``: an instance a map names is
    never taken for an orphan). No s3:ListBucket: the agent reads a map by its launch token, as a node does.
    With ``usage_arn`` (a cluster with teams): write the daily GPU usage files there (``render/slurm/usage.py``),
    and nothing else on that prefix: no read, no delete. ``baselines_arn``: the images' re-baseline figures
    (``gpucluster_agents/power/baseline.py``), read by key and written by the agent only. ``head_files_arn``: the
    bundles of the head node's files (``render/slurm/headfiles.py``), read only; the compute nodes' role may not."""
    statements: list[dict[str, Any]] = [
        {
            "Sid": "MakeAndReadTheMungeKey",
            "Effect": "Allow",
            "Action": ["secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue", "secretsmanager:DescribeSecret"],
            "Resource": secret_arn,
        },
        {"Sid": "FetchTheAgentPackage", "Effect": "Allow", "Action": "s3:GetObject", "Resource": bundle_arn},
        {"Sid": "PublishNodeMaps", "Effect": "Allow", "Action": "s3:PutObject", "Resource": node_maps_arn},
        {"Sid": "ReadNodeMapsBack", "Effect": "Allow", "Action": "s3:GetObject", "Resource": node_maps_arn},
    ]
    if head_files_arn is not None:
        statements.append({"Sid": "FetchItsFiles", "Effect": "Allow", "Action": "s3:GetObject", "Resource": head_files_arn})
    if users_arn is not None:
        statements.append(users_statement(users_arn))
    if usage_arn is not None:
        statements.append({"Sid": "WriteDailyUsageReports", "Effect": "Allow", "Action": "s3:PutObject", "Resource": usage_arn})
    if baselines_arn is not None:
        statements.append(
            {
                "Sid": "KeepImageBaselines",
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:PutObject"],
                "Resource": baselines_arn,
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def slurm_node_policy(
    *,
    secret_arn: str,
    bundle_arn: str,
    node_maps_arn: str,
    users_arn: str | None = None,
    kms_key_arn: str | None = None,
    region: str = "",
    hook_objects: Sequence[str] = (),
) -> dict[str, Any]:
    """The Slurm compute nodes' role: read the munge key, fetch the node package (the health program) and read
    node maps by their key; nothing else (plus Session Manager). No s3:ListBucket: a node reads only the map
    whose random launch token its own tags hold (and S3 answers 403, not 404, for a map not written yet). With
    ``kms_key_arn`` (a hybrid site's munge secret is under a key of its own) also decrypt with that key, through
    Secrets Manager only. ``hook_objects``: the ``s3://`` scripts of the groups' hooks, each readable alone."""
    statements: list[dict[str, Any]] = [
        {"Sid": "ReadTheMungeKey", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": secret_arn},
        {"Sid": "FetchTheNodePackage", "Effect": "Allow", "Action": "s3:GetObject", "Resource": bundle_arn},
        {"Sid": "ReadOwnLaunchsNodeMap", "Effect": "Allow", "Action": "s3:GetObject", "Resource": node_maps_arn},
    ]
    if users_arn is not None:
        statements.append(users_statement(users_arn))
    if kms_key_arn is not None:
        statements.append(_via_secrets_manager("DecryptTheMungeKey", ["kms:Decrypt"], kms_key_arn, region))
    if hook_objects:
        partition = bundle_arn.split(":")[1]
        arns = sorted({f"arn:{partition}:s3:::{uri.removeprefix('s3://')}" for uri in hook_objects})
        statements.append({"Sid": "FetchTheHooks", "Effect": "Allow", "Action": "s3:GetObject", "Resource": arns})
    return {"Version": "2012-10-17", "Statement": statements}


def _via_secrets_manager(sid: str, actions: list[str], kms_key_arn: str, region: str) -> dict[str, Any]:
    return {
        "Sid": sid,
        "Effect": "Allow",
        "Action": actions,
        "Resource": kms_key_arn,
        "Condition": {"StringEquals": {"kms:ViaService": f"secretsmanager.{region}.amazonaws.com"}},
    }


def site_munge_policy(*, secret_arn: str, kms_key_arn: str, region: str) -> dict[str, Any]:
    """A hybrid site's controller: write its munge key into the cluster's secret (and read it back to check);
    encrypt and decrypt with the secret's key through Secrets Manager only. Cloud nodes only read it."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "WriteTheSitesMungeKey",
                "Effect": "Allow",
                "Action": ["secretsmanager:PutSecretValue", "secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                "Resource": secret_arn,
            },
            _via_secrets_manager("EncryptTheMungeKey", ["kms:GenerateDataKey", "kms:Decrypt"], kms_key_arn, region),
        ],
    }


def roles_anywhere_trust_policy(*, trust_anchor_arn: str, certificate_cn: str) -> str:
    """Trust for IAM Roles Anywhere: only sessions from certificates the ``trust_anchor_arn`` anchor issued whose
    subject CN is ``certificate_cn``."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "rolesanywhere.amazonaws.com"},
                    "Action": ["sts:AssumeRole", "sts:TagSession", "sts:SetSourceIdentity"],
                    "Condition": {
                        "ArnEquals": {"aws:SourceArn": trust_anchor_arn},
                        "StringEquals": {"aws:PrincipalTag/x509Subject/CN": certificate_cn},
                    },
                }
            ],
        }
    )


def pod_identity_trust_policy(*, account: str, cluster_arn: str, namespace: str, service_account: str) -> str:
    """Trust for an EKS Pod Identity role: the Pod Identity service of this account only (``aws:SourceAccount``),
    for one service account of one cluster (the session tags EKS sets: ``eks-cluster-arn``,
    ``kubernetes-namespace``, ``kubernetes-service-account``)."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "pods.eks.amazonaws.com"},
                    "Action": ["sts:AssumeRole", "sts:TagSession"],
                    "Condition": {
                        "StringEquals": {
                            "aws:SourceAccount": account,
                            "aws:RequestTag/eks-cluster-arn": cluster_arn,
                            "aws:RequestTag/kubernetes-namespace": namespace,
                            "aws:RequestTag/kubernetes-service-account": service_account,
                        }
                    },
                }
            ],
        }
    )


def ssm_hybrid_trust_policy(*, partition: str, region: str, account: str) -> str:
    """Trust for an SSM hybrid activation's service role: Systems Manager of this account and region only."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "ssm.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                    "Condition": {
                        "StringEquals": {"aws:SourceAccount": account},
                        "ArnLike": {"aws:SourceArn": f"arn:{partition}:ssm:{region}:{account}:*"},
                    },
                }
            ],
        }
    )


def spot_queue_policy(queue_arn: str, rule_arn: str) -> dict[str, Any]:
    """The spot warnings queue (``components/slurm/_spot_events.py``): only the rule may send (EventBridge, from that
    rule's ARN); nothing over plain HTTP.

    The Allow alone does not make the queue the rule's: a principal of the account whose identity policy grants
    ``sqs:SendMessage`` (an administrator, a CI role, any ``sqs:*`` function) could still send, and a forged
    interruption warning powers a node down. So every sender is denied unless the request comes from the rule
    (``aws:SourceArn``, which EventBridge sets and a direct caller's request lacks: ``ArnNotEquals`` is true for a
    missing key)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "OnlyTheClustersRule",
                "Effect": "Allow",
                "Principal": {"Service": "events.amazonaws.com"},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {"ArnEquals": {"aws:SourceArn": rule_arn}},
            },
            {
                "Sid": "NoSenderButTheRule",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {"ArnNotEquals": {"aws:SourceArn": rule_arn}},
            },
            {
                "Sid": "TlsOnly",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "sqs:*",
                "Resource": queue_arn,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
        ],
    }


def spot_reader_policy(queue_arn: str) -> dict[str, Any]:
    """The head node's role on the spot warnings queue: receive and delete on this queue only."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ReadSpotWarnings",
                "Effect": "Allow",
                "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage"],
                "Resource": queue_arn,
            }
        ],
    }
