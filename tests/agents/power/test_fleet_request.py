"""The CreateFleet request per capacity type: shape checked against botocore's EC2 model, and on
the wire (through the proxy) for the capacity-reservation and capacity-block cases."""

from __future__ import annotations

import copy
from typing import Any

import botocore.session
import pytest
from botocore.validate import validate_parameters

from gpucluster_agents.contract import parse as parse_config
from gpucluster_agents.power.ec2 import fleet_request
from tests.agents.conftest import Harness
from tests.agents.test_config import MINIMAL

SHAPE = botocore.session.get_session().get_service_model("ec2").operation_model("CreateFleet").input_shape


def request_for(group_overrides: dict[str, Any], count: int = 3) -> dict[str, Any]:
    doc = copy.deepcopy(MINIMAL)
    doc["node_groups"][0].update(group_overrides)
    cfg = parse_config(doc)
    req = fleet_request(cfg, cfg.node_groups[0], count, "tok123")
    validate_parameters(req, SHAPE)  # raises on any misspelt or mistyped field
    return req


def test_on_demand_efa() -> None:
    req = request_for({"efa_enabled": True, "tags": {"team": "ml"}})
    assert req["Type"] == "instant"
    assert req["ClientToken"] == "tok123"
    assert req["TargetCapacitySpecification"] == {"TotalTargetCapacity": 3, "DefaultTargetCapacityType": "on-demand"}
    assert req["OnDemandOptions"] == {"AllocationStrategy": "lowest-price", "SingleAvailabilityZone": True}
    assert "SpotOptions" not in req
    assert req["LaunchTemplateConfigs"] == [
        {
            "LaunchTemplateSpecification": {"LaunchTemplateId": "lt-0123456789abcdef0", "Version": "$Default"},
            "Overrides": [{"InstanceType": "p5.48xlarge", "SubnetId": "subnet-0123456789abcdef0"}],
        }
    ]
    assert req["TagSpecifications"] == [
        {
            "ResourceType": "instance",
            "Tags": [
                {"Key": "gpucluster:cluster", "Value": "demo"},
                {"Key": "gpucluster:node-group", "Value": "p5"},
                {"Key": "gpucluster:launch-token", "Value": "tok123"},
                {"Key": "team", "Value": "ml"},
            ],
        }
    ]


def test_capacity_reservation_first() -> None:
    req = request_for({"capacity": {"type": "capacity-reservation", "reservation_id": "cr-0123456789abcdef0"}})
    assert req["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    assert req["OnDemandOptions"]["CapacityReservationOptions"] == {"UsageStrategy": "use-capacity-reservations-first"}


def test_capacity_block() -> None:
    req = request_for({"capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}})
    assert req["TargetCapacitySpecification"] == {"TotalTargetCapacity": 3, "DefaultTargetCapacityType": "capacity-block"}
    assert "OnDemandOptions" not in req and "SpotOptions" not in req


def test_spot_and_several_subnets_and_placement_group() -> None:
    req = request_for({"capacity": {"type": "spot"}, "subnet_ids": ["subnet-0a", "subnet-0b"], "placement_group": "pg-train"})
    assert req["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "spot"
    assert req["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}
    assert req["LaunchTemplateConfigs"][0]["Overrides"] == [
        {"InstanceType": "p5.48xlarge", "SubnetId": "subnet-0a", "Placement": {"GroupName": "pg-train"}},
        {"InstanceType": "p5.48xlarge", "SubnetId": "subnet-0b", "Placement": {"GroupName": "pg-train"}},
    ]


@pytest.mark.parametrize(
    ("capacity", "wire"),
    [
        (
            {"type": "capacity-reservation", "resource_group_arn": "arn:aws:resource-groups:us-east-1:1:group/odcr"},
            {
                "TargetCapacitySpecification.DefaultTargetCapacityType": "on-demand",
                "OnDemandOptions.CapacityReservationOptions.UsageStrategy": "use-capacity-reservations-first",
            },
        ),
        (
            {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"},
            {"TargetCapacitySpecification.DefaultTargetCapacityType": "capacity-block"},
        ),
    ],
)
def test_capacity_options_on_the_wire(harness: Harness, capacity: dict[str, Any], wire: dict[str, str]) -> None:
    # moto launches nothing for capacity-block; the proxy forwards it as on-demand but records the original.
    harness.group("p5")["capacity"] = capacity
    assert harness.slurm_resume("p5-[1-2]") == 0
    (req,) = harness.proxy.requests("CreateFleet")
    for key, value in wire.items():
        assert req[key] == value
    assert req["Type"] == "instant"
    assert req["TargetCapacitySpecification.TotalTargetCapacity"] == "2"
    assert req["ClientToken"] == req["TagSpecification.1.Tag.3.Value"]  # launch token doubles as ClientToken
    nodes = harness.nodes()
    assert sorted(nodes) == ["p5-1", "p5-2"]
    log = harness.log_text()
    assert f"capacity={capacity['type']}" in log
    assert (capacity.get("reservation_id") or capacity["resource_group_arn"]) in log
