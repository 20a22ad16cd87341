"""The Slurm node agent's IAM policy: on the head node's role, and on a hybrid site's role (the same document).

The agent launches with one call, CreateFleet (type ``instant``), from a dynamic group's launch template, with
instance type, subnet and placement group overrides, tagging the instances with the cluster, node group and launch
token (``gpucluster_agents.power.ec2.fleet_request``). EC2 authorizes that call twice:

- CreateFleet, on the fleet, the launch template and the resources the *request* names (the instances it tags,
  the override's subnet and placement group…). The service authorization reference: "Resource-level permissions
  for this action do not include the resources specified in a launch template".
- RunInstances, which an instant fleet launches under the caller's own permissions, once per resource the launch
  reads or creates: the instance, each volume and network interface, the subnet, each security group, the image,
  the launch template, the placement group, a capacity reservation, the key pair.

So RunInstances is granted per resource type, never on ``*``:

- **instance**: only from the cluster's launch templates (``ec2:LaunchTemplate``), tagged in the request as the
  cluster's and a dynamic group's (``aws:RequestTag``), only of the dynamic groups' instance types
  (``ec2:InstanceType``), with IMDSv2 required (``ec2:MetadataHttpTokens``) and the compute nodes' instance profile
  (``ec2:InstanceProfile``);
- **volume** and **network interface**: tagged as the cluster's and a dynamic group's (the templates tag both); an
  interface only in the cluster's subnets (``ec2:Subnet``);
- **subnet** and **security group**: only the cluster's own, by ARN;
- an **image** that does not come from the template is denied outright; the launch template, placement groups,
  capacity reservations, key pairs and snapshots by type (a launch reaches them only with an instance the first
  statement allows, which names the template).

Each list of templates, subnets and security groups appears as few times as the rules need: IAM holds a role's
inline policies to 10,240 characters together (whitespace aside), which with one subnet per group leaves room for
about nine dynamic groups; the policy rule ``iam-inline-policy-size`` (``gpucluster policy``) checks every role of
a plan against that quota.

What IAM cannot limit: ``UserData``. Whoever holds this role (root or ``slurm`` on the head node, a hybrid site's
controller) can launch the cluster's instances with user data of their own: EC2 has no condition key for it, and
an override wins over the template's. Such an instance is still the cluster's (tagged, in its subnets and security
groups, IMDSv2, the compute role), so the agent lists it and its catch-all terminates it once it is older than
``orphan_grace_seconds`` without a node's name (the same role may tag one); but its first boot runs that user data
as root with the compute nodes' role (the munge key). Holding these credentials is holding the compute nodes: they
are guarded as such (the IMDS guard; ``docs/iam.md``, "The node agent's launches").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from gpucluster.config.naming import CLUSTER_TAG, NODE_GROUP_TAG, NODE_NAME_TAG
from gpucluster.render.iam import policy_json
from gpucluster_agents.contract import TAG_LAUNCH_TOKEN

# What a launch reads besides the instance, volumes, interfaces, subnets, security groups, the image and
# snapshots, granted by type: a launch reaches them only with an instance LaunchOnlyTheClustersInstances allows.
FROM_THE_TEMPLATE = ("launch-template", "placement-group", "capacity-reservation", "key-pair")
# What a CreateFleet request may name besides the fleet, the templates and the instances, by type.
FLEET_NAMES = (
    "volume",
    "network-interface",
    "subnet",
    "security-group",
    "placement-group",
    "capacity-reservation",
    "key-pair",
    "spot-instances-request",
)


@dataclass(frozen=True)
class LaunchScope:
    """What the agent may launch, as plain values (ids, not ARNs): the dynamic groups' names, instance types and
    launch templates, the subnets and security groups their instances use, and the compute nodes' role and
    instance profile. An empty ``groups`` is a cluster whose agent launches nothing (static groups only)."""

    partition: str
    region: str
    account: str
    cluster: str
    groups: tuple[str, ...]
    instance_types: tuple[str, ...]
    launch_template_ids: tuple[str, ...]
    subnet_ids: tuple[str, ...]
    security_group_ids: tuple[str, ...]
    node_role_arn: str
    node_profile_arn: str

    def arn(self, kind: str, ident: str = "*") -> str:
        return f"arn:{self.partition}:ec2:{self.region}:{self.account}:{kind}/{ident}"

    @property
    def templates(self) -> list[str]:
        return [self.arn("launch-template", lt) for lt in self.launch_template_ids]

    @property
    def image(self) -> str:
        return f"arn:{self.partition}:ec2:{self.region}::image/*"

    @property
    def snapshot(self) -> str:
        return f"arn:{self.partition}:ec2:{self.region}::snapshot/*"

    @property
    def network(self) -> list[str]:
        """The cluster's subnets and security groups, by ARN."""
        return [self.arn("subnet", s) for s in _unique(self.subnet_ids)] + [
            self.arn("security-group", g) for g in _unique(self.security_group_ids)
        ]


def _unique(values: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _tagged(scope: LaunchScope) -> dict[str, Any]:
    return {f"aws:RequestTag/{CLUSTER_TAG}": scope.cluster, f"aws:RequestTag/{NODE_GROUP_TAG}": list(scope.groups)}


def _run(sid: str, resource: str | list[str], condition: dict[str, Any] | None = None) -> dict[str, Any]:
    st: dict[str, Any] = {"Sid": sid, "Effect": "Allow", "Action": "ec2:RunInstances", "Resource": resource}
    return {**st, "Condition": condition} if condition else st


def launch_statements(scope: LaunchScope) -> list[dict[str, Any]]:
    """RunInstances, per resource type (the launch an instant fleet makes under the caller's rights).

    Only the instance statement names the templates (``ec2:LaunchTemplate``): every resource of a launch is
    authorized for the same call, and a call is refused unless all of them are allowed, so a launch whose instance
    does not come from a cluster template gets nowhere with the other statements. Naming the templates once keeps
    the document inside IAM's 10,240 characters of inline policy per role with many dynamic groups."""
    subnets = [scope.arn("subnet", s) for s in _unique(scope.subnet_ids)]
    return [
        _run(
            "LaunchOnlyTheClustersInstances",
            scope.arn("instance"),
            {
                "ArnLike": {"ec2:LaunchTemplate": scope.templates},
                "StringEquals": {
                    **_tagged(scope),
                    "ec2:InstanceType": _unique(scope.instance_types),
                    "ec2:MetadataHttpTokens": "required",
                },
                "ArnEquals": {"ec2:InstanceProfile": scope.node_profile_arn},
            },
        ),
        _run("LaunchVolumesTaggedAsTheClusters", scope.arn("volume"), {"StringEquals": _tagged(scope)}),
        _run(
            "LaunchInterfacesInTheClustersSubnets",
            scope.arn("network-interface"),
            {"StringEquals": _tagged(scope), "ArnEquals": {"ec2:Subnet": subnets}},
        ),
        _run("LaunchIntoTheClustersSubnetsAndSecurityGroups", scope.network),
        # The template resource is the one the instance names in ec2:LaunchTemplate: pinned there.
        _run("LaunchFromTheTemplates", [scope.image, scope.snapshot, *(scope.arn(kind) for kind in FROM_THE_TEMPLATE)]),
        # Capacity Blocks and reservation groups: the group resource has no condition keys at all.
        _run("LaunchIntoCapacityGroups", f"arn:{scope.partition}:resource-groups:{scope.region}:{scope.account}:group/*"),
        {
            # The agent overrides instance type, subnet and placement group, never the AMI: an image that does
            # not come from the template is refused. A Bool on false matches only when EC2 sets the key.
            "Sid": "NoOtherImageThanTheTemplates",
            "Effect": "Deny",
            "Action": "ec2:RunInstances",
            "Resource": scope.image,
            "Condition": {"Bool": {"ec2:IsLaunchTemplateResource": "false"}},
        },
    ]


def fleet_statements(scope: LaunchScope) -> list[dict[str, Any]]:
    """CreateFleet: the fleet, the templates, the instances it tags and what its overrides name."""
    return [
        {
            # The fleet record itself (the agent does not tag it) and the templates it may name.
            "Sid": "InstantFleetsFromTheClustersTemplates",
            "Effect": "Allow",
            "Action": "ec2:CreateFleet",
            "Resource": [scope.arn("fleet"), *scope.templates],
        },
        {
            # Every instance a fleet makes is tagged in the request as the cluster's, of a dynamic group: what
            # TerminateOnlyDynamicNodes later matches.
            "Sid": "InstantFleetInstancesAreTheClusters",
            "Effect": "Allow",
            "Action": "ec2:CreateFleet",
            "Resource": scope.arn("instance"),
            "Condition": {"StringEquals": _tagged(scope)},
        },
        {
            # What a fleet request names besides the instance, by type: the launch it makes is RunInstances, whose
            # statements above hold the subnets, security groups and everything else to the cluster's.
            "Sid": "InstantFleetLaunchResources",
            "Effect": "Allow",
            "Action": "ec2:CreateFleet",
            "Resource": [
                *(scope.arn(kind) for kind in FLEET_NAMES),
                scope.image,
                scope.snapshot,
                f"arn:{scope.partition}:resource-groups:{scope.region}:{scope.account}:group/*",
            ],
        },
        {
            "Sid": "TagWhileLaunching",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": [scope.arn("instance"), scope.arn("volume"), scope.arn("network-interface")],
            "Condition": {"StringEquals": {"ec2:CreateAction": ["RunInstances", "CreateFleet"]}},
        },
    ]


def terminate_statements(scope: LaunchScope) -> list[dict[str, Any]]:
    instances = scope.arn("instance")
    return [
        {
            "Sid": "TerminateOnlyDynamicNodes",
            "Effect": "Allow",
            "Action": "ec2:TerminateInstances",
            "Resource": instances,
            "Condition": {
                "StringEquals": {
                    f"ec2:ResourceTag/{CLUSTER_TAG}": scope.cluster,
                    f"ec2:ResourceTag/{NODE_GROUP_TAG}": list(scope.groups),
                }
            },
        },
        {
            # Instances the agent launched for a group the config has since removed or renamed: only its
            # CreateFleet sets the launch-token tag (CreateTags may add only node-name and Name).
            "Sid": "TerminateStraysTheAgentLaunched",
            "Effect": "Allow",
            "Action": "ec2:TerminateInstances",
            "Resource": instances,
            "Condition": {
                "StringEquals": {f"ec2:ResourceTag/{CLUSTER_TAG}": scope.cluster},
                "Null": {f"ec2:ResourceTag/{TAG_LAUNCH_TOKEN}": "false"},
            },
        },
    ]


def slurm_agent_policy(scope: LaunchScope) -> dict[str, Any]:
    """The node agent's IAM policy (the calls ``gpucluster_agents`` makes, and no more).

    - Launch: CreateFleet and RunInstances as the module says (only with dynamic groups).
    - CreateTags while launching (``ec2:CreateAction``), and afterwards only the node-name and Name tags on the
      cluster's instances.
    - TerminateInstances only on the cluster's instances of its *dynamic* node groups, or that the agent launched
      (launch-token tag: strays of removed groups): never the head node, never a static group's.
    - RebootInstances on the cluster's compute nodes (node-group tag) and SetInstanceHealth on the cluster's Auto
      Scaling groups: the repair pass's reboot and static replacement.
    - Describe calls (no resource-level permissions exist for them).
    - PassRole for the compute nodes' role, to EC2 only.
    """
    p, r, a = scope.partition, scope.region, scope.account
    instances = scope.arn("instance")
    launching = bool(scope.groups)
    statements: list[dict[str, Any]] = []
    if launching:
        statements += launch_statements(scope) + fleet_statements(scope)
    statements.append(
        {
            "Sid": "NameTheClustersInstances",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": instances,
            "Condition": {
                "StringEquals": {f"ec2:ResourceTag/{CLUSTER_TAG}": scope.cluster},
                "ForAllValues:StringEquals": {"aws:TagKeys": [NODE_NAME_TAG, "Name"]},
            },
        }
    )
    if launching:
        statements += terminate_statements(scope)
    statements += [
        {
            # The repair pass (gpucluster_agents/repair/quarantine.py): one reboot for a reboot-class GPU fault, on the
            # cluster's compute nodes only (the node-group tag: never the head node).
            "Sid": "RebootTheClustersComputeNodes",
            "Effect": "Allow",
            "Action": "ec2:RebootInstances",
            "Resource": instances,
            "Condition": {
                "StringEquals": {f"ec2:ResourceTag/{CLUSTER_TAG}": scope.cluster},
                "Null": {f"ec2:ResourceTag/{NODE_GROUP_TAG}": "false"},
            },
        },
        {
            # A static node with a replace-class fault: its Auto Scaling group (tagged with the cluster) replaces it.
            "Sid": "MarkStaticNodesUnhealthy",
            "Effect": "Allow",
            "Action": "autoscaling:SetInstanceHealth",
            "Resource": f"arn:{p}:autoscaling:{r}:{a}:autoScalingGroup:*:autoScalingGroupName/*",
            "Condition": {"StringEquals": {f"autoscaling:ResourceTag/{CLUSTER_TAG}": scope.cluster}},
        },
        {
            "Sid": "Describe",
            "Effect": "Allow",
            # DescribeLaunchTemplateVersions: the version and image a group's nodes should run (power/roll.py)
            "Action": ["ec2:DescribeInstances", "ec2:DescribeInstanceTopology", "ec2:DescribeLaunchTemplateVersions"],
            "Resource": "*",
        },
    ]
    if launching:
        statements.append(
            {
                "Sid": "PassTheNodeRoleToEc2",
                "Effect": "Allow",
                "Action": "iam:PassRole",
                "Resource": scope.node_role_arn,
                "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


@dataclass(frozen=True)
class LaunchRights:
    """:class:`LaunchScope`'s values as the components hold them (Outputs allowed), for the dynamic groups the
    agent launches: same order in ``groups``, ``instance_types`` and ``launch_template_ids``."""

    groups: tuple[str, ...]
    instance_types: tuple[str, ...]
    launch_template_ids: tuple[pulumi.Input[str], ...]
    subnet_ids: tuple[pulumi.Input[Sequence[pulumi.Input[str]]], ...]
    """Each dynamic group's subnets (the agent's overrides)."""
    security_group_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    """The security groups of the groups' launch templates."""
    node_role_arn: pulumi.Input[str]
    node_profile_arn: pulumi.Input[str]


def agent_policy_json(
    rights: LaunchRights, *, cluster: str, region: str, partition: pulumi.Input[str], account: pulumi.Input[str]
) -> pulumi.Output[str]:
    """:func:`slurm_agent_policy` of ``rights`` once AWS has made them, as the role policy's text."""
    values = pulumi.Output.all(
        partition,
        account,
        pulumi.Output.all(*rights.launch_template_ids),
        pulumi.Output.all(*[pulumi.Output.from_input(s) for s in rights.subnet_ids]),
        pulumi.Output.from_input(rights.security_group_ids),
        rights.node_role_arn,
        rights.node_profile_arn,
    )

    def document(v: list[Any]) -> str:
        scope = LaunchScope(
            partition=str(v[0]),
            region=region,
            account=str(v[1]),
            cluster=cluster,
            groups=rights.groups,
            instance_types=rights.instance_types,
            launch_template_ids=tuple(str(t) for t in v[2]),
            subnet_ids=tuple(str(s) for group in v[3] for s in group),
            security_group_ids=tuple(str(g) for g in v[4]),
            node_role_arn=str(v[5]),
            node_profile_arn=str(v[6]),
        )
        return policy_json(slurm_agent_policy(scope))

    return values.apply(document)
