"""Where each series a dashboard queries comes from, per scheduler: the scrape job that collects it and the program
that writes it.

A cluster's Grafana gets only the queries whose every series has a source on that cluster (:mod:`.provision`): an
EKS cluster runs no node exporter, no EFA or Lustre exporter and no Slurm, so a query of ``node_*``,
``node_amazonefa_*``, ``gpucluster_lustre_*`` or the head node's ``gpucluster_slurm_*`` would draw an empty panel
there. The name sets come from the producers themselves (the series gpucluster's exporters write,
:mod:`gpucluster_agents.contract.metrics`; the dcgm-exporter counters list the GPU Operator is given), so a dashboard
that starts querying a series nobody writes loses that query everywhere, and the tests fail on it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpucluster.render.kubernetes.health import DCGM_METRICS
from gpucluster.render.monitoring import series as s
from gpucluster_agents.contract import metrics as m

SLURM = "slurm"
KUBERNETES = "kubernetes"
RULES = "rules"
"""Not a scrape job: the series the workspace's own rule evaluation writes (``ALERTS``)."""
ANY_JOB = "*"
"""Every scrape job: the series Prometheus writes about each scrape (``up``)."""


@dataclass(frozen=True)
class Source:
    """Series one program writes and the scrape job of the scheduler's collection config that collects them."""

    job: str
    producer: str
    names: frozenset[str] = frozenset()
    prefix: str = ""

    def writes(self, metric: str) -> bool:
        return metric in self.names or bool(self.prefix and metric.startswith(self.prefix))


def _names(*metrics: tuple[Any, ...]) -> frozenset[str]:
    return frozenset(str(m[0]) for m in metrics)


_GPU_EXPORTER = _names(*m.GPU_FIELDS, *m.NVLINK_ERRORS, m.RESERVED, m.XID_LAST, m.XID_TOTAL, m.READ_ERRORS, m.NVML_UP) | _names(
    m.GPU_COUNT, m.XID_READABLE, m.COLLECTOR_OK, m.SCRAPE_SECONDS
)
_HEAD_EXPORTER = _names(m.NODES, m.DRAINS, m.NODE_GPUS, m.JOBS, m.PENDING, m.LAUNCHES, m.HOLDS, m.PROTECTED) | _names(
    m.BOOT_FAILS, m.REPAIRS, m.REPAIRED, m.BRAKE, m.COLLECTOR_OK, m.SCRAPE_SECONDS
)
_TEAM_EXPORTER = _names(*m.ACCOUNT_FAMILIES)
_EVERYWHERE = (
    Source(ANY_JOB, "Prometheus itself, per scrape target", frozenset({"up"})),
    Source(RULES, "the AMP workspace's alert rules (the rule evaluation writes ALERTS)", frozenset({"ALERTS"})),
)

SOURCES: dict[str, tuple[Source, ...]] = {
    SLURM: (
        Source("gpu", "gpucluster's NVML exporter on the GPU nodes (gpucluster_agents.metrics.gpu)", _GPU_EXPORTER),
        Source("gpu", "gpucluster's exporter: the EFA devices' hardware counters", prefix=m.EFA_PREFIX),
        Source("gpu", "gpucluster's exporter: the Lustre client", _names(m.LUSTRE_OPS, m.LUSTRE_BYTES)),
        Source("head", "gpucluster's exporter on the head node: Slurm and the node agent", _HEAD_EXPORTER),
        Source("teams", "gpucluster's loopback exporter on the head node: each team's figures (admins only)", _TEAM_EXPORTER),
        Source("node", "Debian's prometheus-node-exporter on every Slurm node", prefix="node_"),
        Source("head", "Debian's prometheus-node-exporter on the head node (its systemd collector)", frozenset({s.UNIT_STATE})),
        *_EVERYWHERE,
    ),
    KUBERNETES: (
        Source(
            "gpu",
            "NVIDIA dcgm-exporter of the GPU Operator, with gpucluster's counters list",
            frozenset(f for f, kind, _ in DCGM_METRICS if kind != "label"),
        ),
        Source(
            "kueue",
            "Kueue's controller (metrics.enableClusterQueueResources)",
            frozenset({s.KUEUE_USAGE, s.KUEUE_QUOTA, s.KUEUE_PENDING}),
        ),
        *_EVERYWHERE,
    ),
}
"""Per scheduler, every source of a series the dashboards may query. On EKS the scraper's ``node`` job keeps pods
named ``*node-exporter*``, which gpucluster does not install: it is no source here."""

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"(?<![\w.])([A-Za-z_:][\w:]*)(\s*\()?")
_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "bool", "and", "or", "unless", "offset", "group_left", "group_right"})


def metrics_of(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (function names, label names, keywords and numbers left out)."""
    text = _RANGES.sub(" ", _MATCHERS.sub(" ", _STRING.sub(" ", expr)))
    text = _GROUPING.sub(" ", text)
    found: set[str] = set()
    for name, call in _IDENT.findall(text):
        if not call and name not in _KEYWORDS and not re.fullmatch(r"(?i)inf|nan", name):
            found.add(name)
    return found


def source_of(metric: str, schedulers: Iterable[str]) -> Source | None:
    """The first source of ``metric`` on a cluster running ``schedulers``; ``None``: nothing there writes it."""
    for scheduler in schedulers:
        for source in SOURCES[scheduler]:
            if source.writes(metric):
                return source
    return None


def has_sources(expr: str, schedulers: Iterable[str]) -> bool:
    """Every series of ``expr`` has a source on a cluster running ``schedulers``."""
    kinds = tuple(schedulers)
    return all(source_of(metric, kinds) is not None for metric in metrics_of(expr))
