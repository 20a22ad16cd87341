"""``gpucluster:monitoring`` resolved: whether it is on, which collector each scheduler gets, and what it costs.

The collectors (docs/monitoring-aws.md):

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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.effective import effective_scheduler
from gpucluster.config.monitoring import MonitoringSpec, SubscriptionSpec
from gpucluster.facts.catalog import Catalog, InstanceFacts
from gpucluster.facts.prices import PriceBook
from gpucluster.resolve.cost.services import override_hint

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


@dataclass(frozen=True)
class ResolvedMonitoring:
    """Monitoring as the components build it."""

    spec: MonitoringSpec
    slurm_collector: bool
    """Prometheus in agent mode on the Slurm head node (a Slurm cluster with its own head node)."""
    eks_scraper: bool
    """An AMP managed scraper of the EKS cluster."""
    eks_logs: bool
    """Fluent Bit on the EKS cluster's cloud nodes, shipping into the cluster's log group."""
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
        eks_logs=spec.kubernetes is not None,
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


def monthly_samples(spec: ClusterSpec, resolved: ResolvedMonitoring, *, at_max: bool = False) -> float:
    """Samples a month from every node at its group's desired size, or its maximum (the head node's own series
    added)."""
    per_month = SECONDS_PER_MONTH / resolved.spec.scrape_interval_seconds
    series = sum(resolved.series_per_node[g.name] * _size(g, at_max) for g in spec.node_groups)
    series += SERIES_PER_NODE if resolved.slurm_collector else 0
    return series * per_month


def _size(group: NodeGroupSpec, at_max: bool) -> int:
    return group.max_size if at_max else group.desired_size or 0


@dataclass(frozen=True)
class MonitoringUsage:
    """What monitoring bills by, at one size of the cluster: samples ingested a month, logs shipped a month."""

    samples: float
    log_gb: float


def monitoring_parts(spec: ClusterSpec, book: PriceBook, catalog: Catalog) -> list[MonitoringPart]:
    """The estimate's monitoring line ``(name, usd_per_hour, kw, source, key, date, usd_per_hour_at_max)``: AMP
    (ingestion, storage, queries and the EKS scraper), CloudWatch Logs (the Slurm and EKS nodes') and Grafana's minimum editor
    together, at the node groups' desired and maximum sizes (the head and login nodes' logs at their fixed count).
    SNS is left out: its first million publishes and 1,000 e-mails a month are free, far above an alert topic's
    traffic."""
    resolved = resolve_monitoring(spec, catalog)
    if resolved is None:
        return []
    fixed_gb = book.usage("LogGbHeadMonth") if resolved.slurm_collector else 0.0
    login = spec.slurm.login_nodes if spec.slurm is not None else None
    fixed_gb += login.count * book.usage("LogGbLoginMonth") if login is not None else 0.0  # a fixed count

    kube = [g for g in spec.node_groups if effective_scheduler(g, spec) == "kubernetes"] if resolved.eks_logs else []
    others = [g for g in spec.node_groups if g not in kube] if spec.slurm is not None else []

    def usage(at_max: bool) -> MonitoringUsage:
        # Slurm nodes ship with gpucluster's shipper, EKS nodes (the system group's too) with Fluent Bit.
        gb = sum(_size(g, at_max) for g in others) * book.usage("LogGbPerNodeMonth")
        if resolved.eks_logs and spec.kubernetes is not None:
            system = spec.kubernetes.system_node_group
            eks_nodes = sum(_size(g, at_max) for g in kube) + (system.max_size if at_max else system.effective_desired_size)
            gb += eks_nodes * book.usage("LogGbEksNodeMonth")
        return MonitoringUsage(monthly_samples(spec, resolved, at_max=at_max), gb + fixed_gb)

    return [
        monitoring_line(
            book,
            spec.region,
            now=usage(False),
            at_max=usage(True),
            interval_seconds=resolved.spec.scrape_interval_seconds,
            eks_scraper=resolved.eks_scraper,
            retention_days=resolved.spec.log_retention_days,
            grafana=resolved.spec.grafana.enabled,
        )
    ]


MonitoringPart = tuple[str, "float | None", float, str, str, "str | None", "float | None"]


def _monthly_usd(
    prices: Mapping[str, Any], book: PriceBook, use: MonitoringUsage, *, eks_scraper: bool, retention_days: int
) -> float:
    """USD a month for ``use``: AMP ingestion (tiered), storage, query samples, the scraper; CloudWatch Logs."""
    samples = use.samples
    amp = tiered_usd(samples, prices["AmpIngestion"]["Tiers"])
    amp += samples * AMP_RETENTION_MONTHS * BYTES_PER_STORED_SAMPLE / 2**30 * prices["AmpStorageGbMonth"]["Usd"]
    amp += samples * book.usage("AmpQuerySamplesPerSample") / 1e9 * prices["AmpQueryBillionSamples"]["Usd"]
    if eks_scraper:
        amp += prices["AmpCollectorHour"]["Usd"] * 730 + samples / 1e7 * prices["AmpCollectedSamples"]["Usd"]
    retained = min(retention_days / 30.4, 120.0)
    logs = use.log_gb * prices["LogsIngestionGb"]["Usd"] + use.log_gb * retained * prices["LogsStorageGbMonth"]["Usd"]
    return amp + logs


def monitoring_line(
    book: PriceBook,
    region: str,
    *,
    now: MonitoringUsage,
    at_max: MonitoringUsage,
    interval_seconds: int,
    eks_scraper: bool,
    retention_days: int,
    grafana: bool,
) -> MonitoringPart:
    """The monitoring line from its quantities at the desired and the maximum size (the stack's estimate and the one
    worked out from a plan's resources share it). Its name states the usage assumed."""
    prices, note = book.services(region)
    needed = ["AmpIngestion", "AmpStorageGbMonth", "AmpQueryBillionSamples", "LogsIngestionGb", "LogsStorageGbMonth"]
    needed += ["AmpCollectorHour", "AmpCollectedSamples"] if eks_scraper else []
    needed += ["GrafanaEditorMonth"] if grafana else []
    missing = [k for k in needed if k not in prices]
    if missing:
        why = f"unpriced: the price data has no {', '.join(missing)} figure(s); {override_hint('monitoring')}"
        return ("Monitoring: AMP, CloudWatch Logs", None, 0.0, why, "monitoring", None, None)
    ingestion = prices["AmpIngestion"]
    reads = book.usage("AmpQuerySamplesPerSample")
    grow = f" ({at_max.samples / 1e6:,.0f} M at max)" if at_max.samples != now.samples else ""
    name = f"Monitoring: AMP {now.samples / 1e6:,.0f} M samples a month at {interval_seconds}s{grow}, each read ~{reads:g}×"
    if eks_scraper:
        name += ", managed scraper"
    sources = [f"AMP: {ingestion['Source']}"]
    if now.log_gb or at_max.log_gb:
        grow = f" ({at_max.log_gb:.1f} GB at max)" if at_max.log_gb != now.log_gb else ""
        name += f"; logs ~{now.log_gb:.1f} GB a month{grow}, kept {retention_days} days"
        sources.append(f"CloudWatch Logs: {prices['LogsIngestionGb']['Source']}, volume estimated per node")
    fixed = 0.0
    if grafana:
        editor = prices["GrafanaEditorMonth"]
        fixed += editor["Usd"]
        name += "; Grafana 1 editor (viewers $5 a month each)"
        sources.append(f"Grafana: {editor['Source']}")
    usd, usd_max = (
        _monthly_usd(prices, book, use, eks_scraper=eks_scraper, retention_days=retention_days) + fixed for use in (now, at_max)
    )
    return (
        name,
        round(usd / 730, 6),
        0.0,
        " · ".join(sources) + note,
        "monitoring",
        ingestion.get("Date"),
        round(usd_max / 730, 6),
    )
