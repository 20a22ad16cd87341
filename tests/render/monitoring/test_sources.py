"""Every series a dashboard queries has a source: a program that writes it and a scrape job of the scheduler's
collection config (the rendered one, read back as YAML) that collects it. Reads the dashboards' own JSON."""

from __future__ import annotations

import pytest
import yaml

from gpucluster.render.kubernetes.health import DCGM_METRICS
from gpucluster.render.monitoring.collection import prometheus_agent_config, scraper_config
from gpucluster.render.monitoring.dashboards import dashboards, queries
from gpucluster.render.monitoring.sources import (
    ANY_JOB,
    KUBERNETES,
    RULES,
    SLURM,
    SOURCES,
    metrics_of,
    source_of,
)


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("count(DCGM_FI_DEV_GPU_TEMP)", {"DCGM_FI_DEV_GPU_TEMP"}),
        ('count by (severity) (ALERTS{alertstate="firing"})', {"ALERTS"}),
        ("rate(DCGM_FI_DEV_THERMAL_VIOLATION[5m]) / 1e9", {"DCGM_FI_DEV_THERMAL_VIOLATION"}),
        (
            "sum by (instance, direction) (rate(gpucluster_lustre_client_bytes_total[5m]))",
            {"gpucluster_lustre_client_bytes_total"},
        ),
        (
            'min by (instance, mountpoint) (node_filesystem_avail_bytes{fstype!~"tmpfs|overlay"} / node_filesystem_size_bytes)',
            {"node_filesystem_avail_bytes", "node_filesystem_size_bytes"},
        ),
        (
            "sum by (cluster_queue) (sum_over_time(kueue_cluster_queue_resource_usage[24h:5m])) * 5 / 60",
            {"kueue_cluster_queue_resource_usage"},
        ),
        ("a > bool 0 and on (node) b unless ignoring (x) c", {"a", "b", "c"}),
    ],
)
def test_metrics_of(expr, expected):
    assert metrics_of(expr) == expected


def _jobs(config_text: str) -> set[str]:
    return {job["job_name"] for job in yaml.safe_load(config_text)["scrape_configs"]}


COLLECTION_JOBS = {
    SLURM: _jobs(prometheus_agent_config("c", "ws-1", 30, signer="127.0.0.1:9091", teams="127.0.0.1:9402")),
    KUBERNETES: _jobs(scraper_config("c", 30, "gpu-operator", "kueue-system")),
}


@pytest.mark.parametrize("scheduler", sorted(SOURCES))
def test_every_source_is_a_job_of_the_schedulers_collection(scheduler):
    for source in SOURCES[scheduler]:
        assert source.job in COLLECTION_JOBS[scheduler] | {ANY_JOB, RULES}, (scheduler, source)


def test_every_query_of_every_dashboard_names_series_some_job_collects():
    """A query that names a metric no scheduler's scrape job collects (a typo, a series nobody exports) fails here:
    the provisioned copies would silently drop it."""
    orphans = [
        (name, title, metric)
        for name, board in dashboards(gpu_hour_price_usd=4.1).items()
        for title, expr in queries(board)
        for metric in sorted(metrics_of(expr))
        if source_of(metric, (SLURM, KUBERNETES)) is None
    ]
    assert orphans == []
    assert source_of("DCGM_FI_DEV_NOT_A_FIELD", (SLURM, KUBERNETES)) is None


def test_eks_sources_are_the_dcgm_counters_list_kueue_and_nothing_of_the_nodes():
    """On EKS the series come from the GPU Operator's dcgm-exporter (only the fields its counters list names),
    Kueue and AMP itself; no node exporter, EFA, Lustre or Slurm exporter runs there."""
    listed = {f for f, kind, _ in DCGM_METRICS if kind != "label"}
    assert source_of("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", (KUBERNETES,)) is not None
    assert source_of("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", (SLURM,)) is None  # NVML has no profiling counters
    assert source_of("DCGM_FI_DEV_MEM_COPY_UTIL", (KUBERNETES,)).job == "gpu"  # type: ignore[union-attr]
    for metric in ("node_amazonefa_tx_bytes", "node_filesystem_avail_bytes", "gpucluster_lustre_client_bytes_total"):
        assert source_of(metric, (KUBERNETES,)) is None and source_of(metric, (SLURM,)) is not None, metric
    assert source_of("gpucluster_slurm_nodes", (KUBERNETES,)) is None
    assert source_of("kueue_pending_workloads", (SLURM,)) is None
    for name, board in dashboards().items():
        for _, expr in queries(board):
            for metric in metrics_of(expr):
                if metric.startswith("DCGM_FI_") and source_of(metric, (KUBERNETES,)) is not None:
                    assert metric in listed, (name, metric)
