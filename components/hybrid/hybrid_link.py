"""HybridLink: how an on-premises site reaches the cluster's VPC, and names across the two sites.

By ``connectivity.type``:

- ``vpn-vgw``: a customer gateway, a virtual private gateway attached to the VPC and a Site-to-Site VPN on it;
  every private route table learns the site's networks by route propagation (BGP routes, or the VPN's static
  routes to ``onPremCidrs`` when the site has no BGP ASN).
- ``vpn-tgw``: a new Transit Gateway (ECMP across the tunnels with BGP), the VPC attached to it on the private
  subnets, a VPN attachment; with no BGP, the Transit Gateway's route table sends ``onPremCidrs`` to the VPN.
- ``existing-tgw`` / ``direct-connect`` with ``transitGatewayId``: the VPC attached to that Transit Gateway
  (its route tables are its owner's).
- ``direct-connect`` with ``vpnGatewayId``: that virtual private gateway attached to the VPC, with route
  propagation.

With a Transit Gateway every private route table gets a route to each ``onPremCidrs`` entry. Routes are
``aws.ec2.Route`` resources: the cluster's :class:`~gpucluster.components.network.network.Network` keeps no inline
routes on its private tables when the cluster is hybrid, so the two never fight over a table. A VPC of your own
keeps its route tables: route ``onPremCidrs`` to the ``gatewayId`` output there (the program warns).

With ``dns``: a Route 53 Resolver outbound endpoint and a forwarding rule for ``onPremDomain`` to the site's
resolvers, associated with the VPC; with ``dns.inbound`` an inbound endpoint the site forwards the cluster's
private names to. Both live in the private subnets of two zones, behind a security group that takes DNS
(53 TCP/UDP) from the VPC and the site and sends it only to the site's resolvers.

The tunnels' pre-shared keys exist only as secret outputs (``pulumi.Output.secret``).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Required, TypedDict

import pulumi
import pulumi_aws as aws

from gpucluster.components._shared.build import adopt
from gpucluster.components._shared.config_types import HybridConfig
from gpucluster.components._shared.edge import Adapted, at_edge, required, validate
from gpucluster.components._shared.inputs import Inputs
from gpucluster.components._shared.security import allow
from gpucluster.components.hybrid._security import cidr_key
from gpucluster.config.errors import ConfigError, error, raise_for
from gpucluster.config.hybrid import HybridSpec
from gpucluster.config.naming import cluster_tags, with_name

TOKEN = "gpucluster:index:HybridLink"
SOURCE = "HybridLink args"


class HybridLinkArgs(TypedDict, total=False):
    """Inputs of :class:`HybridLink`: the ``hybrid`` settings and the VPC the site reaches."""

    cluster_name: Required[str]
    """Cluster name: prefix of resource names. Required."""
    hybrid: Required[HybridConfig]
    """The ``gpucluster:hybrid`` settings (site, ``onPremCidrs``, ``connectivity``, ``dns``). Required."""
    vpc_id: Required[pulumi.Input[str]]
    """The VPC the site reaches. Required. May be an Output."""
    vpc_cidr: Required[pulumi.Input[str]]
    """The VPC's IPv4 CIDR (DNS queries to the Resolver endpoints come from it). Required. May be an Output."""
    private_subnet_ids: Required[list[pulumi.Input[str]]]
    """One private subnet per zone: the Transit Gateway attachment and the Resolver endpoints live there (the
    endpoints need two). Required."""
    private_route_table_ids: dict[str, pulumi.Input[str]]
    """Every private route table of the VPC, by a stable key such as its zone: each gets a route (or route propagation) to the site. Default: none
    (a VPC whose route tables you manage: route ``onPremCidrs`` to the ``gatewayId`` output yourself)."""
    tags: dict[str, str]
    """Tags on every taggable child. Default: none."""


@dataclass(frozen=True)
class LinkWiring:
    """What the link attaches to, resolved (the stack's path and the Args' share it)."""

    cluster_name: str
    vpc_id: pulumi.Input[str]
    vpc_cidr: pulumi.Input[str]
    private_subnet_ids: Sequence[pulumi.Input[str]]
    private_route_table_ids: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """Private route table per zone (the zone names the routes)."""
    tags: dict[str, str] = field(default_factory=dict)


class HybridLink(pulumi.ComponentResource):
    """The link between an on-premises site and the VPC (VPN, Transit Gateway or Direct Connect) and DNS both ways."""

    gateway_id: pulumi.Output[str]
    """The gateway the VPC routes the site's networks to: a Transit Gateway (``tgw-…``) or a virtual private
    gateway (``vgw-…``)."""
    customer_gateway_id: pulumi.Output[str] | None
    """The customer gateway's id (VPN types); absent for Direct Connect and an existing Transit Gateway."""
    vpn_connection_id: pulumi.Output[str] | None
    """The Site-to-Site VPN connection's id (VPN types)."""
    transit_gateway_attachment_id: pulumi.Output[str] | None
    """The VPC's Transit Gateway attachment id (Transit Gateway types)."""
    tunnel_addresses: pulumi.Output[list[str]] | None
    """The two tunnels' outside (AWS-side) addresses the site's VPN device connects to (VPN types)."""
    tunnel_preshared_keys: pulumi.Output[list[str]] | None
    """The two tunnels' pre-shared keys, as a secret (VPN types)."""
    inbound_resolver_ips: pulumi.Output[list[str]] | None
    """Addresses of the inbound Resolver endpoint the site's DNS servers forward the cluster's names to."""
    outbound_resolver_endpoint_id: pulumi.Output[str] | None
    """The outbound Resolver endpoint's id (with ``dns``)."""

    def __init__(self, name: str, args: HybridLinkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        with at_edge("HybridLink"):
            adapted = from_args(args)  # every error before any resource
        super().__init__(TOKEN, name, None, opts)
        adopt(self, build_hybrid_link(self, name, adapted.resolved, adapted.wiring))


def from_args(args: HybridLinkArgs) -> Adapted[HybridSpec, LinkWiring]:
    """``args`` validated with the stack's ``hybrid`` model; errors name ``args.<field>``."""
    fields = {"cluster_name": "clusterName", "hybrid": "hybrid", "vpc_id": "vpcId", "vpc_cidr": "vpcCidr"}
    raise_for(required(args, {**fields, "private_subnet_ids": "privateSubnetIds"}), SOURCE)
    inputs = Inputs("HybridLink")
    spec = validate(HybridSpec, inputs.prepare(dict(args["hybrid"]), HybridConfig, "args.hybrid"), SOURCE, "args.hybrid")
    wiring = LinkWiring(
        cluster_name=args["cluster_name"],
        vpc_id=args["vpc_id"],
        vpc_cidr=args["vpc_cidr"],
        private_subnet_ids=list(args["private_subnet_ids"]),
        private_route_table_ids=dict(args.get("private_route_table_ids", {})),
        tags=cluster_tags(args["cluster_name"], args.get("tags", {})),
    )
    check_link(spec, wiring)
    return Adapted(spec, wiring)


def check_link(spec: HybridSpec, wiring: LinkWiring) -> None:
    """What the link needs of its wiring: two subnets for the Resolver endpoints."""
    if spec.dns is not None and len(wiring.private_subnet_ids) < 2:
        raise ConfigError(
            [
                error(
                    "args.privateSubnetIds",
                    "Route 53 Resolver endpoints need subnets in two zones; one was given",
                    "give a private subnet in a second zone (network.availabilityZones)",
                )
            ],
            source=SOURCE,
        )


def build_hybrid_link(parent: pulumi.ComponentResource, name: str, spec: HybridSpec, wiring: LinkWiring) -> "LinkParts":
    """The link and DNS of ``spec`` (resolved), children of ``parent``; registers ``parent``'s outputs."""
    parts = LinkParts(parent, name, spec, wiring)
    parts._link()
    if spec.dns is not None:
        parts._dns()
    parent.register_outputs(
        {
            "gatewayId": parts.gateway_id,
            "customerGatewayId": parts.customer_gateway_id,
            "vpnConnectionId": parts.vpn_connection_id,
            "transitGatewayAttachmentId": parts.transit_gateway_attachment_id,
            "tunnelAddresses": parts.tunnel_addresses,
            "tunnelPresharedKeys": parts.tunnel_preshared_keys,
            "inboundResolverIps": parts.inbound_resolver_ips,
            "outboundResolverEndpointId": parts.outbound_resolver_endpoint_id,
        }
    )
    return parts


class LinkParts:
    """What :func:`build_hybrid_link` made: a ``HybridLink``'s outputs."""

    gateway_id: pulumi.Output[str]

    def __init__(self, parent: pulumi.ComponentResource, name: str, spec: HybridSpec, wiring: LinkWiring) -> None:
        self._parent, self._name, self._spec, self._wiring = parent, name, spec, wiring
        self._child = pulumi.ResourceOptions(parent=parent)
        self.customer_gateway_id: pulumi.Output[str] | None = None
        self.vpn_connection_id: pulumi.Output[str] | None = None
        self.transit_gateway_attachment_id: pulumi.Output[str] | None = None
        self.tunnel_addresses: pulumi.Output[list[str]] | None = None
        self.tunnel_preshared_keys: pulumi.Output[list[str]] | None = None
        self.inbound_resolver_ips: pulumi.Output[list[str]] | None = None
        self.outbound_resolver_endpoint_id: pulumi.Output[str] | None = None

    def _tags(self, suffix: str) -> dict[str, str]:
        return with_name(self._wiring.tags, f"{self._wiring.cluster_name}-{suffix}")

    # --- the link ------------------------------------------------------------------------------------
    def _link(self) -> None:
        c = self._spec.connectivity
        if c.type == "vpn-vgw":
            vgw = aws.ec2.VpnGateway(
                f"{self._name}-vgw",
                vpc_id=self._wiring.vpc_id,
                amazon_side_asn=str(c.amazon_side_asn),
                tags=self._tags(f"{self._spec.site}-vgw"),
                opts=self._child,
            )
            self.gateway_id = vgw.id
            self._vpn(vpn_gateway_id=vgw.id)
            self._propagate(vgw.id, after=vgw)
        elif c.type == "vpn-tgw":
            tgw = aws.ec2transitgateway.TransitGateway(
                f"{self._name}-tgw",
                description=f"{self._wiring.cluster_name}: the VPC and site {self._spec.site}",
                amazon_side_asn=c.amazon_side_asn,
                vpn_ecmp_support="enable" if c.bgp_asn is not None else "disable",
                dns_support="enable",
                auto_accept_shared_attachments="disable",
                default_route_table_association="enable",
                default_route_table_propagation="enable",
                tags=self._tags(f"{self._spec.site}-tgw"),
                opts=self._child,
            )
            self.gateway_id = tgw.id
            attachment = self._attach(tgw.id)
            vpn = self._vpn(transit_gateway_id=tgw.id)
            if c.bgp_asn is None:
                # A Transit Gateway VPN takes no VPN connection routes: static routes go in its route table.
                for cidr in self._spec.on_prem_cidrs:
                    aws.ec2transitgateway.Route(
                        f"{self._name}-tgw-{cidr_key(cidr)}",
                        destination_cidr_block=cidr,
                        transit_gateway_attachment_id=vpn.transit_gateway_attachment_id,
                        transit_gateway_route_table_id=tgw.association_default_route_table_id,
                        opts=self._child,
                    )
            self._routes(tgw.id, attachment)
        elif c.transit_gateway_id is not None:  # existing-tgw, or direct-connect over a transit VIF
            self.gateway_id = pulumi.Output.from_input(c.transit_gateway_id)
            self._routes(c.transit_gateway_id, self._attach(c.transit_gateway_id))
        else:  # direct-connect over a private VIF to an existing virtual private gateway
            if c.vpn_gateway_id is None:
                raise ValueError("direct-connect over a private VIF needs connectivity.vpnGatewayId (or transitGatewayId)")
            attached = aws.ec2.VpnGatewayAttachment(
                f"{self._name}-vgw-attachment", vpc_id=self._wiring.vpc_id, vpn_gateway_id=c.vpn_gateway_id, opts=self._child
            )
            self.gateway_id = pulumi.Output.from_input(c.vpn_gateway_id)
            self._propagate(c.vpn_gateway_id, after=attached)

    def _attach(self, tgw_id: pulumi.Input[str]) -> aws.ec2transitgateway.VpcAttachment:
        attachment = aws.ec2transitgateway.VpcAttachment(
            f"{self._name}-tgw-attachment",
            transit_gateway_id=tgw_id,
            vpc_id=self._wiring.vpc_id,
            subnet_ids=list(self._wiring.private_subnet_ids),
            dns_support="enable",
            tags=self._tags(f"{self._spec.site}-tgw-attachment"),
            opts=self._child,
        )
        self.transit_gateway_attachment_id = attachment.id
        return attachment

    def _vpn(
        self, *, vpn_gateway_id: pulumi.Input[str] | None = None, transit_gateway_id: pulumi.Input[str] | None = None
    ) -> aws.ec2.VpnConnection:
        c = self._spec.connectivity
        if c.customer_gateway_ip is None:
            raise ValueError("a VPN needs connectivity.customerGatewayIp")
        static = c.bgp_asn is None
        cgw = aws.ec2.CustomerGateway(
            f"{self._name}-cgw",
            ip_address=c.customer_gateway_ip,
            # A static-routes-only VPN ignores the ASN; EC2 still wants one (65000 is its documented default).
            bgp_asn=str(c.bgp_asn if c.bgp_asn is not None else 65000),
            type="ipsec.1",
            tags=self._tags(f"{self._spec.site}-cgw"),
            opts=self._child,
        )
        vpn = aws.ec2.VpnConnection(
            f"{self._name}-vpn",
            customer_gateway_id=cgw.id,
            vpn_gateway_id=vpn_gateway_id,
            transit_gateway_id=transit_gateway_id,
            type="ipsec.1",
            static_routes_only=static,
            tunnel_bandwidth=c.tunnel_bandwidth if transit_gateway_id is not None else None,
            tags=self._tags(f"{self._spec.site}-vpn"),
            opts=self._child,
        )
        if static and vpn_gateway_id is not None:
            for cidr in self._spec.on_prem_cidrs:
                aws.ec2.VpnConnectionRoute(
                    f"{self._name}-vpn-{cidr_key(cidr)}", vpn_connection_id=vpn.id, destination_cidr_block=cidr, opts=self._child
                )
        self.customer_gateway_id = cgw.id
        self.vpn_connection_id = vpn.id
        self.tunnel_addresses = pulumi.Output.all(vpn.tunnel1_address, vpn.tunnel2_address).apply(list)
        # Never a plain output: the keys let anyone who has them bring up a tunnel into the VPC.
        self.tunnel_preshared_keys = pulumi.Output.secret(
            pulumi.Output.all(vpn.tunnel1_preshared_key, vpn.tunnel2_preshared_key).apply(list)
        )
        return vpn

    def _routes(self, tgw_id: pulumi.Input[str], attachment: aws.ec2transitgateway.VpcAttachment) -> None:
        """A route to every ``onPremCidrs`` entry in every private route table, once the VPC is attached."""
        after = pulumi.ResourceOptions(parent=self._parent, depends_on=[attachment])
        for zone, table in self._wiring.private_route_table_ids.items():
            for cidr in self._spec.on_prem_cidrs:
                aws.ec2.Route(
                    f"{self._name}-{zone}-{cidr_key(cidr)}",
                    route_table_id=table,
                    destination_cidr_block=cidr,
                    transit_gateway_id=tgw_id,
                    opts=after,
                )
        self._warn_unrouted()

    def _propagate(self, vgw_id: pulumi.Input[str], after: pulumi.Resource) -> None:
        """Route propagation from the virtual private gateway into every private route table."""
        opts = pulumi.ResourceOptions(parent=self._parent, depends_on=[after])
        for zone, table in self._wiring.private_route_table_ids.items():
            aws.ec2.VpnGatewayRoutePropagation(
                f"{self._name}-propagation-{zone}", vpn_gateway_id=vgw_id, route_table_id=table, opts=opts
            )
        self._warn_unrouted()

    def _warn_unrouted(self) -> None:
        if not self._wiring.private_route_table_ids:
            pulumi.log.warn(
                f"hybrid: the VPC's route tables are yours: route {', '.join(self._spec.on_prem_cidrs)} to the link's "
                "gateway (output hybrid.link.gatewayId) in every route table of the node subnets",
                resource=self._parent,
            )

    # --- names across the sites ----------------------------------------------------------------------
    def _dns(self) -> None:
        dns = self._spec.dns
        if dns is None:
            raise ValueError("the DNS resolvers are made only for a site with a dns section")
        name, child, w = self._name, self._child, self._wiring
        sg = aws.ec2.SecurityGroup(
            f"{name}-resolver",
            vpc_id=w.vpc_id,
            description=f"Route 53 Resolver endpoints of {w.cluster_name}: DNS between the VPC and site {self._spec.site}",
            tags=self._tags("resolver"),
            opts=child,
        )
        sources: list[tuple[str, pulumi.Input[str]]] = [("vpc", w.vpc_cidr)]
        sources += [(cidr_key(cidr), cidr) for cidr in self._spec.on_prem_cidrs]
        for proto in ("udp", "tcp"):
            for label, cidr in sources:
                allow(f"{name}-resolver-in-{proto}-{label}", "in", sg.id, cidr=cidr, protocol=proto, ports=(53, 53),
                      description=f"DNS ({proto}) from {'the VPC' if label == 'vpc' else 'the site'}",
                      tags=self._tags(f"resolver-in-{proto}-{label}"), opts=child)  # fmt: skip
            for resolver in dns.on_prem_resolvers:
                key = cidr_key(resolver)
                allow(f"{name}-resolver-out-{proto}-{key}", "out", sg.id, cidr=f"{resolver}/32", protocol=proto,
                      ports=(53, 53), description=f"DNS ({proto}) to the site's resolver {resolver}",
                      tags=self._tags(f"resolver-out-{proto}-{key}"), opts=child)  # fmt: skip
        subnets = [aws.route53.ResolverEndpointIpAddressArgs(subnet_id=s) for s in list(w.private_subnet_ids)[:2]]
        outbound = aws.route53.ResolverEndpoint(
            f"{name}-resolver-out",
            name=f"{w.cluster_name}-to-{self._spec.site}",
            direction="OUTBOUND",
            ip_addresses=subnets,
            security_group_ids=[sg.id],
            tags=self._tags(f"resolver-to-{self._spec.site}"),
            opts=child,
        )
        rule = aws.route53.ResolverRule(
            f"{name}-forward",
            name=f"{w.cluster_name}-{self._spec.site}",
            domain_name=dns.on_prem_domain,
            rule_type="FORWARD",
            resolver_endpoint_id=outbound.id,
            target_ips=[aws.route53.ResolverRuleTargetIpArgs(ip=ip, port=53) for ip in dns.on_prem_resolvers],
            tags=self._tags(f"forward-{self._spec.site}"),
            opts=child,
        )
        aws.route53.ResolverRuleAssociation(
            f"{name}-forward", name=f"{w.cluster_name}-{self._spec.site}", resolver_rule_id=rule.id, vpc_id=w.vpc_id, opts=child
        )
        self.outbound_resolver_endpoint_id = outbound.id
        if dns.inbound:
            inbound = aws.route53.ResolverEndpoint(
                f"{name}-resolver-in",
                name=f"{w.cluster_name}-from-{self._spec.site}",
                direction="INBOUND",
                ip_addresses=subnets,
                security_group_ids=[sg.id],
                tags=self._tags(f"resolver-from-{self._spec.site}"),
                opts=child,
            )
            self.inbound_resolver_ips = inbound.ip_addresses.apply(lambda addrs: [a.ip or "" for a in addrs or []])
