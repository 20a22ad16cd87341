# pyright: strict
"""The slow checks: the HBM copy and GEMM measured against the type's baseline, DCGM's diagnostic and
an NCCL all-reduce across the node's GPUs. Tools that are not on the image (dcgmi, all_reduce_perf,
cuBLAS) make their check skip with a note, never fail: their absence says nothing about the GPU.

A benchmark below ``min_fraction`` (90 %) of its baseline is a ``replace``: a straggler GPU slows
every collective of every job it joins, and a reboot does not make HBM or SMs faster.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from typing import Any, cast

from ..contract.health import HealthConfig
from .cuda_bench import BenchUnavailable, Cuda, gemm_tflops, hbm_copy_gbps
from .verdict import Check, failed, passed, skipped

NCCL_TEST_DIRS = ("/opt/nccl-tests/build", "/usr/local/bin")


def _measure(name: str, fake: Any, fn: Callable[[Cuda, int], float]) -> tuple[dict[str, float] | None, str]:
    """Per GPU figures, from the fake scenario's ``bench`` when one is in use, else from the GPUs."""
    if fake is not None:
        bench: dict[str, Any] = getattr(fake, "bench", {})
        if name not in bench:
            return None, f"the fake NVML scenario has no bench.{name}"
        figure = bench[name]
        count = int(fake.nvmlDeviceGetCount())
        if isinstance(figure, dict):
            per = {str(k): float(v) for k, v in cast("dict[Any, Any]", figure).items()}
            return {f"gpu{i}": per.get(str(i), per.get("default", 0.0)) for i in range(count)}, "fake"
        return {f"gpu{i}": float(figure) for i in range(count)}, "fake"
    try:
        cuda = Cuda()
        return {f"gpu{i}": round(fn(cuda, i), 1) for i in range(cuda.device_count())}, "cuda"
    except BenchUnavailable as exc:
        return None, str(exc)


def _bench_check(
    name: str, unit: str, baseline: float | None, cfg: HealthConfig, figures: dict[str, float] | None, why: str
) -> Check:
    if baseline is None:
        return skipped(name, "no baseline for this instance type")
    floor = round(baseline * cfg.min_fraction, 1)
    threshold = f">= {floor} {unit} ({cfg.min_fraction:.0%} of {baseline:g})"
    if figures is None:
        return skipped(name, why, threshold=threshold)
    slow = {g: v for g, v in figures.items() if v < floor}
    if slow:
        text = "; ".join(f"{g} {v:g} < {floor:g} {unit}" for g, v in slow.items())
        return failed(name, "replace", figures, threshold, text)
    return passed(name, figures, threshold)


def check_hbm_copy(cfg: HealthConfig, fake: Any) -> Check:
    figures, why = _measure("hbm_copy_gbps", fake, hbm_copy_gbps)
    return _bench_check("hbm_copy", "GB/s", cfg.hbm_copy_gbps, cfg, figures, why)


def check_gemm(cfg: HealthConfig, fake: Any) -> Check:
    figures, why = _measure("gemm_tflops", fake, gemm_tflops)
    return _bench_check("gemm", "TFLOP/s", cfg.gemm_tflops, cfg, figures, why)


def _tool(name: str, extra_dirs: tuple[str, ...] = ()) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in extra_dirs:
        path = os.path.join(d, name)
        if os.access(path, os.X_OK):
            return path
    return None


def check_dcgm_diag(cfg: HealthConfig, timeout: float, level: int = 3) -> Check:
    """``dcgmi diag -r <level>``: level 2 takes about two minutes, level 3 about fifteen (DCGM docs)."""
    exe = _tool("dcgmi")
    threshold = f"dcgmi diag -r {level} passes"
    if exe is None:
        return skipped("dcgm_diag", "dcgmi not installed", threshold=threshold)
    try:
        proc = subprocess.run([exe, "diag", "-r", str(level)], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return skipped("dcgm_diag", f"did not finish in {timeout:.0f} s", threshold=threshold)
    fails = [" ".join(line.replace("|", " ").split()) for line in proc.stdout.splitlines() if re.search(r"\bFail", line)]
    if proc.returncode != 0 or fails:
        detail = fails[0] if fails else f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-120:]}"
        return failed("dcgm_diag", "replace", {"exit": proc.returncode, "failed": fails[:8]}, threshold, detail)
    return passed("dcgm_diag", {"exit": 0}, threshold)


_BUSBW_RE = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([0-9.]+)")


def check_nccl_pair(cfg: HealthConfig, timeout: float) -> Check:
    """nccl-tests' all_reduce_perf across this node's GPUs (NVLink/NVSwitch); its average bus bandwidth
    against ``nccl_busbw_gbps`` (report only when that is not set: thresholds are per fleet)."""
    exe = _tool("all_reduce_perf", NCCL_TEST_DIRS)
    floor = cfg.nccl_busbw_gbps
    threshold = f">= {floor:g} GB/s" if floor else "report only"
    if exe is None:
        return skipped("nccl_pair", "all_reduce_perf (nccl-tests) not installed", threshold=threshold)
    if cfg.gpu_count < 2:
        return skipped("nccl_pair", "fewer than 2 GPUs", threshold=threshold)
    argv = [exe, "-b", "1G", "-e", "1G", "-n", "20", "-g", str(cfg.gpu_count)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return skipped("nccl_pair", f"did not finish in {timeout:.0f} s", threshold=threshold)
    m = _BUSBW_RE.search(proc.stdout)
    if proc.returncode != 0 or m is None:
        return failed("nccl_pair", "replace", {"exit": proc.returncode}, threshold, "all_reduce_perf failed")
    busbw = float(m.group(1))
    if floor and busbw < floor:
        return failed("nccl_pair", "replace", busbw, threshold, f"bus bandwidth {busbw:g} < {floor:g} GB/s")
    return passed("nccl_pair", busbw, threshold)
