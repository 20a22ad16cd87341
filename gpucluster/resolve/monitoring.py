"""``gpucluster:monitoring`` resolved: whether it is on, which collector each scheduler gets, and what it costs.

The collectors (docs/monitoring.md, ``## AWS resources``):

- **EKS**: an AMP managed scraper (``aws.amp.Scraper``, source ``eks``) — nothing to run or patch in the cluster.
- **Slurm**: Prometheus in agent mode on the head node. It discovers the cluster's GPU nodes by tag
  (``ec2_sd_configs``; dynamic nodes come and go, so a static list would be stale), scrapes their exporters and
  remote-writes to AMP with SigV4 using the head node's role. An AMP scraper with a ``vpc`` source would need
  subnets in two zones and targets listed in its own config (it has no EC2 discovery), and the head node already
  runs the cluster's other daemons; agent mode keeps no local TSDB, only a write-ahead log.

The cost model: samples per month = series per node × nodes × seconds in a month ÷ scrape interval, priced at AMP's
tiered ingestion price; the series per node is an estimate per GPU, vCPU and EFA interface (below).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.monitoring import MonitoringSpec, SubscriptionSpec
from gpucluster.facts.catalog import Catalog, InstanceFacts
from gpucluster.facts.prices import REFERENCE_REGION, PriceBook

SECONDS_PER_MONTH = 730 * 3600

# Series one node exports, per part, fitted to the measured p5.48xlarge figure (docs/monitoring.md ``## Metrics``,
# bench/metrics_cost.py: gpucluster's exporter 1,384 series, the node exporter about 3,100 scaled to 192 vCPUs,
# 32 network cards and 8 NVMe disks, about 4,500 a node in all):
SERIES_PER_GPU = 33
"""The GPU metrics in DCGM's names (8 GPUs: about 260)."""
SERIES_PER_VCPU = 8
"""The node exporter's ``node_cpu_seconds_total`` (8 modes; guest time, softnet and cpufreq are dropped)."""
SERIES_PER_EFA = 75
"""An EFA network card: its hardware counters (35) and the node exporter's series of its interface."""
SERIES_PER_NODE = 300
"""The rest: memory, disks, file systems, the Lustre client, the exporters' own and scrape meta series."""

BYTES_PER_STORED_SAMPLE = 2.0
"""AMP's pricing page: a sample is typically 1 or 2 bytes stored; metadata on top is small next to 150 days."""
AMP_RETENTION_MONTHS = 150 / 30.4
"""AMP keeps samples 150 days by default: storage in the steady state holds that many months of samples."""
LOG_GB_PER_NODE_MONTH = 0.6
"""slurmd, the health verdicts and cloud-init of one compute node (about 20 MB a day, an estimate)."""
LOG_GB_HEAD_MONTH = 3.0
"""slurmctld, slurmdbd and the node agent on the head node (about 100 MB a day, an estimate)."""


@dataclass(frozen=True)
class ResolvedMonitoring:
    """Monitoring as the components build it."""

    spec: MonitoringSpec
    slurm_collector: bool
    """Prometheus in agent mode on the Slurm head node (a Slurm cluster with its own head node)."""
    eks_scraper: bool
    """An AMP managed scraper of the EKS cluster."""
    series_per_node: dict[str, int]
    """Estimated series per node, by node group."""

    @property
    def scrape_interval(self) -> str:
        return f"{self.spec.scrape_interval_seconds}s"


def subscribers(spec: MonitoringSpec) -> tuple[SubscriptionSpec, ...]:
    """Every subscriber of the alert topic: ``alarmEmails`` as ``email`` subscriptions, then ``subscriptions`` (an
    ``email`` one that repeats an address of ``alarmEmails`` once only)."""
    emails = tuple(SubscriptionSpec(protocol="email", endpoint=a) for a in spec.alarm_emails)
    listed = {("email", a) for a in spec.alarm_emails}
    return emails + tuple(s for s in spec.subscriptions if (s.protocol, s.endpoint) not in listed)


def series_per_node(facts: InstanceFacts) -> int:
    """Estimated series one node of ``facts``' type exports (GPUs, vCPUs and EFA interfaces counted)."""
    efa = facts.max_efa_interfaces if facts.efa_supported else 0
    return SERIES_PER_GPU * facts.gpu_count + SERIES_PER_VCPU * facts.vcpus + SERIES_PER_EFA * efa + SERIES_PER_NODE


def resolve_monitoring(spec: ClusterSpec, catalog: Catalog) -> ResolvedMonitoring | None:
    """The monitoring of ``spec``, or ``None`` when it is off or the cluster has no scheduler to monitor."""
    monitoring = spec.monitoring
    if not monitoring.enabled or (spec.slurm is None and spec.kubernetes is None):
        return None
    own_head = spec.slurm is not None and (spec.hybrid is None or spec.hybrid.controller is None)
    return ResolvedMonitoring(
        monitoring,
        slurm_collector=own_head,
        eks_scraper=spec.kubernetes is not None,
        series_per_node={g.name: series_per_node(catalog[g.instance_type]) for g in spec.node_groups},
    )


def tiered_usd(samples: float, tiers: list[list[Any]]) -> float:
    """USD for ``samples`` in a month at AMP's tiers (``[[samples in the tier or None, USD per 10M], …]``)."""
    usd, left = 0.0, samples
    for size, per_10m in tiers:
        taken = left if size is None else min(left, float(size))
        usd += taken / 1e7 * float(per_10m)
        left -= taken
        if left <= 0:
            break
    return usd


def monitoring_book(book: PriceBook, region: str) -> tuple[dict[str, Any], str]:
    """The monitoring prices for ``region`` (us-east-1's where the file has none) and a note saying which."""
    prices = book.document.get("Monitoring", {})
    if region in prices:
        return prices[region], ""
    return prices.get(REFERENCE_REGION, {}), f"; us-east-1 prices, the catalog has no {region} figure"


def monthly_samples(spec: ClusterSpec, resolved: ResolvedMonitoring) -> float:
    """Samples a month from every node at its group's desired size (the head node's own series added)."""
    per_month = SECONDS_PER_MONTH / resolved.spec.scrape_interval_seconds
    series = sum(resolved.series_per_node[g.name] * (g.desired_size or 0) for g in spec.node_groups)
    series += SERIES_PER_NODE if resolved.slurm_collector else 0
    return series * per_month


def monitoring_parts(
    spec: ClusterSpec, book: PriceBook, catalog: Catalog
) -> list[tuple[str, float | None, float, str, str, str | None]]:
    """The estimate's monitoring line ``(name, usd_per_hour, kw, source, key, date)``: AMP (ingestion, storage and
    the EKS scraper), CloudWatch Logs (the Slurm nodes') and Grafana's minimum editor together. SNS is left out: its
    first million publishes and 1,000 e-mails a month are free, far above an alert topic's traffic."""
    resolved = resolve_monitoring(spec, catalog)
    if resolved is None:
        return []
    nodes = sum(g.desired_size or 0 for g in spec.node_groups) if spec.slurm is not None else 0  # Slurm nodes ship logs
    return [
        monitoring_line(
            book,
            spec.region,
            samples=monthly_samples(spec, resolved),
            interval_seconds=resolved.spec.scrape_interval_seconds,
            eks_scraper=resolved.eks_scraper,
            log_gb=nodes * LOG_GB_PER_NODE_MONTH + (LOG_GB_HEAD_MONTH if resolved.slurm_collector else 0.0),
            retention_days=resolved.spec.log_retention_days,
            grafana=resolved.spec.grafana.enabled,
        )
    ]


def monitoring_line(
    book: PriceBook,
    region: str,
    *,
    samples: float,
    interval_seconds: int,
    eks_scraper: bool,
    log_gb: float,
    retention_days: int,
    grafana: bool,
) -> tuple[str, float | None, float, str, str, str | None]:
    """The monitoring line from its quantities (the stack's estimate and the one worked out from a plan's resources
    share it)."""
    prices, note = monitoring_book(book, region)
    ingestion = prices["AmpIngestion"]
    amp = tiered_usd(samples, ingestion["Tiers"])
    amp += samples * AMP_RETENTION_MONTHS * BYTES_PER_STORED_SAMPLE / 2**30 * prices["AmpStorageGbMonth"]["Usd"]
    name = f"Monitoring: AMP {samples / 1e6:,.0f} M samples a month at {interval_seconds}s"
    if eks_scraper:
        amp += prices["AmpCollectorHour"]["Usd"] * 730 + samples / 1e7 * prices["AmpCollectedSamples"]["Usd"]
        name += ", managed scraper"
    retained = min(retention_days / 30.4, 120.0)
    logs = log_gb * prices["LogsIngestionGb"]["Usd"] + log_gb * retained * prices["LogsStorageGbMonth"]["Usd"]
    sources = [f"AMP: {ingestion['Source']}"]
    if log_gb:
        name += f"; logs ~{log_gb:.1f} GB a month, kept {retention_days} days"
        sources.append(f"CloudWatch Logs: {prices['LogsIngestionGb']['Source']}, volume estimated per node")
    usd = amp + logs
    if grafana:
        editor = prices["GrafanaEditorMonth"]
        usd += editor["Usd"]
        name += "; Grafana 1 editor (viewers $5 a month each)"
        sources.append(f"Grafana: {editor['Source']}")
    return (name, round(usd / 730, 6), 0.0, " · ".join(sources) + note, "monitoring", ingestion.get("Date"))
