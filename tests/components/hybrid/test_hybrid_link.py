"""HybridLink under mocks, built from its Args as another program would: every connectivity type, static
routes without BGP, DNS, and a VPC whose route tables are not ours."""

from __future__ import annotations

from gpucluster.components.hybrid.hybrid_link import HybridLink, HybridLinkArgs

TABLES = {"us-east-1a": "rtb-0aaaaaaaaaaaaaaaa", "us-east-1b": "rtb-0bbbbbbbbbbbbbbbb"}
SUBNETS = ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"]
CIDRS = ["10.20.0.0/16", "10.96.0.0/16"]


def link(connectivity: dict, *, tables: dict | None = None, subnets: list | None = None, dns: dict | None = None) -> HybridLink:
    return HybridLink("l", link_args(connectivity, tables=tables, subnets=subnets, dns=dns))


def link_args(
    connectivity: dict, *, tables: dict | None = None, subnets: list | None = None, dns: dict | None = None
) -> HybridLinkArgs:
    hybrid: dict = {
        "site": "lab",
        "on_prem_cidrs": CIDRS,
        "controller": {"host": "ctl", "address": "10.20.0.10", "slurm_version": "23.11"},
        "connectivity": connectivity,
        "credentials": {"type": "ssm"},
    }
    if dns is not None:
        hybrid["dns"] = dns
    args: HybridLinkArgs = {
        "cluster_name": "c",
        "hybrid": hybrid,  # type: ignore[typeddict-item]
        "vpc_id": "vpc-0123456789abcdef0",
        "vpc_cidr": "10.0.0.0/16",
        "private_subnet_ids": SUBNETS if subnets is None else subnets,
        "private_route_table_ids": TABLES if tables is None else tables,
        "tags": {"team": "ml"},
    }
    return args


def test_vpn_on_a_virtual_private_gateway_with_static_routes(run_components):
    plan = run_components(lambda: link({"type": "vpn-vgw", "customer_gateway_ip": "198.51.100.7"}))
    vgw = plan.of_type("aws:ec2/vpnGateway:VpnGateway")[0]
    assert vgw.inputs["vpcId"] == "vpc-0123456789abcdef0" and vgw.inputs["amazonSideAsn"] == "64512"
    vpn = plan.of_type("aws:ec2/vpnConnection:VpnConnection")[0]
    assert vpn.inputs["vpnGatewayId"] == vgw.id and vpn.inputs["staticRoutesOnly"] is True
    assert "tunnelBandwidth" not in vpn.inputs  # large tunnels are a Transit Gateway's
    # no BGP: the VPN carries a static route to each on-prem network
    static = plan.of_type("aws:ec2/vpnConnectionRoute:VpnConnectionRoute")
    assert sorted(r.inputs["destinationCidrBlock"] for r in static) == CIDRS
    assert all(r.inputs["vpnConnectionId"] == vpn.id for r in static)
    # every private route table learns them from the gateway
    propagation = plan.of_type("aws:ec2/vpnGatewayRoutePropagation:VpnGatewayRoutePropagation")
    assert sorted(r.inputs["routeTableId"] for r in propagation) == sorted(TABLES.values())
    assert all(r.inputs["vpnGatewayId"] == vgw.id for r in propagation)
    assert plan.of_type("aws:ec2/route:Route") == [] and plan.of_type("aws:ec2transitgateway/transitGateway:TransitGateway") == []


def test_vpn_on_a_new_transit_gateway_without_bgp_routes_in_its_table(run_components):
    plan = run_components(lambda: link({"type": "vpn-tgw", "customer_gateway_ip": "198.51.100.7", "tunnel_bandwidth": "large"}))
    tgw = plan.of_type("aws:ec2transitgateway/transitGateway:TransitGateway")[0]
    assert tgw.inputs["vpnEcmpSupport"] == "disable"  # ECMP needs BGP
    vpn = plan.of_type("aws:ec2/vpnConnection:VpnConnection")[0]
    assert vpn.inputs["tunnelBandwidth"] == "large" and vpn.inputs["staticRoutesOnly"] is True
    tgw_routes = plan.of_type("aws:ec2transitgateway/route:Route")
    assert sorted(r.inputs["destinationCidrBlock"] for r in tgw_routes) == CIDRS
    assert {r.inputs["transitGatewayAttachmentId"] for r in tgw_routes} == {vpn.state["transitGatewayAttachmentId"]}
    assert {r.inputs["transitGatewayRouteTableId"] for r in tgw_routes} == {tgw.state["associationDefaultRouteTableId"]}
    assert plan.of_type("aws:ec2/vpnConnectionRoute:VpnConnectionRoute") == []  # not on a Transit Gateway VPN
    vpc_routes = plan.of_type("aws:ec2/route:Route")
    assert sorted((r.inputs["routeTableId"], r.inputs["destinationCidrBlock"]) for r in vpc_routes) == sorted(
        (t, c) for t in TABLES.values() for c in CIDRS
    )


def test_existing_transit_gateway_is_attached_and_routed_only(run_components):
    plan = run_components(lambda: link({"type": "existing-tgw", "transit_gateway_id": "tgw-0123456789abcdef0"}))
    for token in ("CustomerGateway", "VpnConnection", "VpnGateway"):
        assert plan.of_type(f"aws:ec2/{token[0].lower() + token[1:]}:{token}") == []
    assert plan.of_type("aws:ec2transitgateway/transitGateway:TransitGateway") == []
    attachment = plan.of_type("aws:ec2transitgateway/vpcAttachment:VpcAttachment")[0].inputs
    assert attachment["transitGatewayId"] == "tgw-0123456789abcdef0" and attachment["subnetIds"] == SUBNETS
    routes = plan.of_type("aws:ec2/route:Route")
    assert len(routes) == len(TABLES) * len(CIDRS)
    assert {r.inputs["transitGatewayId"] for r in routes} == {"tgw-0123456789abcdef0"}


def test_direct_connect_over_a_virtual_private_gateway(run_components):
    plan = run_components(lambda: link({"type": "direct-connect", "vpn_gateway_id": "vgw-0123456789abcdef0"}))
    attached = plan.of_type("aws:ec2/vpnGatewayAttachment:VpnGatewayAttachment")[0].inputs
    assert attached == {"vpcId": "vpc-0123456789abcdef0", "vpnGatewayId": "vgw-0123456789abcdef0"}
    propagation = plan.of_type("aws:ec2/vpnGatewayRoutePropagation:VpnGatewayRoutePropagation")
    assert sorted(r.inputs["routeTableId"] for r in propagation) == sorted(TABLES.values())
    assert plan.of_type("aws:ec2/vpnConnection:VpnConnection") == []


def test_route_tables_not_given_means_no_routes_and_a_warning(run_components):
    plan = run_components(lambda: link({"type": "existing-tgw", "transit_gateway_id": "tgw-0123456789abcdef0"}, tables={}))
    assert plan.of_type("aws:ec2/route:Route") == []
    assert any("route 10.20.0.0/16, 10.96.0.0/16 to the link's gateway" in line for line in plan.logs)


def test_no_inbound_endpoint_when_not_asked(run_components):
    dns = {"on_prem_domain": "lab.example.internal", "on_prem_resolvers": ["10.20.0.2"], "inbound": False}
    plan = run_components(lambda: link({"type": "existing-tgw", "transit_gateway_id": "tgw-0123456789abcdef0"}, dns=dns))
    assert [r.inputs["direction"] for r in plan.of_type("aws:route53/resolverEndpoint:ResolverEndpoint")] == ["OUTBOUND"]
