"""The estimate's people lines: login nodes priced from the catalog × count, the SSH load balancer and the OpenZFS
home as "unknown" lines saying why (the price data has neither), nothing without the sections."""

from __future__ import annotations

from gpucluster.facts.catalog import load_catalog
from gpucluster.facts.prices import load_prices
from gpucluster.load import load_spec
from gpucluster.resolve.cost import estimate
from tests.conftest import IDENTITY_DECLARED, group, identity_config, identity_directory_config, make_config


def fixed(config):
    spec = load_spec(config, stack="people").cluster.spec
    return {i.key: i for i in estimate(spec, load_catalog()).fixed}


def test_login_nodes_are_the_catalog_price_times_count():
    items = fixed(identity_config(IDENTITY_DECLARED, loginNodes={"count": 3, "instanceType": "m7i.2xlarge"}))
    price = load_prices().quote("m7i.2xlarge", "us-east-1").usd_per_hour
    assert price is not None
    login = items["slurm-login-nodes"]
    assert login.name == "Slurm login nodes 3 × m7i.2xlarge"
    assert login.usd_per_hour == round(3 * price, 3)
    assert "slurm-login-nlb" not in items


def test_load_balancer_and_home_are_unknown_with_the_reason():
    items = fixed(identity_directory_config())
    assert items["slurm-login-nlb"].usd_per_hour is None
    assert items["slurm-login-nlb"].source.startswith("unknown: the price data has no Elastic Load Balancing")
    assert items["slurm-home-openzfs"].usd_per_hour is None
    assert items["slurm-home-openzfs"].name == "FSx for OpenZFS /home 128 GiB"
    assert "no FSx for OpenZFS figures" in items["slurm-home-openzfs"].source


def test_no_people_lines_without_the_sections():
    items = fixed(make_config(group(), slurm={}))
    assert not {"slurm-login-nodes", "slurm-login-nlb", "slurm-home-openzfs"} & items.keys()
    items = fixed(identity_config(IDENTITY_DECLARED, home={"enabled": False}))
    assert "slurm-home-openzfs" not in items
