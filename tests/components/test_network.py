"""Network under mocks: new VPC or bring-your-own, and the EFA security group."""

from __future__ import annotations

from components.network import Network, NetworkArgs
from components.spec.network import NetworkSpec

INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"


def build(**spec):
    spec.setdefault("availability_zones", ("us-east-1a",))
    return Network("n", NetworkArgs(network=NetworkSpec(**spec), cluster_name="c", region="us-east-1", tags={"team": "ml"}))


def test_new_vpc_private_subnets_nat_and_s3(run_components):
    plan = run_components(lambda: build(availability_zones=("us-east-1a", "us-east-1b")))
    assert len(plan.of_type("aws:ec2/vpc:Vpc")) == 1
    subnets = {r.name: r.inputs for r in plan.of_type("aws:ec2/subnet:Subnet")}
    assert subnets["n-private-us-east-1a"]["cidrBlock"] == "10.0.0.0/19"
    assert subnets["n-private-us-east-1b"]["cidrBlock"] == "10.0.32.0/19"
    assert all(s["mapPublicIpOnLaunch"] is False for s in subnets.values())
    assert len(plan.of_type("aws:ec2/natGateway:NatGateway")) == 1  # one NAT by default
    private_rts = [r for r in plan.of_type("aws:ec2/routeTable:RouteTable") if "private" in r.name]
    nat_id = plan.of_type("aws:ec2/natGateway:NatGateway")[0].id
    assert all(rt.inputs["routes"] == [{"cidrBlock": "0.0.0.0/0", "natGatewayId": nat_id}] for rt in private_rts)
    s3 = plan.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")[0].inputs
    assert s3["serviceName"] == "com.amazonaws.us-east-1.s3" and s3["vpcEndpointType"] == "Gateway"
    assert sorted(s3["routeTableIds"]) == sorted(rt.id for rt in private_rts)


def test_nat_per_zone_and_interface_endpoints(run_components):
    plan = run_components(
        lambda: build(
            availability_zones=("us-east-1a", "us-east-1b"), one_nat_gateway_per_az=True, interface_endpoints=("ssm", "ecr.api")
        )
    )
    assert len(plan.of_type("aws:ec2/natGateway:NatGateway")) == 2
    endpoints = {r.inputs["serviceName"]: r.inputs for r in plan.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")}
    assert endpoints["com.amazonaws.us-east-1.ssm"]["privateDnsEnabled"] is True
    assert len(endpoints["com.amazonaws.us-east-1.ecr.api"]["subnetIds"]) == 2
    https = [r.inputs for r in plan.of_type(INGRESS) if r.inputs.get("fromPort") == 443]
    assert https and https[0]["cidrIpv4"] == "10.0.0.0/16"


def test_no_nat_means_no_public_side(run_components):
    plan = run_components(lambda: build(enable_nat_gateway=False))
    assert plan.of_type("aws:ec2/internetGateway:InternetGateway") == []
    assert [r for r in plan.of_type("aws:ec2/subnet:Subnet") if "public" in r.name] == []


def test_efa_security_group_references_itself_both_ways(run_components):
    plan = run_components(build)
    efa = plan.by_name("n-efa")
    ingress = [r.inputs for r in plan.of_type(INGRESS) if r.inputs["securityGroupId"] == efa.id]
    egress = [r.inputs for r in plan.of_type(EGRESS) if r.inputs["securityGroupId"] == efa.id]
    assert len(ingress) == 1 and len(egress) == 1
    for rule in ingress + egress:
        assert rule["ipProtocol"] == "-1" and rule["referencedSecurityGroupId"] == efa.id
    node = plan.by_name("n-node")
    node_egress = [r.inputs for r in plan.of_type(EGRESS) if r.inputs["securityGroupId"] == node.id]
    assert len(node_egress) == 1
    assert (node_egress[0]["cidrIpv4"], node_egress[0]["ipProtocol"]) == ("0.0.0.0/0", "-1")
    assert [r for r in plan.of_type(INGRESS) if r.inputs["securityGroupId"] == node.id] == []  # no inbound


def test_bring_your_own_vpc(run_components):
    subnets = (
        {"id": "subnet-0aaa1111", "availability_zone": "us-east-1a"},
        {"id": "subnet-0bbb2222", "availability_zone": "us-east-1b"},
    )
    seen = {}

    def program():
        net = build(vpc_id="vpc-0abc1234", subnets=subnets)
        seen["subnets"] = net.private_subnet_ids
        net.vpc_cidr.apply(lambda c: seen.update(cidr=c))

    plan = run_components(program)
    assert plan.of_type("aws:ec2/vpc:Vpc") == [] and plan.of_type("aws:ec2/subnet:Subnet") == []
    assert set(seen["subnets"]) == {"us-east-1a", "us-east-1b"}
    assert "aws:ec2/getVpc:getVpc" in plan.invokes and seen["cidr"] == "10.0.0.0/16"
    assert {r.inputs["vpcId"] for r in plan.of_type("aws:ec2/securityGroup:SecurityGroup")} == {"vpc-0abc1234"}
