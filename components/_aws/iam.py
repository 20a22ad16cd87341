"""The IAM documents components write, in one place so they can be read and reviewed together.

Trust policies of the service roles every component creates, and the Slurm cluster's permission
policies: the node agent's EC2 rights on the head node, the head node's own needs, the compute nodes'.
Pure functions: plain values in, the policy document out; the components resolve the ARNs and attach.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gpucluster.config.naming import CLUSTER_TAG, NODE_GROUP_TAG, NODE_NAME_TAG
from gpucluster_agents.contract import TAG_LAUNCH_TOKEN


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


def slurm_agent_policy(
    *,
    partition: str,
    region: str,
    account: str,
    cluster: str,
    launch_template_ids: Sequence[str],
    dynamic_groups: Sequence[str],
    node_role_arn: str,
) -> dict[str, Any]:
    """The Slurm node agent's IAM policy, on the head node's role (the calls gpucluster_agents makes, and
    no more).

    The agent launches with one call, CreateFleet (type ``instant``), from a group's launch template
    with instance type, subnet and placement group overrides, tagging the instances (and only them)
    with the cluster, node group and launch token (gpucluster_agents.ec2.fleet_request). IAM
    authorizes that call on the fleet, on the launch template and on every resource the launch reads
    or creates; an instant fleet then launches under the caller's own RunInstances permission.

    - RunInstances only from the cluster's launch templates (``ec2:LaunchTemplate``: AWS's pattern for
      "launch only from this template"), and never with an AMI other than the template's
      (``ec2:IsLaunchTemplateResource`` false on the image is denied).
    - CreateFleet on ``fleet/*`` of this account and region and on the cluster's launch templates
      only; the instances it makes must carry the cluster's tag and a dynamic group's tag
      (``aws:RequestTag``); the other resources a launch touches (volumes, interfaces, subnets,
      security groups, the AMI, placement groups, reservations) are named by type, region and account.
    - CreateTags while launching (``ec2:CreateAction``), and afterwards only the node-name and Name tags
      on the cluster's instances.
    - TerminateInstances only on the cluster's instances of its *dynamic* node groups, or that the agent
      launched (launch-token tag: strays of removed groups): never the head node, never a static
      group's (its Auto Scaling group owns them).
    - RebootInstances on the cluster's compute nodes (node-group tag) and SetInstanceHealth on the cluster's
      Auto Scaling groups: the repair pass's reboot and static replacement.
    - Describe calls (no resource-level permissions exist for them).
    - PassRole for the compute nodes' role, to EC2 only.
    """
    arn = f"arn:{partition}:ec2:{region}:{account}"
    instances = f"{arn}:instance/*"
    templates = [f"{arn}:launch-template/{lt}" for lt in launch_template_ids]
    image = f"arn:{partition}:ec2:{region}::image/*"
    statements: list[dict[str, Any]] = []
    if dynamic_groups:
        statements += [
            {
                # RunInstances touches many resource types (instance, volume, interface, subnet, …):
                # "*" with the template condition is AWS's documented way to pin all of them.
                "Sid": "LaunchOnlyFromTheClustersTemplates",
                "Effect": "Allow",
                "Action": "ec2:RunInstances",
                "Resource": "*",
                "Condition": {"ArnLike": {"ec2:LaunchTemplate": templates}},
            },
            {
                # The agent overrides instance type, subnet and placement group, never the AMI: an
                # image that does not come from the template is refused. A Bool on false matches only
                # when EC2 sets the key (launches from a template), so other calls are unaffected.
                "Sid": "NoOtherImageThanTheTemplates",
                "Effect": "Deny",
                "Action": "ec2:RunInstances",
                "Resource": image,
                "Condition": {"Bool": {"ec2:IsLaunchTemplateResource": "false"}},
            },
            {
                # The fleet record itself (the agent does not tag it) and the templates it may name:
                # a fleet from any other template fails on the template resource.
                "Sid": "InstantFleetsFromTheClustersTemplates",
                "Effect": "Allow",
                "Action": "ec2:CreateFleet",
                "Resource": [f"{arn}:fleet/*", *templates],
            },
            {
                # Every instance a fleet makes is tagged in the request as the cluster's, of a dynamic
                # group: what TerminateOnlyDynamicNodes later matches.
                "Sid": "InstantFleetInstancesAreTheClusters",
                "Effect": "Allow",
                "Action": "ec2:CreateFleet",
                "Resource": instances,
                "Condition": {
                    "StringEquals": {
                        f"aws:RequestTag/{CLUSTER_TAG}": cluster,
                        f"aws:RequestTag/{NODE_GROUP_TAG}": list(dynamic_groups),
                    }
                },
            },
            {
                # What a launch reads or creates besides the instance. None of these lets a fleet
                # launch: the fleet, template and instance statements above must also allow it.
                "Sid": "InstantFleetLaunchResources",
                "Effect": "Allow",
                "Action": "ec2:CreateFleet",
                "Resource": [
                    f"{arn}:{kind}/*"
                    for kind in (
                        "volume",
                        "network-interface",
                        "subnet",
                        "security-group",
                        "placement-group",
                        "capacity-reservation",
                        "key-pair",
                        "spot-instances-request",
                    )
                ]
                + [
                    image,
                    f"arn:{partition}:ec2:{region}::snapshot/*",
                    f"arn:{partition}:resource-groups:{region}:{account}:group/*",
                ],
            },
            {
                "Sid": "TagWhileLaunching",
                "Effect": "Allow",
                "Action": "ec2:CreateTags",
                "Resource": [instances, f"{arn}:volume/*", f"{arn}:network-interface/*"],
                "Condition": {"StringEquals": {"ec2:CreateAction": ["RunInstances", "CreateFleet"]}},
            },
        ]
    statements += [
        {
            "Sid": "NameTheClustersInstances",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": instances,
            "Condition": {
                "StringEquals": {f"ec2:ResourceTag/{CLUSTER_TAG}": cluster},
                "ForAllValues:StringEquals": {"aws:TagKeys": [NODE_NAME_TAG, "Name"]},
            },
        },
    ]
    if dynamic_groups:
        statements += [
            {
                "Sid": "TerminateOnlyDynamicNodes",
                "Effect": "Allow",
                "Action": "ec2:TerminateInstances",
                "Resource": instances,
                "Condition": {
                    "StringEquals": {
                        f"ec2:ResourceTag/{CLUSTER_TAG}": cluster,
                        f"ec2:ResourceTag/{NODE_GROUP_TAG}": list(dynamic_groups),
                    }
                },
            },
            {
                # Instances the agent launched for a group the config has since removed or renamed: only
                # its CreateFleet sets the launch-token tag (CreateTags may add only node-name and Name).
                "Sid": "TerminateStraysTheAgentLaunched",
                "Effect": "Allow",
                "Action": "ec2:TerminateInstances",
                "Resource": instances,
                "Condition": {
                    "StringEquals": {f"ec2:ResourceTag/{CLUSTER_TAG}": cluster},
                    "Null": {f"ec2:ResourceTag/{TAG_LAUNCH_TOKEN}": "false"},
                },
            },
        ]
    statements += [
        {
            # The repair pass (gpucluster_agents/quarantine.py): one reboot for a reboot-class GPU fault, on the
            # cluster's compute nodes only (the node-group tag: never the head node).
            "Sid": "RebootTheClustersComputeNodes",
            "Effect": "Allow",
            "Action": "ec2:RebootInstances",
            "Resource": instances,
            "Condition": {
                "StringEquals": {f"ec2:ResourceTag/{CLUSTER_TAG}": cluster},
                "Null": {f"ec2:ResourceTag/{NODE_GROUP_TAG}": "false"},
            },
        },
        {
            # A static node with a replace-class fault: its Auto Scaling group (tagged with the cluster) replaces it.
            "Sid": "MarkStaticNodesUnhealthy",
            "Effect": "Allow",
            "Action": "autoscaling:SetInstanceHealth",
            "Resource": f"arn:{partition}:autoscaling:{region}:{account}:autoScalingGroup:*:autoScalingGroupName/*",
            "Condition": {"StringEquals": {f"autoscaling:ResourceTag/{CLUSTER_TAG}": cluster}},
        },
    ]
    statements.append(
        {
            "Sid": "Describe",
            "Effect": "Allow",
            "Action": ["ec2:DescribeInstances", "ec2:DescribeInstanceTopology"],
            "Resource": "*",
        }
    )
    if dynamic_groups:
        statements.append(
            {
                "Sid": "PassTheNodeRoleToEc2",
                "Effect": "Allow",
                "Action": "iam:PassRole",
                "Resource": node_role_arn,
                "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def slurm_head_policy(*, secret_arn: str, bundle_arn: str, node_maps_arn: str) -> dict[str, Any]:
    """The Slurm head node's own needs: make and read the munge key, fetch the agent package, publish the
    launches' node maps (one object per CreateFleet batch, ``gpucluster_agents/nodemap.py``) and read them back
    when its own record of the node names is lost (``gpucluster_agents/names.py``: an instance a map names is
    never taken for an orphan). No s3:ListBucket: the agent reads a map by its launch token, as a node does."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "MakeAndReadTheMungeKey",
                "Effect": "Allow",
                "Action": ["secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue", "secretsmanager:DescribeSecret"],
                "Resource": secret_arn,
            },
            {"Sid": "FetchTheAgentPackage", "Effect": "Allow", "Action": "s3:GetObject", "Resource": bundle_arn},
            {"Sid": "PublishNodeMaps", "Effect": "Allow", "Action": "s3:PutObject", "Resource": node_maps_arn},
            {"Sid": "ReadNodeMapsBack", "Effect": "Allow", "Action": "s3:GetObject", "Resource": node_maps_arn},
        ],
    }


def slurm_node_policy(
    *, secret_arn: str, bundle_arn: str, node_maps_arn: str, kms_key_arn: str | None = None, region: str = ""
) -> dict[str, Any]:
    """The Slurm compute nodes' role: read the munge key, fetch the node package (the health program) and read
    node maps by their key; nothing else (plus Session Manager). No s3:ListBucket: a node reads only the map
    whose random launch token its own tags hold (and S3 answers 403, not 404, for a map not written yet). With
    ``kms_key_arn`` (a hybrid site's munge secret is under a key of its own) also decrypt with that key, through
    Secrets Manager only."""
    statements: list[dict[str, Any]] = [
        {"Sid": "ReadTheMungeKey", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": secret_arn},
        {"Sid": "FetchTheNodePackage", "Effect": "Allow", "Action": "s3:GetObject", "Resource": bundle_arn},
        {"Sid": "ReadOwnLaunchsNodeMap", "Effect": "Allow", "Action": "s3:GetObject", "Resource": node_maps_arn},
    ]
    if kms_key_arn is not None:
        statements.append(_via_secrets_manager("DecryptTheMungeKey", ["kms:Decrypt"], kms_key_arn, region))
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
