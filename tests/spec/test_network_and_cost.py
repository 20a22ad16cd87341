from __future__ import annotations

import ipaddress

import pytest

from components.spec.cost import estimate
from components.spec.load import load_spec
from components.spec.network import plan_subnets
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
    assert est.usd_per_hour == round(p5.usd_per_hour + 0.0, 2)  # the dev group wants 0 nodes now


def test_unknown_price_makes_total_unknown(catalog):
    spec = load_spec(make_config(group(instanceType="p5e.48xlarge", maxSize=1, desiredSize=1)), stack="s").spec
    est = estimate(spec, catalog)
    assert est.usd_per_hour is None and est.groups[0].price_source == "unknown: set pricePerHour"
    assert est.kw == catalog["p5e.48xlarge"].estimated_power_kw
