"""Network under mocks: new VPC or bring-your-own, and the EFA security group."""

from __future__ import annotations

from gpucluster.components.network.network import Network, NetworkArgs

INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"


def build(**config):
    config.setdefault("availability_zones", ["us-east-1a"])
    args: NetworkArgs = {**config, "cluster_name": "c", "region": "us-east-1", "tags": {"team": "ml"}}
    return Network("n", args)


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


# --- posture: flow logs and the default security group ---------------------------------------------

FLOW_LOG = "aws:ec2/flowLog:FlowLog"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
DEFAULT_SG = "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup"


def test_flow_log_to_cloudwatch_by_default(run_components):
    import json

    plan = run_components(build)
    (flow,) = plan.of_type(FLOW_LOG)
    (group,) = plan.of_type(LOG_GROUP)
    vpc = plan.of_type("aws:ec2/vpc:Vpc")[0]
    (role,) = [r for r in plan.of_type("aws:iam/role:Role") if r.name == "n-flow-logs"]
    assert flow.inputs["vpcId"] == vpc.id and flow.inputs["trafficType"] == "ALL"
    assert flow.inputs["maxAggregationInterval"] == 600
    assert (flow.inputs["logDestinationType"], flow.inputs["logDestination"]) == ("cloud-watch-logs", group.state["arn"])
    assert flow.inputs["iamRoleArn"] == role.state["arn"]
    assert group.inputs["name"] == "/gpucluster/c/vpc-flow-logs" and group.inputs["retentionInDays"] == 365
    assert group.protect and group.retain_on_delete  # the records are data: kept like the cluster's other data
    trust = json.loads(role.inputs["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Service": "vpc-flow-logs.amazonaws.com"}
    assert statement["Condition"] == {
        "StringEquals": {"aws:SourceAccount": "123456789012"},
        "ArnLike": {"aws:SourceArn": "arn:aws:ec2:us-east-1:123456789012:vpc-flow-log/*"},
    }
    (inline,) = [r for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r.name == "n-flow-logs"]
    write, describe = json.loads(inline.inputs["policy"])["Statement"]
    arn = group.state["arn"]
    assert write["Resource"] == [arn, f"{arn}:log-stream:*"]
    assert sorted(write["Action"]) == ["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"]
    assert describe["Resource"] == "arn:aws:logs:us-east-1:123456789012:log-group:*"
    assert all(
        a.startswith("logs:")
        for st in (write, describe)
        for a in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])
    )


def test_flow_log_to_s3_expires_and_admits_only_this_accounts_delivery(run_components):
    import json

    plan = run_components(
        lambda: build(flow_logs={"destination": "s3", "retention_days": 400, "max_aggregation_interval": 60, "protect": False})
    )
    assert plan.of_type(LOG_GROUP) == [] and [r for r in plan.of_type("aws:iam/role:Role") if "flow" in r.name] == []
    (flow,) = plan.of_type(FLOW_LOG)
    (bucket,) = plan.of_type("aws:s3/bucket:Bucket")
    assert (flow.inputs["logDestinationType"], flow.inputs["logDestination"]) == ("s3", bucket.state["arn"])
    assert flow.inputs["maxAggregationInterval"] == 60 and "iamRoleArn" not in flow.inputs
    assert not bucket.protect and bucket.inputs["forceDestroy"] is True  # protect: false
    (lifecycle,) = plan.of_type("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")
    assert lifecycle.inputs["rules"][0]["expiration"] == {"days": 400}
    (bucket_policy,) = plan.of_type("aws:s3/bucketPolicy:BucketPolicy")
    statements = {st["Sid"]: st for st in json.loads(bucket_policy.inputs["policy"])["Statement"]}
    assert statements["DenyInsecureTransport"]["Effect"] == "Deny"  # the private-bucket baseline stays
    arn = bucket.state["arn"]
    write = statements["FlowLogDeliveryWrite"]
    assert write["Principal"] == {"Service": "delivery.logs.amazonaws.com"}
    assert write["Resource"] == f"{arn}/AWSLogs/123456789012/*"
    assert write["Condition"]["StringEquals"]["aws:SourceAccount"] == "123456789012"
    assert write["Condition"]["ArnLike"] == {"aws:SourceArn": "arn:aws:logs:us-east-1:123456789012:*"}
    assert statements["FlowLogDeliveryCheck"]["Resource"] == arn
    assert {r.name for r in plan.of_type("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")} == {
        "n-flow-logs-public-access"
    }


def test_flow_logs_off(run_components):
    plan = run_components(lambda: build(flow_logs={"enabled": False}))
    assert plan.of_type(FLOW_LOG) == [] and plan.of_type(LOG_GROUP) == []


def test_new_vpc_default_security_group_has_no_rules(run_components):
    plan = run_components(build)
    (default,) = plan.of_type(DEFAULT_SG)
    assert default.inputs["vpcId"] == plan.of_type("aws:ec2/vpc:Vpc")[0].id
    assert default.inputs.get("ingress", []) == [] and default.inputs.get("egress", []) == []
    assert "ingress" in default.inputs and "egress" in default.inputs  # sent empty: the provider removes AWS's rules
    assert default.inputs["tags"]["team"] == "ml"


def test_your_own_vpc_gets_a_flow_log_but_its_default_group_is_left_alone(run_components):
    subnets = ({"id": "subnet-0aaa1111", "availability_zone": "us-east-1a"},)
    plan = run_components(lambda: build(vpc_id="vpc-0abc1234", subnets=subnets))
    assert plan.of_type(DEFAULT_SG) == []  # not ours to change: other workloads may rely on it
    (flow,) = plan.of_type(FLOW_LOG)
    assert flow.inputs["vpcId"] == "vpc-0abc1234"
