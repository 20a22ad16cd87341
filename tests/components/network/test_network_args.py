"""Network from Args: a VPC and subnets of the same program as Outputs, the stack's defaults, errors by field."""

from __future__ import annotations

import pulumi_aws as aws

from gpucluster.components.network.network import Network, from_args
from gpucluster.load import load_spec
from tests.conftest import make_config

SUBNET = "aws:ec2/subnet:Subnet"


def test_byo_vpc_and_subnets_as_outputs(run_components):
    def program():
        vpc = aws.ec2.Vpc("mine", cidr_block="10.1.0.0/16")
        a = aws.ec2.Subnet("a", vpc_id=vpc.id, cidr_block="10.1.0.0/19", availability_zone="us-east-1a")
        b = aws.ec2.Subnet("b", vpc_id=vpc.id, cidr_block="10.1.32.0/19", availability_zone="us-east-1b")
        net = Network(
            "n",
            {
                "cluster_name": "c",
                "vpc_id": vpc.id,
                "subnets": [{"id": a.id, "availability_zone": "us-east-1a"}, {"id": b.id, "availability_zone": "us-east-1b"}],
            },
        )
        assert set(net.private_subnet_ids) == {"us-east-1a", "us-east-1b"}

    plan = run_components(program)
    assert sorted(r.name for r in plan.of_type(SUBNET)) == ["a", "b"]  # none of its own
    vpc_id = plan.by_name("mine").id
    assert plan.by_name("n-efa").inputs["vpcId"] == vpc_id and plan.by_name("n-node").inputs["vpcId"] == vpc_id
    assert plan.of_type("aws:ec2/flowLog:FlowLog")[0].inputs["vpcId"] == vpc_id


def test_new_vpc_gets_a_subnet_in_every_zone_asked(run_components):
    plan = run_components(
        lambda: Network("n", {"cluster_name": "c", "zones": ["us-east-1b"], "availability_zones": ["us-east-1a"]})
    )
    zones = sorted(r.inputs["availabilityZone"] for r in plan.of_type(SUBNET) if "private" in r.name)
    assert zones == ["us-east-1a", "us-east-1b"]


def test_standalone_defaults_are_the_stacks():
    spec = load_spec(make_config(), stack="c").spec
    ours = from_args({"cluster_name": "c", "zones": list(spec.zones), "region": "us-east-1"}).resolved
    assert ours == spec.network
    assert ours.flow_logs.protect is True
