"""What a healthy GPU of each model reads: link generation and width, NVLink links, measured benchmark
baselines and a temperature limit (``data/gpu_health.json``, each figure with its source). The node
health program's config is built from these and the instance facts (:mod:`gpucluster.resolve.compute.health`).

Keyed by GPU model, the catalog's ``GpuInfo`` name, not by instance type: an H100 reads the same in a
p5.48xlarge and a p5.4xlarge. Baselines are measurements only; a model without one has ``None`` and its
benchmark checks skip rather than judge a GPU against a guess.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from gpucluster.facts.catalog import DATA_DIR

GPU_HEALTH_FILE = DATA_DIR / "gpu_health.json"


@dataclass(frozen=True)
class GpuHealthFacts:
    model: str
    pcie_generation: int  # 0: the board decides; compare with NVML's maximum only
    pcie_width: int
    pcie_idle_downshift: bool  # a PCIe card: the link generation drops while idle
    nvlink_links_per_gpu: int
    hbm_copy_baseline_gbps: float | None
    gemm_baseline_tflops: float | None
    temperature_max_c: int


@functools.lru_cache(maxsize=2)
def _load(path: Path = GPU_HEALTH_FILE) -> dict[str, GpuHealthFacts]:
    doc = json.loads(Path(path).read_text())
    out: dict[str, GpuHealthFacts] = {}
    for model, x in doc["GpuModels"].items():
        out[model] = GpuHealthFacts(
            model=model,
            pcie_generation=int(x["PcieGeneration"]),
            pcie_width=int(x["PcieWidth"]),
            pcie_idle_downshift=bool(x["PcieIdleDownshift"]),
            nvlink_links_per_gpu=int(x["NvlinkLinksPerGpu"]),
            hbm_copy_baseline_gbps=x["HbmCopyBaselineGbps"],
            gemm_baseline_tflops=x["GemmBaselineTflops"],
            temperature_max_c=int(x["TemperatureMaxC"]),
        )
    return out


def gpu_health_facts(model: str | None) -> GpuHealthFacts | None:
    """The facts of a GPU model (``H100``), or None for a model the file does not know (and for None)."""
    return _load().get(model) if model else None
