"""The authorization contexts EC2 evaluates for the node agent's launches, built from the agent's own request and
the launch template the plan creates: the model the IAM tests state, for the offline evaluator
(:mod:`gpucluster.policy.iam_eval`).

The model (from the service authorization reference's RunInstances and CreateFleet tables; AWS's own evaluator is
not available offline, so this is what the tests assume, not what they prove):

- CreateFleet is authorized on the fleet, the launch template and what the request itself names: the instances
  (with the request's instance tags and type), each override's subnet and placement group. Resources the template
  names are not part of it.
- An instant fleet then launches each override with RunInstances under the caller's own rights, authorized once per
  resource: the instance (its tags are the template's instance tags with the request's on top; its type, instance
  profile and IMDS setting), each volume and network interface the template makes (with the template's tags for
  them; an interface with the subnet it lands in), the subnet, each security group, the image, the template, the
  placement group, a targeted capacity reservation, the key pair. ``ec2:LaunchTemplate`` is on every one of them,
  ``ec2:IsLaunchTemplateResource`` says whether the value came from the template.
- Tags in a launch template count as request tags (tag-based policies on RunInstances work with templates that tag).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpucluster.policy.iam_eval import Request


@dataclass(frozen=True)
class Arns:
    partition: str = "aws"
    region: str = "us-east-1"
    account: str = "123456789012"

    def ec2(self, kind: str, ident: str) -> str:
        return f"arn:{self.partition}:ec2:{self.region}:{self.account}:{kind}/{ident}"

    def image(self, ident: str) -> str:
        return f"arn:{self.partition}:ec2:{self.region}::image/{ident}"


@dataclass(frozen=True)
class Template:
    """What a launch template holds that a launch's authorization reads (from the plan's LaunchTemplate inputs)."""

    id: str
    image_id: str
    profile_arn: str | None
    security_groups: tuple[str, ...]
    http_tokens: str | None
    tags: Mapping[str, Mapping[str, str]]
    volumes: int
    interfaces: int
    key_name: str | None = None
    placement_group: str | None = None
    reservation_id: str | None = None

    @classmethod
    def from_inputs(cls, template_id: str, inputs: Mapping[str, Any]) -> Template:
        nics = list(inputs.get("networkInterfaces") or [])
        groups = tuple(dict.fromkeys(sg for n in nics for sg in n.get("securityGroups") or []))
        target = (inputs.get("capacityReservationSpecification") or {}).get("capacityReservationTarget") or {}
        return cls(
            id=template_id,
            image_id=str(inputs["imageId"]),
            profile_arn=(inputs.get("iamInstanceProfile") or {}).get("arn"),
            security_groups=groups or tuple(inputs.get("vpcSecurityGroupIds") or ()),
            http_tokens=(inputs.get("metadataOptions") or {}).get("httpTokens"),
            tags={t["resourceType"]: dict(t.get("tags") or {}) for t in inputs.get("tagSpecifications") or []},
            volumes=len(inputs.get("blockDeviceMappings") or []),
            interfaces=max(1, len(nics)),
            key_name=inputs.get("keyName"),
            placement_group=(inputs.get("placement") or {}).get("groupName"),
            reservation_id=target.get("capacityReservationId"),
        )


@dataclass(frozen=True)
class Launch:
    """One RunInstances: what the caller asks for on top of (or, ``template=None``, without) a launch template."""

    template: Template | None
    instance_type: str
    subnet: str
    tags: Mapping[str, str] = field(default_factory=lambda: {})
    placement_group: str | None = None
    # Overrides of what the template says (None: the template's value).
    security_groups: Sequence[str] | None = None
    http_tokens: str | None = None
    profile_arn: str | None = None
    image_id: str | None = None


def _tag_keys(tags: Mapping[str, str]) -> dict[str, Any]:
    return {**{f"aws:RequestTag/{k}": v for k, v in tags.items()}, "aws:TagKeys": list(tags)}


def run_instances(launch: Launch, arns: Arns = Arns()) -> list[Request]:
    """The RunInstances authorization contexts of ``launch``, one per resource."""
    t = launch.template
    base: dict[str, Any] = {"ec2:Region": arns.region}
    if t is not None:
        base["ec2:LaunchTemplate"] = arns.ec2("launch-template", t.id)

    def ctx(resource: str, from_template: bool, **keys: Any) -> Request:
        more = {"ec2:IsLaunchTemplateResource": from_template} if t is not None else {}
        return Request("ec2:RunInstances", resource, {**base, **more, **keys})

    template_tags = (lambda kind: dict(t.tags.get(kind, {}))) if t is not None else (lambda kind: {})
    instance_tags = {**template_tags("instance"), **launch.tags}
    tokens = launch.http_tokens or (t.http_tokens if t else None)
    profile = launch.profile_arn or (t.profile_arn if t else None)
    image = launch.image_id or (t.image_id if t else "ami-0000000000000000")
    instance_keys: dict[str, Any] = {**_tag_keys(instance_tags), "ec2:InstanceType": launch.instance_type}
    if tokens:
        instance_keys["ec2:MetadataHttpTokens"] = tokens
    if profile:
        instance_keys["ec2:InstanceProfile"] = profile
    out = [ctx(arns.ec2("instance", "*"), False, **instance_keys)]
    volumes, interfaces = (t.volumes, t.interfaces) if t else (1, 1)
    out += [ctx(arns.ec2("volume", "*"), t is not None, **_tag_keys(template_tags("volume"))) for _ in range(volumes)]
    subnet = arns.ec2("subnet", launch.subnet)
    out += [
        ctx(
            arns.ec2("network-interface", "*"),
            t is not None,
            **_tag_keys(template_tags("network-interface")),
            **{"ec2:Subnet": subnet},
        )
        for _ in range(interfaces)
    ]
    out.append(ctx(subnet, False))
    groups = launch.security_groups if launch.security_groups is not None else (t.security_groups if t else ())
    out += [ctx(arns.ec2("security-group", g), launch.security_groups is None) for g in groups]
    out.append(ctx(arns.image(image), launch.image_id is None and t is not None))
    if t is not None:
        out.append(ctx(arns.ec2("launch-template", t.id), True))
        if t.key_name:
            out.append(ctx(arns.ec2("key-pair", t.key_name), True))
        if t.reservation_id:
            out.append(ctx(arns.ec2("capacity-reservation", t.reservation_id), True))
    placement = launch.placement_group or (t.placement_group if t else None)
    if placement:
        out.append(ctx(arns.ec2("placement-group", placement), launch.placement_group is None))
    return out


def create_fleet(request: Mapping[str, Any], arns: Arns = Arns()) -> list[Request]:
    """The CreateFleet authorization contexts of the agent's request (``gpucluster_agents.power.ec2.fleet_request``)."""
    (config,) = request["LaunchTemplateConfigs"]
    template = config["LaunchTemplateSpecification"]["LaunchTemplateId"]
    tags = {
        t["Key"]: t["Value"] for spec in request["TagSpecifications"] if spec["ResourceType"] == "instance" for t in spec["Tags"]
    }
    out = [
        Request("ec2:CreateFleet", arns.ec2("fleet", "fleet-00000000-0000-0000-0000-000000000000"), {}),
        Request("ec2:CreateFleet", arns.ec2("launch-template", template), {}),
    ]
    for o in config["Overrides"]:
        out.append(
            Request("ec2:CreateFleet", arns.ec2("instance", "*"), {**_tag_keys(tags), "ec2:InstanceType": o["InstanceType"]})
        )
        out.append(Request("ec2:CreateFleet", arns.ec2("subnet", o["SubnetId"]), {}))
        if "Placement" in o:
            out.append(Request("ec2:CreateFleet", arns.ec2("placement-group", o["Placement"]["GroupName"]), {}))
    return out


def fleet_launches(request: Mapping[str, Any], template: Template) -> list[Launch]:
    """The RunInstances an instant fleet makes for the agent's request: one per override."""
    (config,) = request["LaunchTemplateConfigs"]
    assert config["LaunchTemplateSpecification"]["LaunchTemplateId"] == template.id
    tags = {
        t["Key"]: t["Value"] for spec in request["TagSpecifications"] if spec["ResourceType"] == "instance" for t in spec["Tags"]
    }
    return [
        Launch(template, o["InstanceType"], o["SubnetId"], tags, (o.get("Placement") or {}).get("GroupName"))
        for o in config["Overrides"]
    ]


def but(launch: Launch, **changes: Any) -> Launch:
    return replace(launch, **changes)
