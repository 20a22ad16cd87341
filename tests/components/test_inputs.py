"""Component Args → config model: Outputs in reference fields get stand-ins, come back as themselves."""

from __future__ import annotations

import subprocess
import sys

import pulumi
import pulumi_aws as aws
import pytest

from gpucluster.components._shared.config_types import CapacityConfig, NodeGroupConfig
from gpucluster.components._shared.edge import validate
from gpucluster.components._shared.inputs import KINDS, Inputs
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.errors import ConfigError
from gpucluster.tools.config_types import REFERENCES

LT = "aws:ec2/launchTemplate:LaunchTemplate"


def test_every_reference_kind_is_known():
    assert set(REFERENCES.values()) <= set(KINDS)


def node_group(capacity: CapacityConfig) -> NodeGroupConfig:
    return {
        "name": "gpu",
        "instance_type": "p5.48xlarge",
        "availability_zones": ["us-east-1a"],
        "max_size": 2,
        "capacity": capacity,
    }


def test_an_output_reservation_reaches_the_resource(run_components):
    seen: dict[str, object] = {}

    def program():
        cr = aws.ec2.CapacityReservation(
            "cr", instance_type="p5.48xlarge", instance_platform="Linux/UNIX", availability_zone="us-east-1a", instance_count=2
        )
        inputs = Inputs("GpuNodeGroup")
        plain = inputs.prepare(node_group({"type": "capacity-reservation", "reservation_id": cr.id}), NodeGroupConfig)
        spec = validate(NodeGroupSpec, plain, "GpuNodeGroup args")
        stand_in = spec.capacity.reservation_id
        seen["stand_in"] = stand_in
        assert KINDS["capacity-reservation"].accepts(stand_in)
        aws.ec2.LaunchTemplate(
            "lt",
            capacity_reservation_specification={
                "capacity_reservation_target": {"capacity_reservation_id": inputs.real(stand_in)}
            },
            user_data=inputs.real_text(f"reservation={stand_in}\n"),
        )

    plan = run_components(program)
    lt = plan.of_type(LT)[0].inputs
    cr_id = lt["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"]
    assert KINDS["capacity-reservation"].accepts(cr_id)  # the mock engine's id for the reservation
    assert lt["userData"] == f"reservation={cr_id}\n"
    assert seen["stand_in"] != cr_id


def test_an_output_in_a_field_that_decides_what_is_created_is_refused(run_components):
    def program():
        size = pulumi.Output.from_input(4)
        with pytest.raises(ConfigError) as info:
            Inputs("GpuNodeGroup").prepare({**node_group({}), "max_size": size}, NodeGroupConfig)
        assert "args.maxSize" in str(info.value) and "must be known when the program runs" in str(info.value)

    run_components(program)


WRONG_VALUE_PROGRAM = """
import pulumi, pulumi_aws as aws
from gpucluster.components._shared.config_types import NodeGroupConfig
from gpucluster.components._shared.edge import validate
from gpucluster.components._shared.inputs import Inputs
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.tools.plan.run.engine import execute

def program():
    inputs = Inputs("GpuNodeGroup")
    wrong = pulumi.Output.from_input("sg-0123456789abcdef0")
    group = {"name": "gpu", "instance_type": "p5.48xlarge", "availability_zones": ["us-east-1a"], "max_size": 2,
             "capacity": {"type": "capacity-reservation", "reservation_id": wrong}}
    spec = validate(NodeGroupSpec, inputs.prepare(group, NodeGroupConfig), "GpuNodeGroup args")
    target = {"capacity_reservation_id": inputs.real(spec.capacity.reservation_id)}
    aws.ec2.LaunchTemplate("lt", capacity_reservation_specification={"capacity_reservation_target": target})

try:
    execute(program, config={"aws:region": "us-east-1"})
except Exception as exc:
    print("ERROR:", exc)
"""


def test_a_wrong_value_behind_an_output_fails_with_the_field_name():
    # In a process of its own: a deployment that fails inside an apply leaves Pulumi's runtime unusable
    # for another program in the same process (as `pulumi up` would have ended there).
    result = subprocess.run([sys.executable, "-c", WRONG_VALUE_PROGRAM], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "args.capacity.reservationId: 'sg-0123456789abcdef0' is not a capacity reservation id" in result.stdout


def test_model_errors_name_the_camel_case_field():
    with pytest.raises(ConfigError) as info:
        validate(NodeGroupSpec, {**node_group({"type": "spot"}), "max_size": "many"}, "GpuNodeGroup args")
    assert "args.maxSize" in str(info.value)


def test_a_whole_list_output_stands_in_as_one_element(run_components):
    def program():
        inputs = Inputs("GpuNodeGroup")
        subnets = pulumi.Output.from_input(["subnet-0aaa1111", "subnet-0bbb2222"])
        plain = inputs.prepare({**node_group({}), "subnet_ids": subnets}, NodeGroupConfig)
        spec = validate(NodeGroupSpec, plain, "GpuNodeGroup args")
        assert len(spec.subnet_ids) == 1
        aws.autoscaling.Group("asg", max_size=1, min_size=0, vpc_zone_identifiers=inputs.real_list(spec.subnet_ids))

    plan = run_components(program)
    assert plan.of_type("aws:autoscaling/group:Group")[0].inputs["vpcZoneIdentifiers"] == ["subnet-0aaa1111", "subnet-0bbb2222"]
