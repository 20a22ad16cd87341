"""The estimate's service lines (FSx for OpenZFS, the SSH load balancer, Secrets Manager, Image Builder's builds,
monitoring at both sizes), the ``estimate.pricePerHour`` override of any line, and totals that are the priced part
with the unpriced lines named beside them."""

from __future__ import annotations

import pytest

from gpucluster.config.errors import ConfigError
from gpucluster.facts.catalog import load_catalog
from gpucluster.facts.prices import PriceBook, load_prices
from gpucluster.load import load_spec
from gpucluster.resolve.cost.estimate import estimate
from gpucluster.resolve.cost.services import image_builds_part, openzfs_part, secrets_part
from tests.conftest import IDENTITY_DECLARED, TWO_ZONES, group, identity_config, identity_directory_config, make_config

BOOK = load_prices()


def _estimate(config, prices=None):
    return estimate(load_spec(config, stack="svc").cluster.spec, load_catalog(), prices)


def _fixed(config, prices=None):
    return {i.key: i for i in _estimate(config, prices).fixed}


def test_openzfs_bills_iops_only_above_the_three_per_gb_included():
    part = openzfs_part(
        BOOK, "us-east-1", deployment_type="SINGLE_AZ_1", storage_gib=300, throughput_mbps=128, provisioned_iops=1000,
        backup_days=0,
    )  # fmt: skip
    name, usd = part[0], part[1]
    assert usd is not None
    assert usd * 730 == pytest.approx(300 * 0.09 + 128 * 0.26 + (1000 - 900) * 0.006, abs=0.01)
    assert "100 IOPS above the included" in name and name.endswith("; no backups")


def test_secrets_and_image_builds_state_their_usage():
    secrets = secrets_part(BOOK, "us-east-1", 2)
    assert secrets[0] == "Secrets Manager 2 secret(s); ~10,000 reads a month each"
    assert (secrets[1] or 0) * 730 == pytest.approx(2 * (0.40 + 0.05), abs=0.001)
    builds = image_builds_part(BOOK, "us-east-1", 3, "m7i.xlarge")
    price = BOOK.quote("m7i.xlarge", "us-east-1").usd_per_hour or 0
    assert builds[0] == "Image builds: 3 image(s) × 1 a month × ~1 h on m7i.xlarge"
    assert (builds[1] or 0) * 730 == pytest.approx(3 * price, abs=0.001)
    assert builds[3].endswith("; Image Builder adds no charge of its own")


def test_slurm_stack_lines_count_its_secrets_and_baked_images():
    declared = _fixed(identity_config(IDENTITY_DECLARED, loginNodes={"count": 2, "instanceType": "m7i.2xlarge"}))
    assert declared["secrets"].name.startswith("Secrets Manager 1 secret(s)")  # the munge key
    assert declared["image-builds"].name.startswith("Image builds: 1 image(s)")
    directory = _fixed(identity_directory_config())
    assert directory["secrets"].name.startswith("Secrets Manager 2 secret(s)")  # and the login nodes' host keys
    unbaked = _fixed(make_config(group(), slurm={"images": {"bake": False}}))
    assert "image-builds" not in unbaked and "secrets" in unbaked
    assert not {"secrets", "image-builds"} & _fixed(make_config(group())).keys()


def test_day1_monitoring_is_priced_at_the_desired_and_the_maximum_size():
    config = make_config(group(desiredSize=0, maxSize=16), slurm={})
    line = _fixed(config)["monitoring"]
    assert line.usd_per_hour is not None and line.usd_per_hour_max is not None
    assert line.usd_per_hour_max > 5 * line.usd_per_hour  # 16 nodes' samples and logs, not the head node's alone
    assert " M at max)" in line.name and "GB at max)" in line.name and "each read ~3×" in line.name
    est = _estimate(config)
    groups_max = sum(g.usd_per_hour_max or 0 for g in est.groups)
    fixed_max = sum(i.usd_per_hour_max or 0 for i in est.fixed)
    assert est.usd_per_hour_max == pytest.approx(groups_max + fixed_max, abs=0.01)
    assert est.as_dict()["fixed"][-1]["usdPerHourAtMax"] == line.usd_per_hour_max


def test_day1_totals_are_the_priced_part_and_name_what_is_unpriced():
    """A price file without the services' figures: their lines are unpriced, named, and the totals still a number."""
    bare = PriceBook({k: v for k, v in BOOK.document.items() if k != "Services"} | {"Services": {}})
    est = _estimate(identity_directory_config(), bare)
    assert est.unpriced == (
        "SSH load balancer (internal)",
        "FSx for OpenZFS /home 128 GiB, 64 MB/s",
        "Secrets Manager 2 secret(s)",
        "Monitoring: AMP, CloudWatch Logs",
    )
    priced = [i.usd_per_hour for i in est.fixed if i.usd_per_hour is not None]
    assert est.usd_per_hour == pytest.approx(sum(g.usd_per_hour or 0 for g in est.groups) + sum(priced), abs=0.01)
    nlb = {i.key: i for i in est.fixed}["slurm-login-nlb"]
    assert nlb.source == (
        "unpriced: the price data has no Elastic Load Balancing figures; "
        "set gpucluster:estimate.pricePerHour.slurm-login-nlb (USD per hour) to include it"
    )


def test_day1_every_line_can_be_priced_by_the_config():
    config = identity_directory_config()
    config["gpucluster:estimate"] = {"pricePerHour": {"slurm-home-openzfs": 0.5, "monitoring": 0.25, "secrets": 0}}
    items = _fixed(config)
    home, monitoring = items["slurm-home-openzfs"], items["monitoring"]
    assert (home.usd_per_hour, home.usd_per_hour_max, home.price_date) == (0.5, 0.5, None)
    assert home.source == "estimate.pricePerHour.slurm-home-openzfs (set in the stack config: the same now and at max size)"
    assert (monitoring.usd_per_hour, monitoring.usd_per_hour_max) == (0.25, 0.25) and items["secrets"].usd_per_hour == 0


@pytest.mark.parametrize(
    ("price_per_hour", "expected_message"),
    [
        (
            {"slurm-home-openfzs": 0.2},
            "gpucluster:estimate.pricePerHour: 'slurm-home-openfzs' is not a line of the estimate; did you mean "
            "'slurm-home-openzfs'? a node group's price is its own pricePerHour Fix: use one of: nat-gateways,",
        ),
        ({"monitoring": -1}, "gpucluster:estimate.pricePerHour: 'monitoring' is priced -1 USD per hour, below 0 Fix: write"),
        (
            {"slurm-login-nlb": 0.1},
            "gpucluster:estimate.pricePerHour.slurm-login-nlb: this stack's estimate has no 'slurm-login-nlb' line to "
            "price (its lines: nat-gateways, slurm-head-node, slurm-login-nodes, slurm-home-openzfs, secrets, "
            "image-builds, monitoring) Fix: remove the key, or price one of the lines the stack has",
        ),
    ],
)
def test_day1_a_bad_override_names_the_key_the_value_and_the_fix(price_per_hour, expected_message):
    config = identity_config(IDENTITY_DECLARED, loginNodes={"count": 2, "instanceType": "m7i.2xlarge"})
    config["gpucluster:estimate"] = {"pricePerHour": price_per_hour}
    with pytest.raises(ConfigError) as refused:
        load_spec(config, stack="svc")
    assert expected_message in str(refused.value) and "Traceback" not in str(refused.value)


def test_login_nodes_logs_are_in_the_monitoring_estimate():
    """Each login node ships its own logs (auth.log, syslog, SSSD, Session Manager's agent): the monitoring line's log
    volume grows by the price file's ``LogGbLoginMonth`` a login node, at both sizes (their count is fixed)."""
    import re

    def logs(count: int) -> tuple[float, ...]:
        line = _fixed(identity_config(IDENTITY_DECLARED, loginNodes={"count": count, "instanceType": "m7i.2xlarge"}))
        return tuple(float(x) for x in re.findall(r"([\d.]+) GB", line["monitoring"].name))

    one, three = logs(1), logs(3)
    assert len(one) == len(three) >= 1
    per_login = BOOK.usage("LogGbLoginMonth")
    assert per_login > 0
    assert [round(b - a, 1) for a, b in zip(one, three, strict=True)] == [round(2 * per_login, 1)] * len(one)


def test_eks_nodes_logs_are_in_the_monitoring_estimate():
    """Fluent Bit ships every EKS node's logs (the GPU groups' and the system group's): the monitoring line's log
    volume is the price file's ``LogGbEksNodeMonth`` a node, at the desired and the maximum sizes; two more GPU nodes
    add two nodes' worth at both."""
    import re

    def logs(desired: int) -> tuple[float, ...]:
        config = make_config(group(desiredSize=desired, maxSize=6), network=TWO_ZONES, kubernetes={}, monitoring={})
        line = _fixed(config)["monitoring"]
        return tuple(float(x) for x in re.findall(r"([\d.]+) GB", line.name))

    per_node = BOOK.usage("LogGbEksNodeMonth")
    assert per_node > 0
    # 2 system nodes at their desired size, 4 at their maximum (the system group's defaults)
    assert logs(1) == (round(3 * per_node, 1), round(10 * per_node, 1))
    assert logs(3) == (round(5 * per_node, 1), round(10 * per_node, 1))
