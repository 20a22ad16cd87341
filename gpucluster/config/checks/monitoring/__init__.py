"""Checks of ``gpucluster:monitoring`` that need the rest of the cluster (its region, its schedulers)."""

from __future__ import annotations

from collections.abc import Iterator

from gpucluster.config.checks.deploy import kms_findings
from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.errors import Finding, error, warning
from gpucluster.facts.catalog import Catalog

PATH = "gpucluster:monitoring"


def check_monitoring(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """The key is a key ARN in the cluster's region; Grafana only with monitoring on, and where its dashboards are
    provisioned, a word on the network path `pulumi up` needs."""
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
    if monitoring.enabled and (spec.slurm is not None or spec.kubernetes is not None):
        if not monitoring.alarm_emails and not monitoring.subscriptions:
            yield warning(
                PATH,
                "the alerts (GPU faults, a controller down, a node idle while allocated) go to an SNS topic that has no "
                "subscriber, so nobody is told",
                "add monitoring.alarmEmails (e.g. [oncall@example.com]) or monitoring.subscriptions, or subscribe to the "
                "topic <cluster>-alerts yourself after deploying",
                None,
                "alerts-no-subscriber",
            )
        if monitoring.grafana.enabled and monitoring.grafana.provision_dashboards:
            yield warning(
                f"{PATH}.grafana.provisionDashboards",
                "pulumi up puts the dashboards into the Grafana workspace through its API, and the workspace admits "
                "only its VPC endpoint: from outside the cluster's VPC that step fails",
                "run pulumi up from inside the VPC (a runner there, a VPN), or set grafana.provisionDashboards to false "
                "and import the files `gpucluster dashboards --out <folder>` writes",
                None,
                "grafana-provision-from-vpc",
            )
