"""The two hybrid stacks through the real program under the plan's mocks: the link, the Slurm site's
security group both ways, no head node, the site's credentials, and no secret in a plain output."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpucluster.tools.plan.run.engine import Plan
from gpucluster.tools.plan.run.stackfile import SECRET
from tests.plans import shipped_plan

ROUTE = "aws:ec2/route:Route"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"


@pytest.fixture(scope="module")
def slurm_plan() -> Plan:
    plan = shipped_plan("hybrid-slurm")
    assert plan.error is None, plan.error
    return plan


@pytest.fixture(scope="module")
def eks_plan() -> Plan:
    plan = shipped_plan("hybrid-eks")
    assert plan.error is None, plan.error
    return plan


def private_tables(plan: Plan) -> list[Any]:
    return [r for r in plan.of_type("aws:ec2/routeTable:RouteTable") if "-private-" in r.name]


@pytest.mark.parametrize(
    ("stack", "cidrs"), [("hybrid-slurm", ["10.20.0.0/16"]), ("hybrid-eks", ["10.20.0.0/16", "10.96.0.0/16"])]
)
def test_every_private_route_table_routes_every_onprem_cidr_to_the_transit_gateway(stack, cidrs, slurm_plan, eks_plan):
    plan = slurm_plan if stack == "hybrid-slurm" else eks_plan
    tgw = plan.of_type("aws:ec2transitgateway/transitGateway:TransitGateway")
    assert len(tgw) == 1
    attachment = plan.of_type("aws:ec2transitgateway/vpcAttachment:VpcAttachment")[0]
    tables = private_tables(plan)
    assert len(tables) == 2  # one per zone
    private_subnets = {r.id for r in plan.of_type("aws:ec2/subnet:Subnet") if "-private-" in r.name}
    assert set(attachment.inputs["subnetIds"]) == private_subnets
    routes = [r for r in plan.of_type(ROUTE) if r.inputs.get("transitGatewayId")]
    assert sorted((r.inputs["routeTableId"], r.inputs["destinationCidrBlock"]) for r in routes) == sorted(
        (t.id, c) for t in tables for c in cidrs
    )
    assert all(r.inputs["transitGatewayId"] == tgw[0].id for r in routes)
    assert all(attachment.urn in r.dependencies for r in routes)  # a TGW route needs the VPC attached first


@pytest.mark.parametrize("stack", ["hybrid-slurm", "hybrid-eks"])
def test_private_tables_keep_their_nat_route_as_a_route_resource(stack, slurm_plan, eks_plan):
    """Inline routes and Route resources on one table fight (each update removes the other's): the tables
    carry none inline, and the NAT default route is a resource of its own."""
    plan = slurm_plan if stack == "hybrid-slurm" else eks_plan
    nat = plan.of_type("aws:ec2/natGateway:NatGateway")[0]
    for table in private_tables(plan):
        assert "routes" not in table.inputs or table.inputs["routes"] is None
        defaults = [
            r
            for r in plan.of_type(ROUTE)
            if r.inputs["routeTableId"] == table.id and r.inputs["destinationCidrBlock"] == "0.0.0.0/0"
        ]
        assert [r.inputs["natGatewayId"] for r in defaults] == [nat.id]


def test_non_hybrid_stacks_keep_inline_routes():
    from tests.conftest import make_config, plan_config

    plan = plan_config(make_config())
    assert plan.error is None
    assert plan.of_type(ROUTE) == []
    assert all(t.inputs["routes"] for t in private_tables(plan))


def test_vpn_on_a_new_transit_gateway_with_bgp(slurm_plan):
    cgw = slurm_plan.of_type("aws:ec2/customerGateway:CustomerGateway")[0].inputs
    assert cgw["ipAddress"] == "203.0.113.10" and cgw["bgpAsn"] == "65010" and cgw["type"] == "ipsec.1"
    tgw = slurm_plan.of_type("aws:ec2transitgateway/transitGateway:TransitGateway")[0]
    assert tgw.inputs["vpnEcmpSupport"] == "enable" and tgw.inputs["amazonSideAsn"] == 64512
    vpn = slurm_plan.of_type("aws:ec2/vpnConnection:VpnConnection")[0].inputs
    assert vpn["transitGatewayId"] == tgw.id and vpn["staticRoutesOnly"] is False
    assert "vpnGatewayId" not in vpn
    # BGP: no static routes anywhere
    assert slurm_plan.of_type("aws:ec2transitgateway/route:Route") == []
    assert slurm_plan.of_type("aws:ec2/vpnConnectionRoute:VpnConnectionRoute") == []


@pytest.mark.parametrize("stack", ["hybrid-slurm", "hybrid-eks"])
def test_no_preshared_key_in_a_plain_output(stack, slurm_plan, eks_plan):
    plan = slurm_plan if stack == "hybrid-slurm" else eks_plan
    vpn = plan.of_type("aws:ec2/vpnConnection:VpnConnection")[0]
    keys = [vpn.state["tunnel1PresharedKey"], vpn.state["tunnel2PresharedKey"]]
    assert all(k.startswith("fakepsk") for k in keys)  # the mock did hand the program keys
    text = json.dumps(plan.outputs)
    assert not any(k in text for k in keys)
    assert plan.outputs["hybridTunnelKeys"] == SECRET
    # the rest of the hybrid output stays readable
    assert plan.outputs["hybrid"]["link"]["tunnelAddresses"] == [vpn.state["tunnel1Address"], vpn.state["tunnel2Address"]]


def test_hybrid_slurm_has_no_head_node(slurm_plan):
    for token in ("aws:ebs/volume:Volume", "aws:route53/zone:Zone"):
        assert slurm_plan.of_type(token) == [], token
    # The one instance and interface are the file system's storage setup host (its admin host, where no head node is).
    assert [r.name for r in slurm_plan.of_type("aws:ec2/instance:Instance")] == ["hybrid-slurm-lustre-setup"]
    assert [r.name for r in slurm_plan.of_type("aws:ec2/networkInterface:NetworkInterface")] == ["hybrid-slurm-lustre-setup-eni"]
    assert not [r for r in slurm_plan.resources if "head" in r.name]
    slurm = slurm_plan.outputs["slurm"]
    assert slurm["controller"] == "10.20.0.10"
    assert "headInstanceId" not in slurm and "connect" not in slurm


def test_slurm_site_security_group_both_ways(slurm_plan):
    sg = slurm_plan.by_name("hybrid-slurm-slurm-onprem")
    rules = sorted(
        (kind, r.inputs["cidrIpv4"], r.inputs["ipProtocol"], r.inputs["fromPort"], r.inputs["toPort"])
        for kind, token in (("in", INGRESS), ("out", EGRESS))
        for r in slurm_plan.of_type(token)
        if r.inputs["securityGroupId"] == sg.id
    )
    assert rules == sorted(
        [
            ("in", "10.20.0.0/16", "tcp", 6818, 6818),  # slurmctld and srun → slurmd
            ("in", "10.20.0.10/32", "tcp", 60001, 63000),  # slurmctld → an srun on a cloud node
            ("out", "10.20.0.10/32", "tcp", 6817, 6817),  # slurmd → slurmctld
            ("out", "10.20.8.0/24", "tcp", 60001, 63000),  # slurmstepd → srun on the login nodes
        ]
    )
    # every interface of the burst group's launch template carries it
    for lt in slurm_plan.of_type("aws:ec2/launchTemplate:LaunchTemplate"):
        assert all(sg.id in nic["securityGroups"] for nic in lt.inputs["networkInterfaces"])
    assert slurm_plan.outputs["hybrid"]["slurm"]["nodeSecurityGroupId"] == sg.id


def test_resolver_endpoints_and_forwarding_rule(slurm_plan):
    endpoints = {r.inputs["direction"]: r for r in slurm_plan.of_type("aws:route53/resolverEndpoint:ResolverEndpoint")}
    assert set(endpoints) == {"INBOUND", "OUTBOUND"}
    for endpoint in endpoints.values():
        assert len({a["subnetId"] for a in endpoint.inputs["ipAddresses"]}) == 2
    rule = slurm_plan.of_type("aws:route53/resolverRule:ResolverRule")[0].inputs
    assert rule["ruleType"] == "FORWARD" and rule["domainName"] == "hpc.example.internal"
    assert rule["resolverEndpointId"] == endpoints["OUTBOUND"].id
    assert rule["targetIps"] == [{"ip": "10.20.0.2", "port": 53}, {"ip": "10.20.0.3", "port": 53}]
    vpc = slurm_plan.of_type("aws:ec2/vpc:Vpc")[0]
    association = slurm_plan.of_type("aws:route53/resolverRuleAssociation:ResolverRuleAssociation")[0].inputs
    assert association["vpcId"] == vpc.id
    sg = endpoints["OUTBOUND"].inputs["securityGroupIds"][0]
    ingress = {
        (r.inputs["cidrIpv4"], r.inputs["ipProtocol"]) for r in slurm_plan.of_type(INGRESS) if r.inputs["securityGroupId"] == sg
    }
    assert ingress == {(c, p) for c in ("10.0.0.0/16", "10.20.0.0/16") for p in ("tcp", "udp")}
    egress = {
        (r.inputs["cidrIpv4"], r.inputs["ipProtocol"], r.inputs["fromPort"])
        for r in slurm_plan.of_type(EGRESS)
        if r.inputs["securityGroupId"] == sg
    }
    assert egress == {(f"10.20.0.{n}/32", p, 53) for n in (2, 3) for p in ("tcp", "udp")}
    assert slurm_plan.outputs["hybrid"]["dns"]["inboundResolverIps"] == [
        a["ip"] for a in endpoints["INBOUND"].state["ipAddresses"]
    ]


def test_eks_site_gets_the_link_but_no_slurm_credentials(eks_plan):
    # the one trust anchor is EKS Hybrid Nodes' own (the nodes' role), none for a site agent
    anchors = eks_plan.of_type("aws:rolesanywhere/trustAnchor:TrustAnchor")
    assert [a.name for a in anchors] == ["hybrid-eks-eks-hybrid-anchor"] and "EksCluster$" in anchors[0].urn
    assert eks_plan.of_type("aws:route53/resolverEndpoint:ResolverEndpoint") == []  # no dns section
    assert "credentials" not in eks_plan.outputs["hybrid"] and "slurm" not in eks_plan.outputs["hybrid"]
    assert eks_plan.outputs["hybrid"]["link"]["type"] == "vpn-tgw"


@pytest.mark.parametrize("stack", ["hybrid-slurm", "hybrid-eks"])
def test_every_taggable_hybrid_resource_carries_the_cluster_tags(stack, slurm_plan, eks_plan):
    from gpucluster.config.naming import CLUSTER_TAG
    from tests.components.test_contracts import _taggable, _tags

    plan = slurm_plan if stack == "hybrid-slurm" else eks_plan
    untagged = [r.name for r in plan.resources if r.custom and _taggable(r.type) and _tags(r.inputs).get(CLUSTER_TAG) != stack]
    assert untagged == []
    hybrid_types = {
        r.type for r in plan.resources if r.custom and ("vpn" in r.type.lower() or "transit" in r.type or "resolver" in r.type)
    }
    assert len(hybrid_types) >= 3  # the VPN, the Transit Gateway, its attachment (and the Resolver where dns is set)


def test_plan_shows_anchor_profile_and_the_sites_role(slurm_plan):
    anchor = slurm_plan.of_type("aws:rolesanywhere/trustAnchor:TrustAnchor")[0]
    profile = slurm_plan.of_type("aws:rolesanywhere/profile:Profile")[0]
    assert anchor.inputs["source"]["sourceType"] == "AWS_ACM_PCA"
    credentials = slurm_plan.outputs["hybrid"]["credentials"]
    assert credentials["trustAnchorArn"] == anchor.state["arn"] and credentials["profileArn"] == profile.state["arn"]
    assert profile.inputs["roleArns"] == [credentials["roleArn"]]
    assert slurm_plan.of_type("aws:ec2/placementGroup:PlacementGroup") == []
    groups = slurm_plan.outputs["hybrid"]["slurm"]["burstNodeGroups"]
    lt = slurm_plan.by_name("hybrid-slurm-slurm-p5-lt")
    assert groups == {
        "p5": {
            "partition": "aws-p5",
            "mode": "dynamic",
            "instanceType": "p5.48xlarge",
            "launchTemplateId": lt.id,
            "subnetIds": [slurm_plan.by_name("hybrid-slurm-network-private-us-east-1a", "aws:ec2/subnet:Subnet").id],
            # placementGroupName: null (a capacity reservation without a placement group), so not listed
        }
    }


def test_gpu_cluster_from_args_builds_the_hybrid_parts(run_components):
    """Another program's path: ``GpuCluster(name, GpuClusterArgs(...))`` with a hybrid section."""
    from gpucluster.components.gpu_cluster import GpuCluster, GpuClusterArgs
    from gpucluster.tools.plan.run.stackfile import read_stack_file

    config = read_stack_file("hybrid-slurm")["config"]
    args = {key.split(":")[1]: value for key, value in config.items() if key.startswith("gpucluster:")}
    args.update(name="c", region=config["aws:region"])
    plan = run_components(lambda: GpuCluster("c", GpuClusterArgs(**args)))
    assert [r.name for r in plan.of_type("aws:ec2/instance:Instance")] == ["c-lustre-setup"]  # no head node
    assert len(plan.of_type("aws:rolesanywhere/trustAnchor:TrustAnchor")) == 1
    assert len([r for r in plan.of_type(ROUTE) if r.inputs.get("transitGatewayId")]) == 2


def test_own_vpc_keeps_its_route_tables_and_the_program_says_what_to_route():
    from gpucluster.tools.plan.run.stackfile import read_stack_file
    from tests.conftest import plan_config

    config = {k: v for k, v in read_stack_file("hybrid-slurm")["config"].items() if k != "gpucluster:storage"}
    config["gpucluster:network"] = {
        "vpcId": "vpc-0123456789abcdef0",
        "subnets": [
            {"id": "subnet-0aaaaaaaaaaaaaaaa", "availabilityZone": "us-east-1a"},
            {"id": "subnet-0bbbbbbbbbbbbbbbb", "availabilityZone": "us-east-1b"},
        ],
    }
    plan = plan_config(config)
    assert plan.error is None, plan.error
    assert plan.of_type(ROUTE) == [] and plan.of_type("aws:ec2/routeTable:RouteTable") == []
    attachment = plan.of_type("aws:ec2transitgateway/vpcAttachment:VpcAttachment")[0].inputs
    assert attachment["subnetIds"] == ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"]
    assert any("route 10.20.0.0/16 to the link's gateway (output hybrid.link.gatewayId)" in line for line in plan.logs)


def test_burst_nodes_join_the_sites_controller_with_the_secret_the_site_writes(slurm_plan):
    """The burst launch template's user data joins the site's slurmctld (configless, the site's address), names the
    munge secret by its real ARN (the stand-in replaced), and its image is the Ubuntu release whose archive slurmd the
    site's 22.05 controller accepts (22.04: slurmd 21.08)."""
    from gpucluster.load import load_spec
    from gpucluster.render.hybrid.compute import munge_secret_stand_in
    from gpucluster.tools.plan.run.stackfile import read_stack_file

    files = {k.split("/", 1)[1]: v for k, v in slurm_plan.files.items() if k.startswith("hybrid-slurm-slurm-p5-lt/")}
    join = files["usr/local/sbin/gpucluster-hybrid-join"]
    assert "--conf-server" in join and "10.20.0.10:6817" in join
    secret = slurm_plan.by_name("hybrid-slurm-slurm-munge-key", "aws:secretsmanager/secret:Secret")
    helper = json.loads(files["usr/local/sbin/gpucluster-aws.json"])
    assert helper["secret_name"] == secret.state["arn"]
    assert munge_secret_stand_in("us-east-1") not in files["user-data"]
    assert "etc/slurm/slurm.conf" not in files  # configless: the site's controller serves it
    spec = load_spec(read_stack_file("hybrid-slurm")["config"], stack="hybrid-slurm").spec
    assert "22.04" in (spec.node_group("p5").image_ssm_parameter or "")
