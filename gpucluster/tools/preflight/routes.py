"""Preflight of the routes an existing link must already have: with ``existing-tgw`` (or ``direct-connect`` over a
Transit Gateway) the route table the new VPC attachment associates with routes each site network through the site's
VPN, Direct Connect gateway or peering attachment, and does not already send the VPC's own CIDR elsewhere; with
``direct-connect`` over a virtual private gateway, that gateway is free to attach to this VPC and the static routes of
its VPN connections cover the site.

Part of :mod:`gpucluster.tools.preflight` (:mod:`.run` runs these, each on its own, so a refused call stops only
the check that made it). moto 5 ignores the route-search filters and has no VPN connection routes: the tests use
botocore's Stubber for those calls.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.errors import Finding, error, info, warning
from gpucluster.facts.catalog import Catalog
from gpucluster.tools.preflight.hybrid import H

if TYPE_CHECKING:
    from gpucluster.tools.preflight.clients import Clients

SITE_ATTACHMENTS = ("vpn", "direct-connect-gateway", "peering", "tgw-peering", "connect")
"""Transit Gateway attachment types that lead off AWS or to another region's gateway: the ways a site is reached."""


def _tgw(spec: ClusterSpec) -> str | None:
    hybrid = spec.hybrid
    if hybrid is None or hybrid.connectivity.type not in ("existing-tgw", "direct-connect"):
        return None
    return hybrid.connectivity.transit_gateway_id


def _association_table(aws: Clients, tgw: str) -> tuple[bool, str | None]:
    """(the Transit Gateway has route tables at all, the id of its default association route table)."""
    pages = aws.ec2.get_paginator("describe_transit_gateway_route_tables").paginate(
        Filters=[{"Name": "transit-gateway-id", "Values": [tgw]}]
    )
    tables = [t for page in pages for t in page["TransitGatewayRouteTables"]]
    tables = [t for t in tables if t.get("State") in ("available", "pending")]
    default = next((t["TransitGatewayRouteTableId"] for t in tables if t.get("DefaultAssociationRouteTable")), None)
    return bool(tables), default


def _search(aws: Clients, table: str, how: str, cidr: str) -> list[dict[str, Any]]:
    pages = aws.ec2.get_paginator("search_transit_gateway_routes").paginate(
        TransitGatewayRouteTableId=table, Filters=[{"Name": f"route-search.{how}", "Values": [cidr]}]
    )
    return [r for page in pages for r in page["Routes"]]


def _via(route: dict[str, Any]) -> str:
    hops = [f"{a.get('TransitGatewayAttachmentId')} ({a.get('ResourceType')} {a.get('ResourceId')})"
            for a in route.get("TransitGatewayAttachments", [])]  # fmt: skip
    return ", ".join(hops) or "no attachment"


def check_tgw_site_routes(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    """Each site network has an active route through a site attachment in the table the VPC attachment will use."""
    tgw = _tgw(spec)
    if tgw is None or spec.hybrid is None:
        return
    any_table, table = _association_table(aws, tgw)
    if not any_table:
        return  # no such gateway: check_gateways reports it
    path = f"{H}.connectivity.transitGatewayId"
    if table is None:
        yield warning(
            path,
            f"Transit Gateway {tgw} has no default association route table: the VPC attachment gpucluster creates "
            "would be associated with no route table, and the VPC could reach nothing through it",
            "associate the cluster's VPC attachment (output transitGatewayAttachmentId) with the route table that "
            "routes the site, after the first `pulumi up`",
            tgw,
            "hybrid-tgw-no-default-table",
        )
        return
    for i, cidr in enumerate(spec.hybrid.on_prem_cidrs):
        # Exact first; else a route covering the site network (AWS's supernet search may leave out the exact one).
        routes = _search(aws, table, "exact-match", cidr) or _search(aws, table, "supernet-of-match", cidr)
        active = [r for r in routes if r.get("State") == "active"]
        good = [
            r for r in active if any(a.get("ResourceType") in SITE_ATTACHMENTS for a in r.get("TransitGatewayAttachments", []))
        ]
        if good:
            best = max(good, key=lambda r: ipaddress.ip_network(r.get("DestinationCidrBlock") or "0.0.0.0/0").prefixlen)
            yield info(
                f"{H}.onPremCidrs[{i}]",
                f"Transit Gateway route table {table} routes {cidr} ({best.get('Type')} route "
                f"{best.get('DestinationCidrBlock')}) through {_via(best)}",
                "",
                cidr,
                "hybrid-tgw-site-routed",
            )
            continue
        seen = "; it has " + ", ".join(f"{r.get('DestinationCidrBlock')} ({r.get('State')}) to {_via(r)}" for r in routes) \
            if routes else ""  # fmt: skip
        yield warning(
            f"{H}.onPremCidrs[{i}]",
            f"the site is not reachable yet: Transit Gateway route table {table} has no active route for {cidr} through "
            f"a VPN, Direct Connect gateway or peering attachment{seen}",
            f"propagate the site's attachment into route table {table}, or add a static route for {cidr} to it there",
            cidr,
            "hybrid-tgw-site-unrouted",
        )


def _vpc_cidrs(spec: ClusterSpec, aws: Clients) -> tuple[str, list[str]]:
    net = spec.network
    if net.create_vpc:
        return "gpucluster:network.vpcCidr", [net.vpc_cidr]
    vpcs = aws.ec2.describe_vpcs(VpcIds=[net.vpc_id])["Vpcs"]
    return "gpucluster:network.vpcId", [a["CidrBlock"] for v in vpcs for a in v.get("CidrBlockAssociationSet", [])
                                        if a.get("CidrBlockState", {}).get("State", "associated") == "associated"]  # fmt: skip


def check_tgw_vpc_route(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    """The VPC's own CIDR (or a part of it) already routed to another attachment in the association table: the
    replies to the site would leave the Transit Gateway toward that attachment (a static route wins over the new
    VPC's propagated one, and a longer prefix wins over it)."""
    tgw = _tgw(spec)
    if tgw is None:
        return
    _, table = _association_table(aws, tgw)
    if table is None:
        return  # check_tgw_site_routes names it
    path, cidrs = _vpc_cidrs(spec, aws)
    own = spec.network.vpc_id
    for cidr in cidrs:
        routes = _search(aws, table, "exact-match", cidr) + _search(aws, table, "subnet-of-match", cidr)
        seen: set[str] = set()
        for route in routes:
            dest = str(route.get("DestinationCidrBlock"))
            attachments = route.get("TransitGatewayAttachments", [])
            if dest in seen or route.get("State") not in ("active", "blackhole"):
                continue
            if own is not None and attachments and all(a.get("ResourceId") == own for a in attachments):
                continue  # your VPC is attached already: its own route
            seen.add(dest)
            yield error(
                path,
                f"Transit Gateway route table {table} already routes {dest} (inside the VPC's CIDR {cidr}) to "
                f"{_via(route) if attachments else 'a blackhole'}: the cloud's replies to the site would go there, "
                "not to this VPC",
                f"delete that {route.get('Type')} route from {table}, or give the cluster a VPC CIDR no route in {table} "
                "covers more specifically",
                cidr,
                "hybrid-tgw-vpc-cidr-taken",
            )


def _vgw(spec: ClusterSpec) -> str | None:
    hybrid = spec.hybrid
    if hybrid is None or hybrid.connectivity.type != "direct-connect":
        return None
    return hybrid.connectivity.vpn_gateway_id


def check_vgw_attachment(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    """A virtual private gateway attaches to one VPC at a time: gpucluster attaches it to the cluster's."""
    vgw = _vgw(spec)
    if vgw is None:
        return
    try:
        found = aws.ec2.describe_vpn_gateways(VpnGatewayIds=[vgw])["VpnGateways"]
    except Exception as exc:
        if "NotFound" not in str(getattr(exc, "response", {}).get("Error", {}).get("Code", "")):
            raise
        return  # check_gateways reports it
    own = spec.network.vpc_id
    for gateway in found:
        for attached in gateway.get("VpcAttachments", []):
            vpc = attached.get("VpcId")
            if attached.get("State") in ("attaching", "attached") and vpc != own:
                yield error(
                    f"{H}.connectivity.vpnGatewayId",
                    f"virtual private gateway {vgw} is {attached.get('State')} to {vpc}: a virtual private gateway "
                    "attaches to one VPC at a time, and the cluster's VPC could not attach it",
                    f"detach it from {vpc} first, or reach the site through a Direct Connect gateway on a Transit "
                    "Gateway (transitGatewayId)",
                    vgw,
                    "hybrid-vgw-attached-elsewhere",
                )


def check_vgw_vpn_routes(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> Iterator[Finding]:
    """A VPN connection of the gateway with static routes (moto has none: Stubber) that leave a site network out."""
    vgw = _vgw(spec)
    if vgw is None or spec.hybrid is None:
        return
    connections = aws.ec2.describe_vpn_connections(Filters=[{"Name": "vpn-gateway-id", "Values": [vgw]}])["VpnConnections"]
    for vpn in connections:
        if vpn.get("State") not in ("available", "pending"):
            continue
        static = [r["DestinationCidrBlock"] for r in vpn.get("Routes", [])
                  if r.get("State") in ("available", "pending") and r.get("DestinationCidrBlock")]  # fmt: skip
        if not static:
            continue  # BGP, or no routes at all: nothing static to compare
        nets = [ipaddress.IPv4Network(r) for r in static]
        for i, cidr in enumerate(spec.hybrid.on_prem_cidrs):
            if any(ipaddress.IPv4Network(cidr).subnet_of(n) for n in nets):
                continue
            yield warning(
                f"{H}.onPremCidrs[{i}]",
                f"VPN connection {vpn.get('VpnConnectionId')} on {vgw} routes {', '.join(static)} statically, not "
                f"{cidr}: traffic for it can take Direct Connect only, never that VPN",
                f"add a static route for {cidr} to {vpn.get('VpnConnectionId')} (aws ec2 create-vpn-connection-route), "
                "or switch it to BGP",
                cidr,
                "hybrid-vgw-vpn-routes",
            )


ROUTES_CHECKED: dict[Any, tuple[str, str]] = {
    check_tgw_site_routes: ("the Transit Gateway's routes to the site", f"{H}.connectivity.transitGatewayId"),
    check_tgw_vpc_route: ("the Transit Gateway's routes to the VPC's CIDR", f"{H}.connectivity.transitGatewayId"),
    check_vgw_attachment: ("the virtual private gateway's VPC attachments", f"{H}.connectivity.vpnGatewayId"),
    check_vgw_vpn_routes: ("the VPN connections of the virtual private gateway", f"{H}.connectivity.vpnGatewayId"),
}
"""The route checks, with what each looks at and its config path (for "could not check …" findings)."""
