"""Network section of the spec: a new VPC, or your own VPC and private subnets."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field, field_validator, model_validator

from gpucluster.config.base import SpecModel

InterfaceEndpoint = Literal["ssm", "ssmmessages", "ec2messages", "ecr.api", "ecr.dkr", "sts", "logs", "secretsmanager", "kms"]

# The retention periods CloudWatch Logs accepts (PutRetentionPolicy), in days.
CLOUDWATCH_RETENTION_DAYS = (
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
)  # fmt: skip


class FlowLogsSpec(SpecModel):
    """VPC flow logs: every accepted and rejected connection of the VPC's interfaces (Security Hub EC2.6)."""

    enabled: bool = True
    """Log the VPC's traffic. Default true. With your own VPC (``vpcId``) the flow log covers all of
    that VPC's traffic, not only the cluster's; set false when the VPC is logged already."""

    destination: Literal["cloudwatch", "s3"] = "cloudwatch"
    """Where records go: ``cloudwatch`` (a log group of the cluster, queried with Logs Insights) or
    ``s3`` (a private bucket of the cluster; cheaper to keep for long). Default ``cloudwatch``."""

    retention_days: int = Field(default=365, ge=1)
    """How long records are kept: the log group's retention, or the bucket's lifecycle expiration.
    Default 365 (one year: the minimum AWS Config's cw-loggroup-retention-period-check asks by default). With ``cloudwatch``
    it must be one of CloudWatch's periods: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545,
    731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653."""

    max_aggregation_interval: Literal[60, 600] = 600
    """Seconds over which a flow's packets are aggregated into one record: 60 or 600. Default 600
    (EC2's default; 60 gives finer timing and more records)."""

    protect: bool | None = None
    """Protect and retain the log group or bucket (``pulumi destroy`` refuses, deleting the stack
    leaves it). Default: ``storage.protectData`` (true when there is no storage section)."""


class SubnetSpec(SpecModel):
    """A private subnet of your own VPC."""

    id: str = Field(pattern=r"^subnet-[0-9a-f]{8,17}$")
    """Subnet id, e.g. ``subnet-0123456789abcdef0``. Required."""

    availability_zone: str
    """Availability Zone the subnet lives in, e.g. ``us-east-1a``. Required: node groups are placed by
    it before anything is looked up (``gpucluster preflight`` checks it against EC2)."""


class NetworkSpec(SpecModel):
    """Where the cluster's nodes live. Default: a new VPC with a private subnet per Availability Zone."""

    vpc_id: str | None = Field(default=None, pattern=r"^vpc-[0-9a-f]{8,17}$")
    """Use this existing VPC instead of creating one. Default: none (create a VPC). When set,
    ``subnets`` must list the private subnets to use; only security groups are created."""

    subnets: tuple[SubnetSpec, ...] = ()
    """Private subnets of ``vpcId`` (id and Availability Zone each). Default: none. Only with ``vpcId``."""

    vpc_cidr: str = "10.0.0.0/16"
    """CIDR of a new VPC. Default ``10.0.0.0/16``. A /16 leaves room for thousands of EFA nodes."""

    availability_zones: tuple[str, ...] = ()
    """Availability Zones that get a private subnet in a new VPC. Default: every zone a node group
    uses. Name zones that other stacks (or a later node group) will need."""

    private_subnet_prefix_length: int = Field(default=19, ge=16, le=27)
    """Size of each private subnet of a new VPC. Default 19 (8,187 usable addresses per zone)."""

    public_subnet_prefix_length: int = Field(default=24, ge=20, le=28)
    """Size of each public subnet (NAT gateways only, no nodes) of a new VPC. Default 24."""

    enable_nat_gateway: bool = True
    """Give private subnets outbound internet through NAT (image pulls, package mirrors). Default true.
    Turn off for fully air-gapped VPCs that use interface endpoints and private mirrors."""

    one_nat_gateway_per_az: bool = False
    """One NAT gateway per zone instead of one for the VPC. Default false (one, cheaper); true survives
    the loss of a zone."""

    enable_s3_gateway_endpoint: bool = True
    """Route S3 traffic (datasets, checkpoints, Lustre data repositories) through a free gateway
    endpoint instead of NAT. Default true."""

    interface_endpoints: tuple[InterfaceEndpoint, ...] = ()
    """AWS services reached through interface endpoints in the private subnets, e.g. ``[ssm,
    ssmmessages, ec2messages]`` for Session Manager without NAT. Default: none (they cost per hour)."""

    flow_logs: FlowLogsSpec = FlowLogsSpec()
    """VPC flow logs (traffic type ALL). Default: on, to a CloudWatch log group kept 365 days."""

    @field_validator("vpc_cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        try:
            net = ipaddress.ip_network(value, strict=True)
        except ValueError as exc:
            raise ValueError(f"vpcCidr {value!r} is not a network CIDR ({exc}); e.g. 10.0.0.0/16") from None
        if net.version != 4 or not 16 <= net.prefixlen <= 24:
            raise ValueError(f"vpcCidr {value!r} must be an IPv4 block between /16 and /24, e.g. 10.0.0.0/16")
        return value

    @model_validator(mode="after")
    def _byo(self) -> NetworkSpec:
        if self.subnets and not self.vpc_id:
            raise ValueError("subnets are only used with vpcId: set vpcId to the VPC they belong to, or drop subnets")
        if self.vpc_id and not self.subnets:
            raise ValueError(f"vpcId {self.vpc_id!r} needs its private subnets listed in subnets (id and availabilityZone)")
        return self

    @property
    def create_vpc(self) -> bool:
        return self.vpc_id is None

    def subnet_zone(self, subnet_id: str) -> str | None:
        for s in self.subnets:
            if s.id == subnet_id:
                return s.availability_zone
        return None


def plan_subnets(vpc_cidr: str, zones: list[str], private_prefix: int, public_prefix: int) -> dict[str, tuple[str, str]]:
    """CIDRs for each zone of a new VPC: ``{zone: (private_cidr, public_cidr)}``.

    Private subnets are carved first from the bottom of the VPC block; public subnets from the top,
    so adding a zone never moves an existing subnet. Raises ``ValueError`` when they do not fit.
    """
    vpc = ipaddress.ip_network(vpc_cidr)
    if private_prefix < vpc.prefixlen or public_prefix < vpc.prefixlen:
        raise ValueError(f"subnets of /{private_prefix} and /{public_prefix} cannot be carved from {vpc_cidr}")
    private = list(vpc.subnets(new_prefix=private_prefix))
    public = list(vpc.subnets(new_prefix=public_prefix))[::-1]
    if len(zones) > len(private) or len(zones) > len(public):
        raise ValueError(f"{vpc_cidr} has no room for {len(zones)} zones of /{private_prefix} private subnets")
    chosen_private, chosen_public = private[: len(zones)], public[: len(zones)]
    if any(a.overlaps(b) for a in chosen_private for b in chosen_public):
        raise ValueError(
            f"{vpc_cidr} has no room for {len(zones)} zones of /{private_prefix} private and /{public_prefix} "
            "public subnets; use a larger vpcCidr or smaller subnets"
        )
    return {zone: (str(a), str(b)) for zone, a, b in zip(zones, chosen_private, chosen_public, strict=True)}
