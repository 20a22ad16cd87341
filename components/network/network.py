"""Network: a new VPC (private subnets per zone, NAT, S3 gateway endpoint, optional interface
endpoints) or your own VPC and subnets — plus the security groups every node group uses, the VPC's
flow log and, for a new VPC, its default security group emptied."""

from dataclasses import dataclass, field
from typing import Required

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.build import adopt
from gpucluster.components._shared.config_types import NetworkConfig
from gpucluster.components._shared.edge import Adapted, at_edge, config_part, validate
from gpucluster.components._shared.inputs import Inputs
from gpucluster.components._shared.security import BOTH_WAYS, allow
from gpucluster.components.network._flow_logs import create_flow_log
from gpucluster.config.checks.network import check_flow_logs_section, check_network_section
from gpucluster.config.errors import error, raise_for
from gpucluster.config.naming import cluster_tags, with_name
from gpucluster.config.network import NetworkSpec, plan_subnets

TOKEN = "gpucluster:index:Network"


class NetworkArgs(NetworkConfig, total=False):
    """Inputs of :class:`Network`: the ``network`` settings and the cluster it serves."""

    cluster_name: Required[str]
    """Cluster name: prefix of resource names. Required."""
    zones: list[str]
    """Zones the node groups need a subnet in, added to ``availabilityZones`` for a new VPC. Default: none."""
    region: str
    """AWS region, for endpoint service names. Default: the stack's ``aws:region``."""
    tags: dict[str, str]
    """Tags on every taggable child. Default: none."""


@dataclass(frozen=True)
class NetworkWiring:
    cluster_name: str
    region: str
    tags: dict[str, str] = field(default_factory=dict)
    route_resources: bool = False
    """Private route tables without inline routes, the NAT route an ``aws.ec2.Route`` of its own: other
    components (a hybrid site's link) then add routes to the same tables without the two fighting. Turning it on
    for a cluster that already exists leaves the NAT route in AWS while Pulumi creates it again (EC2 refuses a
    duplicate): import it first, ``pulumi import aws:ec2/route:Route <name>-private-<zone>-nat <rtb-id>_0.0.0.0/0``."""
    inputs: Inputs | None = None
    """Gives back the Outputs a program passed (``vpcId``, subnet ids); none in the stack."""


def from_args(args: NetworkArgs) -> Adapted[NetworkSpec, NetworkWiring]:
    """``args`` validated, checked and resolved as the stack does (zones listed, flow logs protected by
    default); errors name ``args.<field>`` and come before any resource."""
    inputs = Inputs("Network", pulumi.Config("aws").get("region") or "us-east-1")
    region = args.get("region") or pulumi.Config("aws").get("region") or ""
    findings = []
    for key, value in (("clusterName", args.get("cluster_name")), ("region", region)):
        if not value:
            findings.append(error(f"args.{key}", "is required", "pass it (region: or set aws:region)"))
    raise_for(findings, "Network args")
    config = config_part(args, NetworkArgs, NetworkConfig)
    net = validate(NetworkSpec, inputs.prepare(config, NetworkConfig), "Network args")
    zones: list[str] = list(dict.fromkeys([*net.availability_zones, *args.get("zones", [])]))
    for finding in raise_for([*check_network_section(net, region, zones, "args"), *check_flow_logs_section(net, "args")],
                             "Network args"):  # fmt: skip
        pulumi.log.info(finding.render()) if finding.level.value == "info" else pulumi.log.warn(finding.render())
    flow_logs = net.flow_logs.model_copy(update={"protect": True if net.flow_logs.protect is None else net.flow_logs.protect})
    resolved = net.model_copy(update={"availability_zones": tuple(zones), "flow_logs": flow_logs})
    tags = cluster_tags(args["cluster_name"], args.get("tags", {}))
    return Adapted(resolved, NetworkWiring(args["cluster_name"], region, tags, inputs=inputs))


class Network(pulumi.ComponentResource):
    """Private subnets for GPU nodes and the EFA security group.

    The EFA security group allows all traffic in and out between its own members (EFA's OS-bypass
    traffic needs both rules, referencing the group itself); the node security group allows all
    outbound traffic. Node interfaces carry both. A new VPC's default security group keeps no rule
    (nothing should use it; Security Hub EC2.2). The VPC's flow log (traffic type ALL) goes to a
    CloudWatch log group with a retention, or to a private bucket that expires records; either is
    protected and retained like the cluster's other data unless ``flowLogs.protect`` says otherwise.
    """

    # Outputs other languages get (the schema reads these annotations); internal attributes are
    # annotated where ``__init__`` assigns them, so they stay out of the schema.
    vpc_id: pulumi.Output[str]
    """The VPC's id: the new VPC's, or ``vpcId`` as given."""
    vpc_cidr: pulumi.Output[str]
    """The VPC's IPv4 CIDR block."""
    private_subnet_ids_by_zone: pulumi.Output[dict[str, str]]
    """Private subnet id per Availability Zone (for a brought VPC, the first subnet listed for the zone)."""
    efa_security_group_id: pulumi.Output[str]
    """The EFA security group's id: all traffic between its members. Node interfaces and EFA file systems join it."""
    node_security_group_id: pulumi.Output[str]
    """The node security group's id: all outbound traffic."""
    flow_log_id: pulumi.Output[str] | None
    """The VPC flow log's id; absent when ``flowLogs.enabled`` is false."""

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        with at_edge("Network"):
            adapted = from_args(args)  # every error before any resource
        super().__init__(TOKEN, name, None, opts)
        adopt(self, build_network(self, name, adapted.resolved, adapted.wiring))


def build_network(parent: pulumi.ComponentResource, name: str, spec: NetworkSpec, wiring: NetworkWiring) -> "NetworkParts":
    """The network of ``spec`` (resolved), children of ``parent`` (a ``Network`` or GpuCluster's part of that type);
    registers ``parent``'s outputs."""
    parts = NetworkParts(parent, name, wiring)
    inputs = wiring.inputs or Inputs("Network", wiring.region)
    if spec.create_vpc:
        parts._create_vpc(spec)
    else:
        if spec.vpc_id is None:
            raise ValueError("your own VPC needs network.vpcId")
        parts.vpc_id = pulumi.Output.from_input(inputs.real(spec.vpc_id))
        parts.vpc_cidr = aws.ec2.get_vpc_output(id=parts.vpc_id, opts=pulumi.InvokeOutputOptions(parent=parent)).cidr_block
        for subnet in spec.subnets:
            # The first subnet listed for a zone is the zone's default; node groups may pick others.
            parts.private_subnet_ids.setdefault(subnet.availability_zone, pulumi.Output.from_input(inputs.real(subnet.id)))
    parts._create_security_groups()
    parts.private_subnet_ids_by_zone = pulumi.Output.all(**parts.private_subnet_ids).apply(dict)
    parts.flow_log_id = None
    if spec.flow_logs.enabled:
        parts.flow_log_id = create_flow_log(
            parent,
            name,
            spec.flow_logs,
            vpc_id=parts.vpc_id,
            cluster_name=wiring.cluster_name,
            region=wiring.region,
            tags=parts._tags,
        )
    parent.register_outputs(
        {
            "vpcId": parts.vpc_id,
            "vpcCidr": parts.vpc_cidr,
            "privateSubnetIdsByZone": parts.private_subnet_ids_by_zone,
            "efaSecurityGroupId": parts.efa_security_group_id,
            "nodeSecurityGroupId": parts.node_security_group_id,
            "flowLogId": parts.flow_log_id,
        }
    )
    return parts


class NetworkParts:
    """What :func:`build_network` made: a ``Network``'s outputs, and the per-zone ids the stack's parts index."""

    vpc_id: pulumi.Output[str]
    vpc_cidr: pulumi.Output[str]
    private_subnet_ids_by_zone: pulumi.Output[dict[str, str]]
    efa_security_group_id: pulumi.Output[str]
    node_security_group_id: pulumi.Output[str]
    flow_log_id: pulumi.Output[str] | None

    def __init__(self, parent: pulumi.ComponentResource, name: str, wiring: NetworkWiring) -> None:
        self._parent, self._name, self._args = parent, name, wiring
        self._child = pulumi.ResourceOptions(parent=parent)
        self.private_subnet_ids: dict[str, pulumi.Output[str]] = {}
        """Private subnet id per Availability Zone, each its own Output (what the stack's node groups index)."""
        self.private_route_table_ids: dict[str, pulumi.Output[str]] = {}
        """The private route table per zone of a new VPC (none for your own VPC: its route tables are yours)."""

    def _tags(self, suffix: str) -> dict[str, str]:
        return with_name(self._args.tags, f"{self._args.cluster_name}-{suffix}")

    def _create_vpc(self, spec: NetworkSpec) -> None:
        name, opts = self._name, self._child
        zones = list(spec.availability_zones)
        cidrs = plan_subnets(spec.vpc_cidr, zones, spec.private_subnet_prefix_length, spec.public_subnet_prefix_length)
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=spec.vpc_cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags=self._tags("vpc"),
            opts=opts,
        )
        self.vpc_id = vpc.id
        self.vpc_cidr = vpc.cidr_block
        # Adopt the VPC's default security group and leave it without rules: instances launched
        # without a group get no traffic at all, instead of the default's "all from members, all out".
        aws.ec2.DefaultSecurityGroup(
            f"{name}-default-sg", vpc_id=vpc.id, ingress=[], egress=[], tags=self._tags("default-closed"), opts=opts
        )
        nat_ids = self._public_side(spec, vpc, zones, cidrs) if spec.enable_nat_gateway else {}
        private_tables = self._private_side(vpc, zones, cidrs, nat_ids)
        self._endpoints(spec, vpc, private_tables)

    def _public_side(
        self, spec: NetworkSpec, vpc: aws.ec2.Vpc, zones: list[str], cidrs: dict[str, tuple[str, str]]
    ) -> dict[str, pulumi.Output[str]]:
        """The internet gateway, a public subnet per zone and the NAT gateways (one, or one per zone): their ids by zone."""
        name, opts = self._name, self._child
        nat_ids: dict[str, pulumi.Output[str]] = {}
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=self._tags("igw"), opts=opts)
        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags=self._tags("public"),
            opts=opts,
        )
        nat_zones = zones if spec.one_nat_gateway_per_az else zones[:1]
        for zone in zones:
            public = aws.ec2.Subnet(
                f"{name}-public-{zone}",
                vpc_id=vpc.id,
                cidr_block=cidrs[zone][1],
                availability_zone=zone,
                map_public_ip_on_launch=False,
                tags=self._tags(f"public-{zone}"),
                opts=opts,
            )
            aws.ec2.RouteTableAssociation(f"{name}-public-{zone}", subnet_id=public.id, route_table_id=public_rt.id, opts=opts)
            if zone in nat_zones:
                eip = aws.ec2.Eip(f"{name}-nat-{zone}", domain="vpc", tags=self._tags(f"nat-{zone}"), opts=opts)
                nat = aws.ec2.NatGateway(
                    f"{name}-nat-{zone}",
                    allocation_id=eip.id,
                    subnet_id=public.id,
                    tags=self._tags(f"nat-{zone}"),
                    opts=pulumi.ResourceOptions(parent=self._parent, depends_on=[igw]),
                )
                nat_ids[zone] = nat.id
        return nat_ids

    def _private_side(
        self, vpc: aws.ec2.Vpc, zones: list[str], cidrs: dict[str, tuple[str, str]], nat_ids: dict[str, pulumi.Output[str]]
    ) -> list[aws.ec2.RouteTable]:
        """A private subnet and route table per zone, out through a NAT gateway: the route tables."""
        name, opts = self._name, self._child
        private_tables: list[aws.ec2.RouteTable] = []
        for zone in zones:
            private = aws.ec2.Subnet(
                f"{name}-private-{zone}",
                vpc_id=vpc.id,
                cidr_block=cidrs[zone][0],
                availability_zone=zone,
                map_public_ip_on_launch=False,
                tags={**self._tags(f"private-{zone}"), "kubernetes.io/role/internal-elb": "1"},
                opts=opts,
            )
            routes = []
            nat_id = nat_ids.get(zone, next(iter(nat_ids.values()))) if nat_ids else None
            if nat_id is not None and not self._args.route_resources:
                routes.append(aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat_id))
            table = aws.ec2.RouteTable(
                f"{name}-private-{zone}",
                vpc_id=vpc.id,
                routes=None if self._args.route_resources else routes,
                tags=self._tags(f"private-{zone}"),
                opts=opts,
            )
            if nat_id is not None and self._args.route_resources:
                aws.ec2.Route(
                    f"{name}-private-{zone}-nat",
                    route_table_id=table.id,
                    destination_cidr_block="0.0.0.0/0",
                    nat_gateway_id=nat_id,
                    opts=opts,
                )
            self.private_route_table_ids[zone] = table.id
            aws.ec2.RouteTableAssociation(f"{name}-private-{zone}", subnet_id=private.id, route_table_id=table.id, opts=opts)
            private_tables.append(table)
            self.private_subnet_ids[zone] = private.id
        return private_tables

    def _endpoints(self, spec: NetworkSpec, vpc: aws.ec2.Vpc, private_tables: list[aws.ec2.RouteTable]) -> None:
        """The S3 gateway endpoint on the private route tables, and the interface endpoints with their security group."""
        name, opts = self._name, self._child
        if spec.enable_s3_gateway_endpoint:
            aws.ec2.VpcEndpoint(
                f"{name}-s3",
                vpc_id=vpc.id,
                service_name=f"com.amazonaws.{self._args.region}.s3",
                vpc_endpoint_type="Gateway",
                route_table_ids=[t.id for t in private_tables],
                tags=self._tags("s3"),
                opts=opts,
            )
        if spec.interface_endpoints:
            endpoint_sg = aws.ec2.SecurityGroup(
                f"{name}-endpoints",
                vpc_id=vpc.id,
                description=f"HTTPS from {self._args.cluster_name} to AWS interface endpoints",
                tags=self._tags("endpoints"),
                opts=opts,
            )
            allow(
                f"{name}-endpoints-https",
                "in",
                endpoint_sg.id,
                cidr=vpc.cidr_block,
                protocol="tcp",
                ports=(443, 443),
                description="HTTPS from the VPC",
                tags=self._tags("endpoints-https"),
                opts=opts,
            )
            for service in spec.interface_endpoints:
                aws.ec2.VpcEndpoint(
                    f"{name}-{service.replace('.', '-')}",
                    vpc_id=vpc.id,
                    service_name=f"com.amazonaws.{self._args.region}.{service}",
                    vpc_endpoint_type="Interface",
                    private_dns_enabled=True,
                    subnet_ids=list(self.private_subnet_ids.values()),
                    security_group_ids=[endpoint_sg.id],
                    tags=self._tags(service),
                    opts=opts,
                )

    def _create_security_groups(self) -> None:
        name, opts = self._name, self._child
        efa = aws.ec2.SecurityGroup(
            f"{name}-efa",
            vpc_id=self.vpc_id,
            description=f"EFA and intra-cluster traffic of {self._args.cluster_name}: all traffic between members",
            tags=self._tags("efa"),
            opts=opts,
        )
        for direction, word in BOTH_WAYS:
            allow(f"{name}-efa-{direction}-self", direction, efa.id, peer_security_group_id=efa.id,
                  description=f"All traffic {word} members of this group (EFA needs it)",
                  tags=self._tags(f"efa-{direction}-self"), opts=opts)  # fmt: skip
        node = aws.ec2.SecurityGroup(
            f"{name}-node",
            vpc_id=self.vpc_id,
            description=f"Outbound traffic of {self._args.cluster_name} nodes",
            tags=self._tags("node"),
            opts=opts,
        )
        allow(f"{name}-node-out", "out", node.id, cidr="0.0.0.0/0",
              description="Outbound to AWS APIs and package mirrors (through NAT or endpoints)",
              tags=self._tags("node-out"), opts=opts)  # fmt: skip
        self.efa_security_group_id = efa.id
        self.node_security_group_id = node.id
