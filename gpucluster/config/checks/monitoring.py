"""Checks of ``gpucluster:monitoring`` that need the rest of the cluster (its region, its schedulers)."""

from __future__ import annotations

from collections.abc import Iterator

from gpucluster.config.checks.deploy import kms_findings
from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.errors import Finding, error
from gpucluster.facts.catalog import Catalog

PATH = "gpucluster:monitoring"


def check_monitoring(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """The key is a key ARN in the cluster's region; Grafana only with monitoring on."""
    monitoring = spec.monitoring
    yield from kms_findings(
        monitoring.kms_key_arn, f"{PATH}.kmsKeyArn", spec.region, arn_only=True, service="AMP, CloudWatch Logs and SNS"
    )
    if monitoring.grafana.enabled and not monitoring.enabled:
        yield error(
            f"{PATH}.grafana.enabled",
            "a Grafana workspace is asked for but monitoring is off (it would have no AMP workspace to read)",
            "set monitoring.enabled to true, or grafana.enabled to false",
            True,
            "monitoring-grafana-off",
        )
