"""Hybrid preflight of the routes an existing link must have (gpucluster.tools.preflight.routes). moto 5 ignores
SearchTransitGatewayRoutes' route-search filters and has no VPN connection routes, so those calls go through
botocore's Stubber (each stubbed call is checked against the real botocore model: operation, parameters, response
shape); the virtual private gateway's attachments come from moto's EC2, which models them faithfully."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.stub import Stubber

from gpucluster.tools.preflight import Clients, preflight
from gpucluster.tools.preflight import run as preflight_module
from gpucluster.tools.preflight.routes import (
    check_tgw_site_routes,
    check_tgw_vpc_route,
    check_vgw_attachment,
    check_vgw_vpn_routes,
)
from tests.config.hybrid.test_hybrid_checks import H
from tests.tools.test_preflight_hybrid import CATALOG, spec_with


@pytest.fixture
def aws(moto_endpoint, aws_env) -> Clients:
    """Clients on a freshly reset moto server; the tests stub the EC2 calls moto mis-models."""
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST"))
    return Clients.create("us-east-1", moto_endpoint)


TGW = "tgw-0123456789abcdef0"
RTB = "tgw-rtb-0aaaaaaaaaaaaaaa1"
OTHER_RTB = "tgw-rtb-0bbbbbbbbbbbbbbb2"
VGW = "vgw-0123456789abcdef0"


def tgw_spec(kind: str = "existing-tgw", **hybrid: Any):
    return spec_with(connectivity={"type": kind, "transitGatewayId": TGW}, **hybrid)


def tables(default: bool = True) -> dict[str, Any]:
    return {"TransitGatewayRouteTables": [
        {"TransitGatewayRouteTableId": OTHER_RTB, "TransitGatewayId": TGW, "State": "available",
         "DefaultAssociationRouteTable": False, "DefaultPropagationRouteTable": False},
        {"TransitGatewayRouteTableId": RTB, "TransitGatewayId": TGW, "State": "available",
         "DefaultAssociationRouteTable": default, "DefaultPropagationRouteTable": default},
    ]}  # fmt: skip


TABLES_ASKED = {"Filters": [{"Name": "transit-gateway-id", "Values": [TGW]}]}


def route(cidr: str, kind: str = "vpn", resource: str = "vpn-0123456789abcdef0", state: str = "active",
          attachment: str = "tgw-attach-0123456789abcdef0", type_: str = "propagated") -> dict[str, Any]:  # fmt: skip
    hops = [{"ResourceId": resource, "TransitGatewayAttachmentId": attachment, "ResourceType": kind}] if kind else []
    return {"DestinationCidrBlock": cidr, "TransitGatewayAttachments": hops, "Type": type_, "State": state}


def search(stub: Stubber, how: str, cidr: str, routes: list[dict[str, Any]]) -> None:
    stub.add_response(
        "search_transit_gateway_routes",
        {"Routes": routes, "AdditionalRoutesAvailable": False},
        {"TransitGatewayRouteTableId": RTB, "Filters": [{"Name": f"route-search.{how}", "Values": [cidr]}]},
    )


def site_findings(aws, spec, *searches: tuple[str, str, list[dict[str, Any]]], default: bool = True):
    with Stubber(aws.ec2) as stub:
        stub.add_response("describe_transit_gateway_route_tables", tables(default), TABLES_ASKED)
        for how, cidr, routes in searches:
            search(stub, how, cidr, routes)
        found = list(check_tgw_site_routes(spec, CATALOG, aws))
        stub.assert_no_pending_responses()
    return found


def test_site_routed_through_the_vpn_attachment(aws):
    [f] = site_findings(aws, tgw_spec(), ("exact-match", "10.20.0.0/16", [route("10.20.0.0/16")]))
    assert (f.level.value, f.code, f.path, f.value) == ("info", "hybrid-tgw-site-routed", f"{H}.onPremCidrs[0]", "10.20.0.0/16")
    assert f.message == (
        f"Transit Gateway route table {RTB} routes 10.20.0.0/16 (propagated route 10.20.0.0/16) through "
        "tgw-attach-0123456789abcdef0 (vpn vpn-0123456789abcdef0)"
    )


def test_site_routed_by_a_covering_route_of_a_direct_connect_gateway(aws):
    """No exact route: the supernet search finds 10.0.0.0/8 through the Direct Connect gateway (direct-connect)."""
    dx = route("10.0.0.0/8", "direct-connect-gateway", "dx-gw-1", attachment="tgw-attach-0dddddddddddddddd", type_="static")
    [f] = site_findings(
        aws,
        tgw_spec("direct-connect"),
        ("exact-match", "10.20.0.0/16", []),
        ("supernet-of-match", "10.20.0.0/16", [dx]),
    )
    assert (f.level.value, f.code) == ("info", "hybrid-tgw-site-routed")
    assert f.message.endswith("(static route 10.0.0.0/8) through tgw-attach-0dddddddddddddddd (direct-connect-gateway dx-gw-1)")


def test_site_not_routed_yet(aws):
    [f] = site_findings(aws, tgw_spec(), ("exact-match", "10.20.0.0/16", []), ("supernet-of-match", "10.20.0.0/16", []))
    assert (f.level.value, f.code, f.path) == ("warning", "hybrid-tgw-site-unrouted", f"{H}.onPremCidrs[0]")
    assert f.message == (
        f"the site is not reachable yet: Transit Gateway route table {RTB} has no active route for 10.20.0.0/16 "
        "through a VPN, Direct Connect gateway or peering attachment"
    )
    assert f.fix == f"propagate the site's attachment into route table {RTB}, or add a static route for 10.20.0.0/16 to it there"


def test_site_route_to_a_vpc_or_a_blackhole_is_no_route(aws):
    """A route to another VPC, or a blackhole (the site's attachment was deleted), does not reach the site."""
    wrong = [route("10.20.0.0/16", "vpc", "vpc-0fffffffffffffff0"), route("10.20.0.0/16", state="blackhole")]
    spec = tgw_spec(onPremCidrs=["10.20.0.0/16", "10.30.0.0/16"])
    found = site_findings(
        aws,
        spec,
        ("exact-match", "10.20.0.0/16", wrong),
        ("exact-match", "10.30.0.0/16", [route("10.30.0.0/16", "peering", "tgw-0eeeeeeeeeeeeeeee")]),
    )
    assert [(f.code, f.path) for f in found] == [
        ("hybrid-tgw-site-unrouted", f"{H}.onPremCidrs[0]"),
        ("hybrid-tgw-site-routed", f"{H}.onPremCidrs[1]"),
    ]
    assert found[0].message.endswith(
        "peering attachment; it has 10.20.0.0/16 (active) to tgw-attach-0123456789abcdef0 (vpc vpc-0fffffffffffffff0), "
        "10.20.0.0/16 (blackhole) to tgw-attach-0123456789abcdef0 (vpn vpn-0123456789abcdef0)"
    )


def test_no_default_association_table(aws):
    [f] = site_findings(aws, tgw_spec(), default=False)
    assert (f.level.value, f.code, f.path) == ("warning", "hybrid-tgw-no-default-table", f"{H}.connectivity.transitGatewayId")
    assert f.message.startswith(f"Transit Gateway {TGW} has no default association route table")


def test_route_tables_read_on_every_page(aws):
    """The default association table on the second page of DescribeTransitGatewayRouteTables is still found, and the
    site's route on the second page of SearchTransitGatewayRoutes too."""
    first, second = tables()["TransitGatewayRouteTables"]
    with Stubber(aws.ec2) as stub:
        stub.add_response("describe_transit_gateway_route_tables", {"TransitGatewayRouteTables": [first], "NextToken": "p2"},
                          TABLES_ASKED)  # fmt: skip
        stub.add_response("describe_transit_gateway_route_tables", {"TransitGatewayRouteTables": [second]},
                          {**TABLES_ASKED, "NextToken": "p2"})  # fmt: skip
        asked = {"TransitGatewayRouteTableId": RTB, "Filters": [{"Name": "route-search.exact-match", "Values": ["10.20.0.0/16"]}]}
        stub.add_response("search_transit_gateway_routes", {"Routes": [route("10.20.0.0/16", "vpc", "vpc-0fffffffffffffff0")],
                          "AdditionalRoutesAvailable": True, "NextToken": "r2"}, asked)  # fmt: skip
        stub.add_response("search_transit_gateway_routes", {"Routes": [route("10.20.0.0/16")]}, {**asked, "NextToken": "r2"})
        found = list(check_tgw_site_routes(tgw_spec(), CATALOG, aws))
        stub.assert_no_pending_responses()
    assert [f.code for f in found] == ["hybrid-tgw-site-routed"]


def test_missing_gateway_is_left_to_the_gateway_check(aws):
    with Stubber(aws.ec2) as stub:
        stub.add_response("describe_transit_gateway_route_tables", {"TransitGatewayRouteTables": []}, TABLES_ASKED)
        assert list(check_tgw_site_routes(tgw_spec(), CATALOG, aws)) == []


def vpc_findings(aws, spec, exact: list[dict[str, Any]], subnets: list[dict[str, Any]], cidr: str = "10.0.0.0/16"):
    with Stubber(aws.ec2) as stub:
        stub.add_response("describe_transit_gateway_route_tables", tables(), TABLES_ASKED)
        search(stub, "exact-match", cidr, exact)
        search(stub, "subnet-of-match", cidr, subnets)
        found = list(check_tgw_vpc_route(spec, CATALOG, aws))
        stub.assert_no_pending_responses()
    return found


def test_vpc_cidr_free_in_the_association_table(aws):
    """A covering 10.0.0.0/8 to another VPC is no conflict: the new VPC's longer prefix wins."""
    assert vpc_findings(aws, tgw_spec(), [], []) == []


def test_vpc_cidr_already_routed_to_another_attachment(aws):
    taken = route("10.0.0.0/16", "vpc", "vpc-0fffffffffffffff0", attachment="tgw-attach-0fffffffffffffff0", type_="static")
    part = route("10.0.4.0/24", "vpn", "vpn-0123456789abcdef0")
    found = vpc_findings(aws, tgw_spec(), [taken], [taken, part])
    assert [(f.level.value, f.code, f.path, f.value) for f in found] == [
        ("error", "hybrid-tgw-vpc-cidr-taken", "gpucluster:network.vpcCidr", "10.0.0.0/16"),
        ("error", "hybrid-tgw-vpc-cidr-taken", "gpucluster:network.vpcCidr", "10.0.0.0/16"),
    ]
    assert found[0].message == (
        f"Transit Gateway route table {RTB} already routes 10.0.0.0/16 (inside the VPC's CIDR 10.0.0.0/16) to "
        "tgw-attach-0fffffffffffffff0 (vpc vpc-0fffffffffffffff0): the cloud's replies to the site would go there, not "
        "to this VPC"
    )
    assert found[0].fix.startswith(f"delete that static route from {RTB}")
    assert "routes 10.0.4.0/24" in found[1].message and "(vpn vpn-0123456789abcdef0)" in found[1].message


def test_vpc_cidr_blackholed(aws):
    [f] = vpc_findings(aws, tgw_spec(), [route("10.0.0.0/16", kind="", state="blackhole", type_="static")], [])
    assert "already routes 10.0.0.0/16 (inside the VPC's CIDR 10.0.0.0/16) to a blackhole" in f.message


def test_own_vpc_already_attached_is_its_own_route(aws):
    """With your own VPC (attached to the gateway before), its propagated route is its own; another one is not."""
    import copy

    from gpucluster.load import load_spec
    from tests.config.hybrid.test_hybrid_checks import stack

    config = copy.deepcopy(stack("hybrid-slurm"))
    config[H]["connectivity"] = {"type": "existing-tgw", "transitGatewayId": TGW}
    vpc = "vpc-0123456789abcdef0"
    config["gpucluster:network"] = {"vpcId": vpc, "subnets": [
        {"id": "subnet-0123456789abcdef0", "availabilityZone": "us-east-1a"},
        {"id": "subnet-0123456789abcdef1", "availabilityZone": "us-east-1b"}]}  # fmt: skip
    spec = load_spec(config, stack="byo", catalog=CATALOG).spec
    mine = route("172.31.0.0/16", "vpc", vpc)
    theirs = route("172.31.8.0/24", "vpc", "vpc-0fffffffffffffff0")
    with Stubber(aws.ec2) as stub:
        stub.add_response("describe_transit_gateway_route_tables", tables(), TABLES_ASKED)
        stub.add_response("describe_vpcs", {"Vpcs": [{"VpcId": vpc, "CidrBlockAssociationSet": [
            {"CidrBlock": "172.31.0.0/16", "CidrBlockState": {"State": "associated"}},
            {"CidrBlock": "100.64.0.0/16", "CidrBlockState": {"State": "disassociated"}}]}]}, {"VpcIds": [vpc]})  # fmt: skip
        search(stub, "exact-match", "172.31.0.0/16", [mine])
        search(stub, "subnet-of-match", "172.31.0.0/16", [mine, theirs])
        found = list(check_tgw_vpc_route(spec, CATALOG, aws))
        stub.assert_no_pending_responses()
    assert [(f.code, f.path) for f in found] == [("hybrid-tgw-vpc-cidr-taken", "gpucluster:network.vpcId")]
    assert "already routes 172.31.8.0/24 (inside the VPC's CIDR 172.31.0.0/16)" in found[0].message


def test_vpn_types_ask_no_routes(aws):
    spec = spec_with()  # vpn-tgw: gpucluster makes the gateway and its routes
    with Stubber(aws.ec2):  # nothing queued: any call would raise
        for check in (check_tgw_site_routes, check_tgw_vpc_route, check_vgw_attachment, check_vgw_vpn_routes):
            assert list(check(spec, CATALOG, aws)) == []


def test_vgw_attached_to_another_vpc(aws):
    """moto's EC2 models VPN gateway attachments faithfully."""
    vgw = aws.ec2.create_vpn_gateway(Type="ipsec.1")["VpnGateway"]["VpnGatewayId"]
    spec = spec_with(connectivity={"type": "direct-connect", "vpnGatewayId": vgw})
    assert list(check_vgw_attachment(spec, CATALOG, aws)) == []
    other = aws.ec2.create_vpc(CidrBlock="172.16.0.0/16")["Vpc"]["VpcId"]
    aws.ec2.attach_vpn_gateway(VpnGatewayId=vgw, VpcId=other)
    [f] = list(check_vgw_attachment(spec, CATALOG, aws))
    assert (f.level.value, f.code, f.path, f.value) == (
        "error",
        "hybrid-vgw-attached-elsewhere",
        f"{H}.connectivity.vpnGatewayId",
        vgw,
    )
    assert f.message == (
        f"virtual private gateway {vgw} is attached to {other}: a virtual private gateway attaches to one VPC at a "
        "time, and the cluster's VPC could not attach it"
    )
    assert f.fix.startswith(f"detach it from {other} first")
    aws.ec2.detach_vpn_gateway(VpnGatewayId=vgw, VpcId=other)
    assert list(check_vgw_attachment(spec, CATALOG, aws)) == []


def test_vgw_missing_is_left_to_the_gateway_check(aws):
    spec = spec_with(connectivity={"type": "direct-connect", "vpnGatewayId": VGW})
    assert list(check_vgw_attachment(spec, CATALOG, aws)) == []


def vpn(routes: list[tuple[str, str]], state: str = "available", vpn_id: str = "vpn-0123456789abcdef0") -> dict[str, Any]:
    return {"VpnConnectionId": vpn_id, "State": state, "Type": "ipsec.1", "CustomerGatewayId": "cgw-0123456789abcdef0",
            "VpnGatewayId": VGW, "Category": "VPN", "Options": {"StaticRoutesOnly": bool(routes)},
            "Routes": [{"DestinationCidrBlock": c, "Source": "Static", "State": s} for c, s in routes]}  # fmt: skip


def vpn_findings(aws, connections: list[dict[str, Any]], cidrs: list[str]):
    spec = spec_with(connectivity={"type": "direct-connect", "vpnGatewayId": VGW}, onPremCidrs=cidrs)
    with Stubber(aws.ec2) as stub:
        stub.add_response(
            "describe_vpn_connections",
            {"VpnConnections": connections},
            {"Filters": [{"Name": "vpn-gateway-id", "Values": [VGW]}]},
        )
        found = list(check_vgw_vpn_routes(spec, CATALOG, aws))
        stub.assert_no_pending_responses()
    return found


def test_vgw_vpn_static_routes_that_miss_a_site_network(aws):
    found = vpn_findings(
        aws, [vpn([("10.20.0.0/16", "available"), ("10.30.0.0/16", "deleted")])], ["10.20.0.0/16", "10.30.0.0/16"]
    )
    [f] = found
    assert (f.level.value, f.code, f.path, f.value) == ("warning", "hybrid-vgw-vpn-routes", f"{H}.onPremCidrs[1]", "10.30.0.0/16")
    assert f.message == (
        f"VPN connection vpn-0123456789abcdef0 on {VGW} routes 10.20.0.0/16 statically, not 10.30.0.0/16: traffic for "
        "it can take Direct Connect only, never that VPN"
    )
    assert f.fix == (
        "add a static route for 10.30.0.0/16 to vpn-0123456789abcdef0 (aws ec2 create-vpn-connection-route), or switch it to BGP"
    )


def test_vgw_vpn_routes_that_cover_the_site_bgp_and_deleted_vpns_pass(aws):
    covering = vpn([("10.0.0.0/8", "available")])
    bgp = vpn([], vpn_id="vpn-0bbbbbbbbbbbbbbb0")
    gone = vpn([("192.168.0.0/24", "deleted")], state="deleted", vpn_id="vpn-0ccccccccccccccc0")
    assert vpn_findings(aws, [covering, bgp, gone], ["10.20.0.0/16", "10.30.0.0/16"]) == []


def test_refused_route_search_is_reported_and_the_other_checks_run(aws, monkeypatch):
    """EC2 refuses SearchTransitGatewayRoutes for the site routes: one "could not check …" warning, and the VPC
    route check (run by the same preflight loop) still finds the taken CIDR."""
    route_checks = (check_tgw_site_routes, check_tgw_vpc_route, check_vgw_attachment, check_vgw_vpn_routes)
    monkeypatch.setattr(preflight_module, "CHECKS", route_checks)
    taken = route("10.0.0.0/16", "vpc", "vpc-0fffffffffffffff0", type_="static")
    with Stubber(aws.ec2) as stub:
        stub.add_response("describe_transit_gateway_route_tables", tables(), TABLES_ASKED)
        stub.add_client_error("search_transit_gateway_routes", "UnauthorizedOperation", "You are not authorized", 403)
        stub.add_response("describe_transit_gateway_route_tables", tables(), TABLES_ASKED)
        search(stub, "exact-match", "10.0.0.0/16", [taken])
        search(stub, "subnet-of-match", "10.0.0.0/16", [])
        findings = preflight(tgw_spec(), CATALOG, aws)
        stub.assert_no_pending_responses()
    assert [(f.level.value, f.code, f.path) for f in findings] == [
        ("warning", "check-failed", f"{H}.connectivity.transitGatewayId"),
        ("error", "hybrid-tgw-vpc-cidr-taken", "gpucluster:network.vpcCidr"),
    ]
    assert findings[0].message == (
        "could not check the Transit Gateway's routes to the site: UnauthorizedOperation: You are not authorized"
    )


def test_the_route_checks_are_in_preflight():
    for check in (check_tgw_site_routes, check_tgw_vpc_route, check_vgw_attachment, check_vgw_vpn_routes):
        assert check in preflight_module.CHECKS and check in preflight_module.CHECKED


@pytest.mark.parametrize("kind", ["existing-tgw", "direct-connect"])
def test_clean_pass_over_a_transit_gateway(aws, kind):
    """Site routed, VPC CIDR free: only the info finding, for both ways of reaching the gateway."""
    spec = tgw_spec(kind)
    with Stubber(aws.ec2) as stub:
        stub.add_response("describe_transit_gateway_route_tables", tables(), TABLES_ASKED)
        search(stub, "exact-match", "10.20.0.0/16", [route("10.20.0.0/16")])
        stub.add_response("describe_transit_gateway_route_tables", tables(), TABLES_ASKED)
        search(stub, "exact-match", "10.0.0.0/16", [])
        search(stub, "subnet-of-match", "10.0.0.0/16", [])
        found = [f for c in (check_tgw_site_routes, check_tgw_vpc_route) for f in c(spec, CATALOG, aws)]
        stub.assert_no_pending_responses()
    assert [(f.level.value, f.code) for f in found] == [("info", "hybrid-tgw-site-routed")]


def test_refused_vpn_connections_are_reported_and_the_attachment_check_runs(aws, monkeypatch):
    """DescribeVpnConnections refused: "could not check" at vpnGatewayId; the attachment check still finds the VPC."""
    route_checks = (check_tgw_site_routes, check_tgw_vpc_route, check_vgw_attachment, check_vgw_vpn_routes)
    monkeypatch.setattr(preflight_module, "CHECKS", route_checks)
    spec = spec_with(connectivity={"type": "direct-connect", "vpnGatewayId": VGW})
    gateway = {"VpnGatewayId": VGW, "State": "available", "Type": "ipsec.1",
               "VpcAttachments": [{"VpcId": "vpc-0fffffffffffffff0", "State": "attached"}]}  # fmt: skip
    with Stubber(aws.ec2) as stub:
        stub.add_response("describe_vpn_gateways", {"VpnGateways": [gateway]}, {"VpnGatewayIds": [VGW]})
        stub.add_client_error("describe_vpn_connections", "UnauthorizedOperation", "You are not authorized", 403)
        findings = preflight(spec, CATALOG, aws)
        stub.assert_no_pending_responses()
    assert [(f.level.value, f.code, f.path) for f in findings] == [
        ("error", "hybrid-vgw-attached-elsewhere", f"{H}.connectivity.vpnGatewayId"),
        ("warning", "check-failed", f"{H}.connectivity.vpnGatewayId"),
    ]
    assert findings[0].message.startswith(f"virtual private gateway {VGW} is attached to vpc-0fffffffffffffff0:")
    assert findings[1].message == (
        "could not check the VPN connections of the virtual private gateway: UnauthorizedOperation: You are not authorized"
    )
