# pyright: strict
"""The checks on NVML readings, each with its value, threshold and action (docs/health.md has the
sources). Per-GPU checks give one entry for the node whose value lists every GPU (``gpu0``…), so the
verdict stays one line per check and the reason names the GPU that failed.

Actions: ``reboot`` where a GPU reset or a reboot is known to clear the state (a pending row remap is
applied at the next reset; volatile ECC counters and a mistrained PCIe link reset with it), ``replace``
where it is not (a row-remap failure is NVIDIA's RMA case, a hot or power-braked GPU is a cooling or
power fault of the host). The agent replaces a node whose reboot-class fault comes back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..contract.health import HealthConfig
from .nvml import GpuSnapshot, NodeSnapshot, Read
from .verdict import Check, failed, passed, skipped, worst

# Clock-event reason bits (nvmlClocksEventReason*). Idle, application clocks, the software power cap
# (normal under load: a real H100 shows 0x4 during a GEMM) and sync boost are not faults.
CLOCK_BITS = {
    0x1: "GpuIdle",
    0x2: "ApplicationsClocksSetting",
    0x4: "SwPowerCap",
    0x8: "HwSlowdown",
    0x10: "SyncBoost",
    0x20: "SwThermalSlowdown",
    0x40: "HwThermalSlowdown",
    0x80: "HwPowerBrakeSlowdown",
    0x100: "DisplayClockSetting",
}
CLOCK_FAULTS = 0x8 | 0x20 | 0x40 | 0x80

# (value, fault) per GPU: fault = (action, short text) or None; a value of Read means "skip, unreadable"
Outcome = tuple[Any, "tuple[str, str] | None"]


def _per_gpu(name: str, snap: NodeSnapshot, threshold: Any, judge: Callable[[GpuSnapshot], Outcome | Read]) -> Check:
    values: dict[str, Any] = {}
    faults: list[tuple[str, str]] = []
    unread: list[str] = []
    for g in snap.gpus:
        out = judge(g)
        key = f"gpu{g.index}"
        if isinstance(out, Read):
            values[key] = out.why()
            if out.error is not None:  # an error on a GPU that answers other calls: a fault in itself
                faults.append(("reboot", f"{key} {out.why()}"))
            else:
                unread.append(key)
            continue
        values[key] = out[0]
        if out[1] is not None:
            faults.append((out[1][0], f"{key} {out[1][1]}"))
    if not snap.gpus:
        return skipped(name, "no GPU readable", threshold=threshold)
    if faults:
        action = worst([a for a, _ in faults])
        ordered = sorted(faults, key=lambda f: f[0] != action)  # the worst first: it becomes the reason
        return failed(name, action, values, threshold, "; ".join(t for _, t in ordered))
    if len(unread) == len(snap.gpus):
        return skipped(name, f"{next(iter(values.values()))} on every GPU", values, threshold)
    return passed(name, values, threshold)


def check_driver(cfg: HealthConfig, snap: NodeSnapshot) -> Check:
    if snap.init_error:
        return failed("driver", "reboot", snap.init_error, "NVML starts", "driver not loaded")
    return passed("driver", snap.driver_version, "NVML starts")


def check_gpu_count(cfg: HealthConfig, snap: NodeSnapshot) -> Check:
    seen = len(snap.gpus)
    value: dict[str, Any] = {"count": seen}
    if snap.count_error:
        value["error"] = snap.count_error
    if seen < cfg.gpu_count:
        return failed("gpu_count", "reboot", value, cfg.gpu_count, f"{seen} of {cfg.gpu_count} GPUs")
    models = sorted({g.name.value for g in snap.gpus if g.name.ok})
    if cfg.gpu_model and models and not all(cfg.gpu_model.lower() in m.lower() for m in models):
        value["models"] = models
        return failed("gpu_count", "replace", value, f"{cfg.gpu_count} x {cfg.gpu_model}", f"found {', '.join(models)}")
    return passed("gpu_count", value, cfg.gpu_count)


def check_pcie_link(cfg: HealthConfig, snap: NodeSnapshot) -> Check:
    """Current link = the GPU's maximum, generation and width; the config's maximum where NVML's is lower too."""

    def judge(g: GpuSnapshot) -> Outcome | Read:
        for r in (g.pcie_gen, g.pcie_width):
            if not r.ok:
                return r
        gen, width = int(g.pcie_gen.value), int(g.pcie_width.value)
        want_gen = max(cfg.pcie_generation, int(g.pcie_max_gen.value) if g.pcie_max_gen.ok else 0)
        want_width = max(cfg.pcie_width, int(g.pcie_max_width.value) if g.pcie_max_width.ok else 0)
        now = f"gen{gen} x{width}"
        idle = g.clock_events.ok and bool(int(g.clock_events.value) & 0x1)
        if cfg.pcie_idle_downshift and idle and want_gen and gen < want_gen:
            now += " (idle)"  # a PCIe card saves power on the link while idle: the width still counts
            want_gen = 0
        if (want_gen and gen < want_gen) or (want_width and width < want_width):
            return now, ("reboot", f"{now} < gen{want_gen or gen} x{want_width}")
        return now, None

    threshold = f"gen{cfg.pcie_generation} x{cfg.pcie_width}" if cfg.pcie_generation else "the GPU's maximum"
    return _per_gpu("pcie_link", snap, threshold, judge)


def check_ecc(cfg: HealthConfig, snap: NodeSnapshot) -> Check:
    def judge(g: GpuSnapshot) -> Outcome | Read:
        if not g.ecc_mode.ok:
            return g.ecc_mode
        current, pending = (int(x) for x in g.ecc_mode.value)
        unc = g.ecc_uncorrected_volatile
        errors = int(unc.value) if unc.ok else None
        value = {"mode": "on" if current == 1 else "off", "uncorrected_volatile": errors}
        if current != 1:
            if pending == 1:
                return value, ("reboot", "ECC off (on after reboot)")
            return value, ("replace", "ECC off")
        if errors:
            return value, ("reboot", f"{errors} uncorrected ECC errors")
        return value, None

    return _per_gpu("ecc", snap, {"mode": "on", "uncorrected_volatile": 0}, judge)


def check_row_remap(cfg: HealthConfig, snap: NodeSnapshot) -> Check:
    def judge(g: GpuSnapshot) -> Outcome | Read:
        if not g.remapped_rows.ok:
            return g.remapped_rows
        corr, unc, pending, failure = (int(x) for x in g.remapped_rows.value)
        value = {"correctable": corr, "uncorrectable": unc, "pending": pending, "failure": failure}
        if failure:
            return value, ("replace", "row remap failure")
        if pending:
            return value, ("reboot", "row remap pending")
        return value, None

    return _per_gpu("row_remap", snap, {"pending": 0, "failure": 0}, judge)


def check_retired_pages(cfg: HealthConfig, snap: NodeSnapshot) -> Check:
    """Pre-Ampere GPUs retire pages; H100 and later remap rows and answer NotSupported (not a fault)."""

    def judge(g: GpuSnapshot) -> Outcome | Read:
        r = g.retired_pages_pending
        if not r.ok:
            return r
        return int(r.value), (("reboot", "retired pages pending") if int(r.value) else None)

    return _per_gpu("retired_pages", snap, {"pending": 0}, judge)


def clock_reasons(mask: int) -> list[str]:
    return [name for bit, name in CLOCK_BITS.items() if mask & bit]


def check_clock_events(cfg: HealthConfig, snap: NodeSnapshot) -> Check:
    def judge(g: GpuSnapshot) -> Outcome | Read:
        if not g.clock_events.ok:
            return g.clock_events
        mask = int(g.clock_events.value)
        bad = clock_reasons(mask & CLOCK_FAULTS)
        value = f"0x{mask:x} " + ("|".join(clock_reasons(mask)) or "none")
        return value, (("replace", "|".join(bad)) if bad else None)

    threshold = "none of " + "|".join(clock_reasons(CLOCK_FAULTS))
    return _per_gpu("clock_events", snap, threshold, judge)


def check_temperature(cfg: HealthConfig, snap: NodeSnapshot) -> Check:
    def judge(g: GpuSnapshot) -> Outcome | Read:
        if not g.temperature.ok:
            return g.temperature
        t = int(g.temperature.value)
        return t, (("replace", f"{t} C > {cfg.temperature_max_c} C") if t > cfg.temperature_max_c else None)

    return _per_gpu("temperature", snap, cfg.temperature_max_c, judge)


def check_nvlink(cfg: HealthConfig, snap: NodeSnapshot) -> Check:
    if cfg.nvlink_links == 0:
        return skipped("nvlink", "no NVLink expected on this instance type", threshold=0)

    def judge(g: GpuSnapshot) -> Outcome | Read:
        if not g.nvlink.ok:
            return g.nvlink
        active, present = g.nvlink.value
        if active < cfg.nvlink_links:
            return f"{active}/{present}", ("replace", f"{active} of {cfg.nvlink_links} NVLink links up")
        return f"{active}/{present}", None

    return _per_gpu("nvlink", snap, cfg.nvlink_links, judge)


NVML_CHECKS: dict[str, Callable[[HealthConfig, NodeSnapshot], Check]] = {
    "driver": check_driver,
    "gpu_count": check_gpu_count,
    "pcie_link": check_pcie_link,
    "ecc": check_ecc,
    "row_remap": check_row_remap,
    "retired_pages": check_retired_pages,
    "clock_events": check_clock_events,
    "temperature": check_temperature,
    "nvlink": check_nvlink,
}
