"""The data-source invokes the offline plan answers, with the shapes AWS would return: the ones gpucluster's own
components make (partition, caller identity, region, availability zones, ``getInstanceType`` from the instance
catalog, SSM parameters, ``getVpc``) and the common look-ups a Pulumi user writes around them (``get_subnets``,
``get_subnet``, ``get_vpc``, ``get_security_group``, ``get_security_groups``, ``get_caller_identity``,
``get_region``, ``get_ami``, each also in its ``_output`` form, which makes the same invoke).

Every field of the pulumi-aws result type is present (a program may read any of them), inputs are echoed
back the way the provider echoes them (``filters``, ``tags``, ``owners``, …), and values are deterministic:
derived from the region and the invoke's arguments, so two plans of the same program are identical. The
answers agree with one another: a subnet ``get_subnets`` returned has the same zone, VPC and CIDR when
``get_subnet`` asks for it by id. :attr:`Lookups.stand_ins` says what each made-up id stands for, for the
text plan (:mod:`~gpucluster.tools.plan.run.placeholders`).

docs/plan.md lists what is answered; an invoke not listed here stops the plan with one line naming it
(:class:`UnansweredInvoke`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpucluster.facts.catalog import Catalog
from gpucluster.tools.plan.run.fakes import ACCOUNT, REGION_ZONES, digest, instance_type_result

REGION_NAMES = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-2": "US West (Oregon)",
    "eu-west-1": "Europe (Ireland)",
    "ap-northeast-1": "Asia Pacific (Tokyo)",
}
AMI_DATE = "2025-11-01"
"""The creation date of every AMI ``get_ami`` finds (a fixed day keeps plans identical)."""
DEFAULT_VPC_CIDR = "172.31.0.0/16"
"""The CIDR AWS gives a region's default VPC."""
VPC_CIDR = "10.0.0.0/16"
"""The CIDR of any other VPC looked up (``cidrBlock`` in the arguments wins)."""


class UnansweredInvoke(Exception):
    """The program made an invoke the offline plan does not answer: the plan stops with one line naming it."""

    def __init__(self, token: str, args: Mapping[str, Any]) -> None:
        self.token, self.invoke_args = token, dict(args)
        shown = json.dumps(self.invoke_args, sort_keys=True, default=str)
        super().__init__(
            f"the program calls the data source {short(token)} ({token}) with {shown[:300]}, which the offline plan "
            "does not answer; "
            f"it answers {', '.join(sorted(short(t) for t in ANSWERED))}. Pass the value in as config instead, "
            "or plan with `pulumi preview` against an AWS account"
        )


def short(token: str) -> str:
    """``aws:ec2/getSubnets:getSubnets`` → ``aws.ec2.get_subnets`` (how a Python program spells it)."""
    module, name = token.split(":")[1].split("/")[0], token.split(":")[-1]
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in name)
    return f"aws.{snake}" if module == "index" else f"aws.{module}.{snake}"


def _filters(args: Mapping[str, Any]) -> dict[str, list[str]]:
    """The ``filters`` argument as ``{name: values}``."""
    out: dict[str, list[str]] = {}
    for f in args.get("filters") or []:
        if isinstance(f, Mapping) and f.get("name"):
            out[str(f["name"])] = [str(v) for v in f.get("values") or []]
    return out


def _key(args: Mapping[str, Any]) -> str:
    return json.dumps(args, sort_keys=True, default=str)


@dataclass
class Lookups:
    """The invoke answers of one plan (its region, account and catalog), and what each made-up id stands for."""

    region: str
    catalog: Catalog
    account: str = ACCOUNT
    subnets: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Subnets handed out so far, by id, so ``get_subnet`` agrees with ``get_subnets``."""
    stand_ins: dict[str, str] = field(default_factory=dict)

    def answer(self, token: str, args: Mapping[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """``(result, failures)`` for ``token``; raises :class:`UnansweredInvoke` for a token not in :data:`ANSWERED`."""
        handler = ANSWERED.get(token)
        if handler is None:
            raise UnansweredInvoke(token, args)
        if token == "aws:ec2/getInstanceType:getInstanceType":
            facts = self.catalog.get(str(args.get("instanceType")))
            if facts is None:
                return {}, [("instanceType", f"InvalidInstanceType: {args.get('instanceType')}")]
        return handler(self, args), []

    # --- account and region -------------------------------------------------------------------------
    def zones(self) -> list[str]:
        return [f"{self.region}{c}" for c in REGION_ZONES.get(self.region, "abc")]

    def zone_id(self, zone: str) -> str:
        names = self.zones()
        index = names.index(zone) if zone in names else 0
        return f"{self.region.replace('-', '')[:3]}1-az{index + 1}"

    def partition(self, args: Mapping[str, Any]) -> dict[str, Any]:
        return {"id": "aws", "partition": "aws", "dnsSuffix": "amazonaws.com", "reverseDnsPrefix": "com.amazonaws"}

    def caller_identity(self, args: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "id": self.account,
            "accountId": self.account,
            "arn": f"arn:aws:iam::{self.account}:user/gpucluster-plan",
            "userId": "AIDA" + digest("plan", length=17).upper(),
        }

    def region_info(self, args: Mapping[str, Any]) -> dict[str, Any]:
        region = str(args.get("region") or args.get("name") or self.region)
        return {
            "id": region,
            "name": region,
            "region": region,
            "endpoint": f"ec2.{region}.amazonaws.com",
            "description": REGION_NAMES.get(region, region),
        }

    def availability_zones(self, args: Mapping[str, Any]) -> dict[str, Any]:
        names = self.zones()
        return {
            "id": self.region,
            "names": names,
            "zoneIds": [self.zone_id(z) for z in names],
            "groupNames": [self.region] * len(names),
        }

    def instance_type(self, args: Mapping[str, Any]) -> dict[str, Any]:
        return instance_type_result(self.catalog[str(args.get("instanceType"))])

    def ssm_parameter(self, args: Mapping[str, Any]) -> dict[str, Any]:
        name = str(args.get("name"))
        value = f"ami-{digest(self.region, name)}" if "ami" in name or "image" in name else f"value-of-{name}"
        return {
            "id": name,
            "name": name,
            "value": value,
            "insecureValue": value,
            "type": "String",
            "version": 1,
            "arn": f"arn:aws:ssm:{self.region}::parameter{name}",
        }

    # --- network ------------------------------------------------------------------------------------
    def vpc(self, args: Mapping[str, Any]) -> dict[str, Any]:
        filters = _filters(args)
        default = bool(args.get("default")) or filters.get("isDefault") == ["true"]
        given = args.get("id") or (filters.get("vpc-id") or [None])[0]
        vpc_id = str(given or f"vpc-{digest(self.region, 'default' if default else _key(args))}")
        cidr = str(args.get("cidrBlock") or (DEFAULT_VPC_CIDR if default else VPC_CIDR))
        if not given:
            self.stand_ins.setdefault(vpc_id, f"(the {'default ' if default else ''}VPC get_vpc finds)")
        return {
            "id": vpc_id,
            "arn": f"arn:aws:ec2:{self.region}:{self.account}:vpc/{vpc_id}",
            "cidrBlock": cidr,
            "cidrBlockAssociations": [
                {"associationId": f"vpc-cidr-assoc-{digest(vpc_id, 'cidr')}", "cidrBlock": cidr, "state": "associated"}
            ],
            "default": default,
            "dhcpOptionsId": f"dopt-{digest(self.region, 'dhcp')}",
            "enableDnsHostnames": True,
            "enableDnsSupport": True,
            "enableNetworkAddressUsageMetrics": False,
            "filters": list(args.get("filters") or []),
            "instanceTenancy": "default",
            "ipv6AssociationId": "",
            "ipv6CidrBlock": "",
            "ipv6CidrBlockAssociations": [],
            "mainRouteTableId": f"rtb-{digest(vpc_id, 'main')}",
            "ownerId": self.account,
            "region": self.region,
            "state": "available",
            "tags": dict(args.get("tags") or {}),
        }

    def _subnet(self, subnet_id: str, vpc_id: str | None = None, zone: str | None = None) -> dict[str, Any]:
        """The subnet handed out as ``subnet_id`` (else one made up from the id): its VPC, zone and CIDR."""
        known = self.subnets.get(subnet_id)
        if known is None:
            zones = self.zones()
            zone = zone or zones[int(digest(subnet_id), 16) % len(zones)]
            index = zones.index(zone) if zone in zones else 0
            vpc_id = vpc_id or f"vpc-{digest(self.region, 'default')}"
            known = {"vpcId": vpc_id, "availabilityZone": zone, "cidrBlock": f"10.0.{index * 32}.0/19"}
            self.subnets[subnet_id] = known
        return known

    def subnet_ids(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """One subnet per zone the filters name (else per zone of the region, three at most), in the VPC they name."""
        filters = _filters(args)
        zones = filters.get("availability-zone") or filters.get("availabilityZone") or self.zones()[:3]
        vpc_id = (filters.get("vpc-id") or [None])[0]
        ids = []
        for zone in zones:
            subnet_id = f"subnet-{digest(self.region, _key(args), zone)}"
            self._subnet(subnet_id, vpc_id, zone)
            self.stand_ins.setdefault(subnet_id, f"(the subnet in {zone} get_subnets finds)")
            ids.append(subnet_id)
        return {
            "id": self.region,
            "ids": ids,
            "filters": list(args.get("filters") or []),
            "region": self.region,
            "tags": dict(args.get("tags") or {}),
        }

    def subnet(self, args: Mapping[str, Any]) -> dict[str, Any]:
        filters = _filters(args)
        zone = args.get("availabilityZone") or (filters.get("availability-zone") or [None])[0]
        vpc_id = args.get("vpcId") or (filters.get("vpc-id") or [None])[0]
        subnet_id = str(args.get("id") or f"subnet-{digest(self.region, _key(args))}")
        if not args.get("id"):
            self.stand_ins.setdefault(subnet_id, "(the subnet get_subnet finds)")
        known = self._subnet(subnet_id, vpc_id and str(vpc_id), zone and str(zone))
        cidr = str(args.get("cidrBlock") or known["cidrBlock"])
        return {
            "id": subnet_id,
            "arn": f"arn:aws:ec2:{self.region}:{self.account}:subnet/{subnet_id}",
            "assignIpv6AddressOnCreation": False,
            "availabilityZone": known["availabilityZone"],
            "availabilityZoneId": self.zone_id(known["availabilityZone"]),
            "availableIpAddressCount": 8187,  # a /19 less AWS's five
            "cidrBlock": cidr,
            "customerOwnedIpv4Pool": "",
            "defaultForAz": bool(args.get("defaultForAz", False)),
            "enableDns64": False,
            "enableLniAtDeviceIndex": 0,
            "enableResourceNameDnsARecordOnLaunch": False,
            "enableResourceNameDnsAaaaRecordOnLaunch": False,
            "filters": list(args.get("filters") or []),
            "ipv6CidrBlock": "",
            "ipv6CidrBlockAssociationId": "",
            "ipv6Native": False,
            "mapCustomerOwnedIpOnLaunch": False,
            "mapPublicIpOnLaunch": False,
            "outpostArn": "",
            "ownerId": self.account,
            "privateDnsHostnameTypeOnLaunch": "ip-name",
            "region": self.region,
            "state": "available",
            "tags": dict(args.get("tags") or {}),
            "vpcId": known["vpcId"],
        }

    def security_group(self, args: Mapping[str, Any]) -> dict[str, Any]:
        filters = _filters(args)
        name = str(args.get("name") or (filters.get("group-name") or ["default"])[0])
        sg_id = str(args.get("id") or f"sg-{digest(self.region, _key(args))}")
        if not args.get("id"):
            self.stand_ins.setdefault(sg_id, f"(the security group {name} get_security_group finds)")
        vpc_id = str(args.get("vpcId") or (filters.get("vpc-id") or [f"vpc-{digest(self.region, 'default')}"])[0])
        return {
            "id": sg_id,
            "arn": f"arn:aws:ec2:{self.region}:{self.account}:security-group/{sg_id}",
            "description": "default VPC security group" if name == "default" else f"{name} security group",
            "filters": list(args.get("filters") or []),
            "name": name,
            "region": self.region,
            "tags": dict(args.get("tags") or {}),
            "vpcId": vpc_id,
        }

    def security_groups(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """One group matching the filters and tags, in the VPC they name."""
        filters = _filters(args)
        sg_id = f"sg-{digest(self.region, _key(args))}"
        self.stand_ins.setdefault(sg_id, "(the security group get_security_groups finds)")
        vpc_id = (filters.get("vpc-id") or [f"vpc-{digest(self.region, 'default')}"])[0]
        return {
            "id": self.region,
            "ids": [sg_id],
            "arns": [f"arn:aws:ec2:{self.region}:{self.account}:security-group/{sg_id}"],
            "vpcIds": [vpc_id],
            "filters": list(args.get("filters") or []),
            "region": self.region,
            "tags": dict(args.get("tags") or {}),
        }

    # --- images -------------------------------------------------------------------------------------
    def ami(self, args: Mapping[str, Any]) -> dict[str, Any]:
        return ami_result(self, args)


def ami_result(lookups: Lookups, args: Mapping[str, Any]) -> dict[str, Any]:
    """The image ``get_ami`` finds: named after the ``name`` filter (its ``*`` the fixed date), of the architecture
    the filters ask for, owned by the first owner given, EBS-backed, HVM, ENA, IMDSv2."""
    filters = _filters(args)
    region = lookups.region
    image_id = f"ami-{digest(region, _key(args))}"
    pattern = (filters.get("name") or [str(args.get("nameRegex") or "image")])[0]
    name = pattern.replace("*", AMI_DATE.replace("-", "")).replace("?", "0")
    arch = (filters.get("architecture") or ["arm64" if "arm64" in name or "aarch64" in name else "x86_64"])[0]
    owners = [str(o) for o in args.get("owners") or []]
    owner = next((o for o in owners if o.isdigit()), "137112412989")  # an alias ("amazon") → Amazon's account
    snapshot = f"snap-{digest(image_id, 'root')}"
    lookups.stand_ins.setdefault(image_id, f"(AMI get_ami finds: {pattern})")
    return {
        "id": image_id,
        "imageId": image_id,
        "arn": f"arn:aws:ec2:{region}::image/{image_id}",
        "allowUnsafeFilter": bool(args.get("allowUnsafeFilter", False)),
        "architecture": arch,
        "blockDeviceMappings": [
            {
                "deviceName": "/dev/sda1",
                "ebs": {
                    "delete_on_termination": "true",
                    "encrypted": "false",
                    "iops": "3000",
                    "snapshot_id": snapshot,
                    "throughput": "125",
                    "volume_size": "8",
                    "volume_type": "gp3",
                },
                "noDevice": "",
                "virtualName": "",
            }
        ],
        "bootMode": "uefi-preferred",
        "creationDate": f"{AMI_DATE}T00:00:00.000Z",
        "deprecationTime": f"{int(AMI_DATE[:4]) + 2}{AMI_DATE[4:]}T00:00:00.000Z",
        "description": name,
        "enaSupport": True,
        "executableUsers": list(args.get("executableUsers") or []),
        "filters": list(args.get("filters") or []),
        "hypervisor": "xen",
        "imageLocation": f"{owners[0] if owners else owner}/{name}",
        "imageOwnerAlias": next((o for o in owners if not o.isdigit()), ""),
        "imageType": "machine",
        "imdsSupport": "v2.0",
        "includeDeprecated": bool(args.get("includeDeprecated", False)),
        "kernelId": "",
        "lastLaunchedTime": "",
        "mostRecent": bool(args.get("mostRecent", False)),
        "name": name,
        "nameRegex": str(args.get("nameRegex") or ""),
        "ownerId": owner,
        "owners": owners,
        "platform": "",
        "platformDetails": "Linux/UNIX",
        "productCodes": [],
        "public": True,
        "ramdiskId": "",
        "region": region,
        "rootDeviceName": "/dev/sda1",
        "rootDeviceType": "ebs",
        "rootSnapshotId": snapshot,
        "sriovNetSupport": "simple",
        "state": "available",
        "stateReason": {"code": "UNSET", "message": "UNSET"},
        "tags": dict(args.get("tags") or {}),
        "tpmSupport": "",
        "uefiData": "",
        "usageOperation": "RunInstances",
        "virtualizationType": "hvm",
    }


ANSWERED: dict[str, Callable[[Lookups, Mapping[str, Any]], dict[str, Any]]] = {
    "aws:index/getPartition:getPartition": Lookups.partition,
    "aws:index/getCallerIdentity:getCallerIdentity": Lookups.caller_identity,
    "aws:index/getRegion:getRegion": Lookups.region_info,
    "aws:index/getAvailabilityZones:getAvailabilityZones": Lookups.availability_zones,
    "aws:ec2/getInstanceType:getInstanceType": Lookups.instance_type,
    "aws:ssm/getParameter:getParameter": Lookups.ssm_parameter,
    "aws:ec2/getVpc:getVpc": Lookups.vpc,
    "aws:ec2/getSubnets:getSubnets": Lookups.subnet_ids,
    "aws:ec2/getSubnet:getSubnet": Lookups.subnet,
    "aws:ec2/getSecurityGroup:getSecurityGroup": Lookups.security_group,
    "aws:ec2/getSecurityGroups:getSecurityGroups": Lookups.security_groups,
    "aws:ec2/getAmi:getAmi": Lookups.ami,
}
"""Every invoke the offline plan answers (besides those a test registers in ``PlanMocks.invoke_fakes``)."""
