# pyright: strict
"""Re-baseline figures: what a new image's deep checks measured, compared with the previous image's. Used by the
agent's pass (``baseline.py``). Where they are kept (the cluster's bucket) and how they are read back is the contract's
(:class:`gpucluster_agents.contract.baseline.Store`): ``gpucluster baseline`` on the operator's machine reads them there.

Objects, under the config's prefix (``baselines/``):

- ``<group>/<image id>.json``: ``{group, image_id, time, job_id, nodes: {node: figures}, figures: {metric:
  median}, previous: {image_id, figures} | null, thresholds, verdict: {ok, why, regressions: [...]}}``.
- ``<group>/index.json``: ``{group, baseline: <image id> | null, images: [{image_id, time, ok, why}]}``: the
  baseline is the last image that passed; the agent reads the index by its key (its role cannot list).

A group's figure of a per-GPU metric is the median over every GPU of every measured node, a node's bus bandwidth
the median over nodes: an image change moves every GPU, one slow GPU is the health checks' business (each deep
verdict's own thresholds), not the image's.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from ..contract.baseline import METRICS

Figures = dict[str, float]


def group_figures(per_node: Mapping[str, Mapping[str, Any]]) -> Figures:
    """Per-node figures (``health/baseline_job.node_figures``) -> the group's medians, metrics with values only."""
    out: Figures = {}
    for metric in METRICS:
        values: list[float] = []
        for fig in per_node.values():
            v = fig.get(metric)
            found = list(cast("dict[str, Any]", v).values()) if isinstance(v, dict) else [v]
            # the job's AdminComment is read as data: anything but a number is left out, never raised on
            values.extend(float(x) for x in found if isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0)
        if values:
            out[metric] = round(statistics.median(values), 1)
    return out


@dataclass(frozen=True)
class Regression:
    metric: str
    previous: float
    new: float | None  # None: the new image did not measure it
    threshold_pct: float

    @property
    def drop_pct(self) -> float | None:
        return None if self.new is None else round(100.0 * (self.previous - self.new) / self.previous, 1)

    def text(self) -> str:
        if self.new is None:
            return f"{self.metric} not measured on the new image (previous {self.previous:g})"
        return f"{self.metric} {self.new:g} is {self.drop_pct:g} % below {self.previous:g} (allowed {self.threshold_pct:g} %)"


@dataclass(frozen=True)
class Verdict:
    ok: bool
    why: str
    regressions: tuple[Regression, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        regs = [{"metric": r.metric, "previous": r.previous, "new": r.new, "drop_pct": r.drop_pct, "allowed_pct": r.threshold_pct}
                for r in self.regressions]  # fmt: skip
        return {"ok": self.ok, "why": self.why, "regressions": regs}


def baseline_verdict(new: Mapping[str, float], previous: Mapping[str, float] | None, thresholds: Mapping[str, float]) -> Verdict:
    """Whether a new image's figures keep up with the previous image's: a metric the previous image measured must
    be measured again (a skipped GEMM on a new image is a broken cuBLAS, not a pass) and may drop by at most its
    threshold, in percent of the previous figure. Higher is better for every metric. No previous: the first
    baseline, which passes and becomes the reference, unless it measured nothing at all."""
    if not new:  # every benchmark skipped (no CUDA, no cuBLAS, no nccl-tests): nothing to trust, nor to compare with later
        return Verdict(False, "the deep checks measured no figure (HBM copy, GEMM and all-reduce all skipped)")
    if not previous:
        return Verdict(True, "first baseline of this group: nothing to compare with")
    regs: list[Regression] = []
    for metric in METRICS:
        before = previous.get(metric)
        if before is None or before <= 0:
            continue
        allowed = float(thresholds.get(metric, 0.0))
        after = new.get(metric)
        if after is None or after < before * (1 - allowed / 100.0):
            regs.append(Regression(metric, float(before), None if after is None else float(after), allowed))
    if regs:
        return Verdict(False, "; ".join(r.text() for r in regs), tuple(regs))
    compared = ", ".join(f"{m} {new[m]:g} vs {previous[m]:g}" for m in METRICS if m in previous and m in new)
    return Verdict(True, f"within thresholds: {compared}" if compared else "no figure to compare")
