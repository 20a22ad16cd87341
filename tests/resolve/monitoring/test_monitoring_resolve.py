"""``gpucluster:monitoring`` resolved: on by default where a scheduler runs, its subscribers, and what it costs."""

from __future__ import annotations

import pytest

from gpucluster.load import load_spec
from gpucluster.resolve.monitoring import SECONDS_PER_MONTH, series_per_node, subscribers, tiered_usd
from tests.config.monitoring.test_monitoring_config import eks_config, slurm_cluster
from tests.conftest import group, make_config


def test_on_by_default_for_slurm_and_eks_and_off_for_plain_groups():
    slurm = load_spec(slurm_cluster(), stack="m").cluster.monitoring
    assert slurm is not None and slurm.slurm_collector and not slurm.eks_scraper
    assert slurm.spec.scrape_interval_seconds == 30 and slurm.spec.log_retention_days == 180
    assert not slurm.spec.grafana.enabled
    eks = load_spec(eks_config(), stack="m").cluster.monitoring
    assert eks is not None and eks.eks_scraper and not eks.slurm_collector
    assert load_spec(make_config(group()), stack="m").cluster.monitoring is None
    assert load_spec(slurm_cluster(enabled=False), stack="m").cluster.monitoring is None


def test_subscribers_join_emails_and_subscriptions():
    spec = load_spec(
        slurm_cluster(
            alarmEmails=["oncall@example.com"],
            subscriptions=[
                {"protocol": "email", "endpoint": "oncall@example.com"},
                {"protocol": "sqs", "endpoint": "arn:aws:sqs:us-east-1:123456789012:alerts"},
            ],
        ),
        stack="m",
    ).cluster.monitoring
    assert spec is not None
    assert [(s.protocol, s.endpoint) for s in subscribers(spec.spec)] == [
        ("email", "oncall@example.com"),
        ("sqs", "arn:aws:sqs:us-east-1:123456789012:alerts"),
    ]


def test_tiers_price_each_band_at_its_rate():
    tiers = [[2e9, 0.90], [250e9, 0.35], [None, 0.16]]
    assert tiered_usd(1e9, tiers) == pytest.approx(90.0)
    assert tiered_usd(3e9, tiers) == pytest.approx(180.0 + 35.0)
    assert tiered_usd(262e9, tiers) == pytest.approx(180.0 + 8750.0 + 160.0)


def test_estimate_has_monitoring_lines_that_follow_interval_and_nodes(catalog):
    def amp(config):
        est = load_spec(config, stack="m").cluster.estimate
        return {i.key: i for i in est.fixed}

    base = amp(slurm_cluster())["monitoring"]
    assert "AMP" in base.name and "kept 180 days" in base.name and "Grafana" not in base.name
    slower = amp(slurm_cluster(scrapeIntervalSeconds=60))["monitoring"]
    assert (slower.usd_per_hour or 0) < (base.usd_per_hour or 0)
    with_grafana = amp(slurm_cluster(grafana={"enabled": True}))["monitoring"]
    assert (with_grafana.usd_per_month or 0) - (base.usd_per_month or 0) == pytest.approx(9.0, abs=0.01)
    assert "monitoring" not in amp(slurm_cluster(enabled=False))
    # The budget: AMP for a p5 node at the default interval costs at most 0.1 % of its on-demand price.
    p5 = catalog["p5.48xlarge"]
    assert 4300 <= series_per_node(p5) <= 4700  # the exporter's measured ~4,500 (docs/monitoring.md, Metrics)
    samples = series_per_node(p5) * SECONDS_PER_MONTH / 30
    monthly_node = 55.04 * 730
    assert tiered_usd(samples, [[2e9, 0.90]]) / monthly_node <= 0.001
