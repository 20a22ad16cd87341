from __future__ import annotations

import ipaddress

import pytest

from gpucluster.config.network import plan_subnets
from gpucluster.load import load_spec
from gpucluster.resolve.cost.estimate import estimate
from tests.conftest import group, make_config


def test_subnets_do_not_overlap_and_stay_put_when_zones_are_added():
    two = plan_subnets("10.0.0.0/16", ["a", "b"], 19, 24)
    three = plan_subnets("10.0.0.0/16", ["a", "b", "c"], 19, 24)
    assert two["a"] == three["a"] and two["b"] == three["b"]
    nets = [ipaddress.ip_network(c) for pair in three.values() for c in pair]
    assert all(not x.overlaps(y) for i, x in enumerate(nets) for y in nets[i + 1 :])
    assert three["a"] == ("10.0.0.0/19", "10.0.255.0/24")


def test_subnets_that_do_not_fit_raise():
    with pytest.raises(ValueError, match="no room"):
        plan_subnets("10.0.0.0/16", [str(i) for i in range(8)], 19, 24)  # 8 x /19 fill the /16: no room for public


def test_estimate(catalog):
    spec = load_spec(
        make_config(
            group(minSize=16, maxSize=32, desiredSize=16),
            group(name="dev", instanceType="g6e.xlarge", maxSize=1, pricePerHour=2.0, enableEfaSupport=False),
        ),
        stack="s",
    ).spec
    est = estimate(spec, catalog)
    p5 = est.groups[0]
    assert p5.usd_per_hour == round(16 * catalog["p5.48xlarge"].on_demand_usd_per_hour, 2)
    assert p5.usd_per_hour_max == round(32 * catalog["p5.48xlarge"].on_demand_usd_per_hour, 2)
    assert p5.kw == round(16 * catalog["p5.48xlarge"].estimated_power_kw, 1)
    assert est.groups[1].usd_per_node_hour == 2.0 and est.groups[1].price_source == "pricePerHour"
    # the dev group wants 0 nodes now; the one NAT gateway is the only fixed cost
    assert [i.name for i in est.fixed] == ["1 NAT gateway(s)"]
    assert est.usd_per_hour == round(p5.usd_per_hour + est.fixed[0].usd_per_hour, 2)


def test_unknown_price_leaves_the_group_out_of_the_total_and_names_it(catalog):
    spec = load_spec(make_config(group(instanceType="p5e.48xlarge", maxSize=1, desiredSize=1)), stack="s").spec
    est = estimate(spec, catalog)
    # the total is the priced part (the NAT gateway), the unpriced group named beside it
    assert est.usd_per_hour == round(est.fixed[0].usd_per_hour or 0, 2) and est.unpriced == ("gpu",)
    assert est.as_dict()["unpriced"] == ["gpu"]
    assert est.groups[0].price_source == (
        "no list price for p5e.48xlarge in the catalog; set gpucluster:nodeGroups[0].pricePerHour "
        "(USD per node-hour) to include it"
    )
    assert est.kw == catalog["p5e.48xlarge"].estimated_power_kw


def test_fixed_costs_beside_the_node_groups(catalog):
    from gpucluster.resolve.cost.services import EKS_CONTROL_PLANE_USD_PER_HOUR, NAT_GATEWAY_USD_PER_HOUR

    spec = load_spec(
        make_config(
            group(availabilityZones=["us-east-1a"], maxSize=1, desiredSize=1),
            network={
                "oneNatGatewayPerAz": True,
                "availabilityZones": ["us-east-1a", "us-east-1b"],
                "interfaceEndpoints": ["ssm"],
            },
            storage={"lustre": {"storageCapacityGib": 2400, "throughputPerUnitStorage": 1000}},
        ),
        stack="s",
    ).spec
    est = estimate(spec, catalog)
    items = {i.name: i for i in est.fixed}
    assert items["2 NAT gateway(s)"].usd_per_hour == 2 * NAT_GATEWAY_USD_PER_HOUR
    assert items["2 interface endpoint ENIs"].usd_per_hour == 0.02
    assert items["FSx for Lustre 2400 GiB"].usd_per_hour == round(2400 * 0.60 / 730, 2)
    node = catalog["p5.48xlarge"].on_demand_usd_per_hour
    assert est.usd_per_hour == round(node + sum(i.usd_per_hour for i in est.fixed), 2)
    assert est.kw == catalog["p5.48xlarge"].estimated_power_kw  # managed services add no attributed power
    assert "EKS control plane" not in items and EKS_CONTROL_PLANE_USD_PER_HOUR == 0.10


def test_no_nat_no_fixed_cost(catalog):
    spec = load_spec(make_config(group(), network={"enableNatGateway": False}), stack="s").spec
    assert estimate(spec, catalog).fixed == ()


def test_reserved_capacity_bills_whether_used_or_not(catalog):
    price = catalog["p5.48xlarge"].on_demand_usd_per_hour
    odcr = {"type": "capacity-reservation", "reservationId": "cr-0123456789abcdef0", "instanceCount": 16}
    spec = load_spec(make_config(group(minSize=0, desiredSize=0, maxSize=16, capacity=odcr)), stack="s").spec
    g = estimate(spec, catalog).groups[0]
    assert (g.desired, g.reserved, g.billed_now) == (0, 16, 16)
    assert g.usd_per_hour == round(16 * price, 2) and g.kw == 0  # billed, but idle capacity draws no power here
    on_demand = load_spec(make_config(group(minSize=0, desiredSize=0, maxSize=16)), stack="s").spec
    assert estimate(on_demand, catalog).groups[0].usd_per_hour == 0
