"""The estimate's people lines: login nodes priced from the catalog × count, the SSH load balancer and the OpenZFS
home priced from the price file's ``Services`` (unpriced, saying why and how to price them, where it has no figure),
nothing without the sections."""

from __future__ import annotations

import pytest

from gpucluster.facts.catalog import load_catalog
from gpucluster.facts.prices import load_prices
from gpucluster.load import load_spec
from gpucluster.resolve.cost.estimate import estimate
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


def test_day1_load_balancer_and_home_are_priced_with_their_usage_and_source():
    items = fixed(identity_directory_config())
    book = load_prices()
    nlb, home = items["slurm-login-nlb"], items["slurm-home-openzfs"]
    hour, nlcu = book.service("us-east-1", "NlbHour"), book.service("us-east-1", "NlcuHour")
    assert hour is not None and nlcu is not None
    assert nlb.usd_per_hour == pytest.approx(hour.usd + book.usage("NlcuPerHour") * nlcu.usd)
    assert nlb.name == "SSH load balancer (internal); ~1 NLCU an hour"
    assert nlb.source.startswith("Elastic Load Balancing pricing page") and nlb.price_date
    # 128 GiB × $0.09 + 64 MB/s × $0.26 + 7 days of backups (~the size) × $0.05, a month; IOPS included
    assert home.usd_per_month == pytest.approx(128 * 0.09 + 64 * 0.26 + 128 * 0.05, abs=0.01)
    assert home.name == ("FSx for OpenZFS /home 128 GiB, 64 MB/s; IOPS included (3 per GB); backups ~128 GB (kept 7 days)")
    assert "Amazon FSx for OpenZFS pricing page" in home.source


def test_a_home_the_price_file_has_no_figure_for_is_unpriced_and_says_how_to_price_it():
    items = fixed(identity_config(IDENTITY_DECLARED, home={"deploymentType": "SINGLE_AZ_2", "throughputCapacity": 160}))
    home = items["slurm-home-openzfs"]
    assert home.usd_per_hour is None
    assert home.source == (
        "unpriced: the price data has FSx for OpenZFS figures for SINGLE_AZ_1 only, not SINGLE_AZ_2; "
        "set gpucluster:estimate.pricePerHour.slurm-home-openzfs (USD per hour) to include it"
    )
    est = estimate(
        load_spec(
            identity_config(IDENTITY_DECLARED, home={"deploymentType": "SINGLE_AZ_2", "throughputCapacity": 160}), stack="people"
        ).cluster.spec,
        load_catalog(),
    )
    assert est.unpriced == (home.name,) and est.usd_per_hour is not None


def test_no_backups_no_backup_cost():
    items = fixed(identity_config(IDENTITY_DECLARED, home={"automaticBackupRetentionDays": 0}))
    home = items["slurm-home-openzfs"]
    assert home.name.endswith("; no backups") and home.usd_per_month == pytest.approx(128 * 0.09 + 64 * 0.26, abs=0.01)


def test_no_people_lines_without_the_sections():
    items = fixed(make_config(group(), slurm={}))
    assert not {"slurm-login-nodes", "slurm-login-nlb", "slurm-home-openzfs"} & items.keys()
    items = fixed(identity_config(IDENTITY_DECLARED, home={"enabled": False}))
    assert "slurm-home-openzfs" not in items
