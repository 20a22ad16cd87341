# pyright: strict
"""GPU metrics from NVML, under the DCGM exporter's names and labels (docs/monitoring.md "Metrics").

One set of alert rules and dashboards then serves EKS (NVIDIA's dcgm-exporter, from the GPU Operator) and
Slurm nodes (this exporter). Names, types and units are dcgm-exporter's (NVIDIA/dcgm-exporter@d5e5f51
etc/default-counters.csv); labels are the ones its released versions write on every GPU metric: ``gpu``
(NVML index), ``UUID``, ``pci_bus_id`` (NVML's form, ``00000000:53:00.0``), ``device`` (``nvidia<index>``),
``modelName``, ``Hostname`` and ``DCGM_FI_DRIVER_VERSION`` (a label field of the default list). Upstream's
main branch renames ``Hostname`` to ``hostname`` at d5e5f51 (NVIDIA/dcgm-exporter#655), after the releases the GPU Operator
ships: rules should group by ``instance`` or ``UUID``, never by the host name label.

What NVML cannot give is not written, never filled with a made-up value: the ``DCGM_FI_PROF_*`` activities
(SM/tensor/DRAM/graphics-engine activity, PCIe and NVLink bytes come from DCGM's profiling module, which
NVML does not have), ``DCGM_FI_DEV_MEMORY_TEMP``, ``DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL`` and
``DCGM_FI_DEV_VGPU_LICENSE_STATUS``. A reading NVML answers NotSupported (or with an error) is left out for
that GPU; errors are counted in ``gpucluster_gpu_read_errors``.

The XID figures come from the kernel's own records, by the rule the health checks use
(:mod:`gpucluster_agents.health.xid`): text a user can write into the log never becomes an XID.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..contract.health import HealthConfig
from ..contract.metrics import (
    GPU_COUNT,
    GPU_FIELDS,
    NVLINK_ERRORS,
    NVML_UP,
    READ_ERRORS,
    RESERVED,
    XID_LAST,
    XID_READABLE,
    XID_TOTAL,
)
from ..health import xid
from ..health.nvml import Read, Reader
from .exposition import Registry

# NVML enums (nvml.h): nvmlClockType_t, nvmlPerfPolicyType_t (nvmlNvLinkErrorCounter_t: NVLINK_ERRORS)
CLOCK_SM, CLOCK_MEM = 1, 2
POLICY_POWER, POLICY_THERMAL = 0, 1
MIB = 1 << 20


def _first(r: Read) -> Any:
    return r.value[0]


def _attr(name: str, scale: float = 1.0) -> Callable[[Read], float]:
    return lambda r: getattr(r.value, name) / scale


def _item(i: int) -> Callable[[Read], float]:
    return lambda r: float(r.value[i])


def _plain(scale: float = 1.0) -> Callable[[Read], float]:
    return lambda r: float(r.value) / scale


# How each field's value is taken from its reading (GpuReader.read_all names them).
_TAKE: dict[str, Callable[[Read], float]] = {
    "DCGM_FI_DEV_SM_CLOCK": _plain(),
    "DCGM_FI_DEV_MEM_CLOCK": _plain(),
    "DCGM_FI_DEV_GPU_TEMP": _plain(),
    "DCGM_FI_DEV_POWER_USAGE": _plain(1000.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": _plain(),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": _plain(),
    "DCGM_FI_DEV_GPU_UTIL": _attr("gpu"),
    "DCGM_FI_DEV_MEM_COPY_UTIL": _attr("memory"),
    "DCGM_FI_DEV_ENC_UTIL": _first,
    "DCGM_FI_DEV_DEC_UTIL": _first,
    "DCGM_FI_DEV_FB_FREE": _attr("free", MIB),
    "DCGM_FI_DEV_FB_USED": _attr("used", MIB),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": _plain(),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": _plain(),
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": _plain(),
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": _plain(),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": _item(0),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": _item(1),
    "DCGM_FI_DEV_ROW_REMAP_PENDING": _item(2),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": _item(3),
    "DCGM_FI_DEV_POWER_VIOLATION": _attr("violationTime"),
    "DCGM_FI_DEV_THERMAL_VIOLATION": _attr("violationTime"),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": _plain(),
}
# (metric, type, help, reading, how the value is taken from it)
FIELDS: tuple[tuple[str, str, str, str, Callable[[Read], float]], ...] = tuple((*f, _TAKE[f[0]]) for f in GPU_FIELDS)

# Every metric name this module may write (docs/monitoring.md lists them; the tests compare).
NAMES = (
    *(f[0] for f in FIELDS),
    *(n for n, _, _ in NVLINK_ERRORS),
    *(RESERVED[0], XID_LAST[0], XID_TOTAL[0], READ_ERRORS[0], NVML_UP[0], GPU_COUNT[0], XID_READABLE[0]),
)


@dataclass
class XidView:
    """XIDs per GPU (PCI key ``0000:53:00``) in the kernel's order; ``readable`` False: no log could be read."""

    readable: bool
    by_gpu: dict[str, list[int]] = field(default_factory=lambda: {})

    sysfs_gpus: frozenset[str] = frozenset()  # NVIDIA GPUs in the kernel's PCI list (one NVML lost is still there)

    @classmethod
    def read(cls, kernel_log_file: str | None, sysfs_root: str = "/sys") -> XidView:
        cfg = HealthConfig(instance_type="", gpu_count=0, kernel_log_file=kernel_log_file, sysfs_root=sysfs_root)
        recs, _ = xid.kernel_log(cfg, timeout=5.0)
        if recs is None:
            return cls(readable=False)
        events, _ = xid.parse(recs)
        view = cls(readable=True, sysfs_gpus=frozenset(xid.sysfs_gpus(sysfs_root)))
        for e in events:
            view.by_gpu.setdefault(e.pci, []).append(e.xid)
        return view


class GpuReader:
    """Reads every GPU through NVML. NVML is started once and kept (a start can take a second on a node
    without persistence mode); when it cannot start, the scrape says so and the next one tries again."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.reader = Reader(nvml)
        self.started = False

    def start(self) -> bool:
        if not self.started:
            self.started = self.reader.read("nvmlInit").ok
        return self.started

    def read_all(self, handle: Any) -> dict[str, Read]:
        r, n = self.reader.read, self.nvml
        clocks = "nvmlDeviceGetCurrentClocksEventReasons"
        if getattr(n, clocks, None) is None:
            clocks = "nvmlDeviceGetCurrentClocksThrottleReasons"
        ecc = "nvmlDeviceGetTotalEccErrors"
        return {
            "uuid": r("nvmlDeviceGetUUID", handle),
            "name": r("nvmlDeviceGetName", handle),
            "pci": r("nvmlDeviceGetPciInfo", handle),
            "clock_sm": r("nvmlDeviceGetClockInfo", handle, CLOCK_SM),
            "clock_mem": r("nvmlDeviceGetClockInfo", handle, CLOCK_MEM),
            "temperature": r("nvmlDeviceGetTemperature", handle, n.NVML_TEMPERATURE_GPU),
            "power": r("nvmlDeviceGetPowerUsage", handle),
            "energy": r("nvmlDeviceGetTotalEnergyConsumption", handle),
            "pcie_replay": r("nvmlDeviceGetPcieReplayCounter", handle),
            "utilization": r("nvmlDeviceGetUtilizationRates", handle),
            "encoder": r("nvmlDeviceGetEncoderUtilization", handle),
            "decoder": r("nvmlDeviceGetDecoderUtilization", handle),
            "memory": self.memory(handle),
            "ecc_sbe_vol": r(ecc, handle, 0, 0),
            "ecc_dbe_vol": r(ecc, handle, 1, 0),
            "ecc_sbe_agg": r(ecc, handle, 0, 1),
            "ecc_dbe_agg": r(ecc, handle, 1, 1),
            "rows": r("nvmlDeviceGetRemappedRows", handle),
            "viol_power": r("nvmlDeviceGetViolationStatus", handle, POLICY_POWER),
            "viol_thermal": r("nvmlDeviceGetViolationStatus", handle, POLICY_THERMAL),
            "clock_events": r(clocks, handle),
        }

    def memory(self, handle: Any) -> Read:
        """Frame buffer figures: the v2 call (with ``reserved``) where the driver has it, else v1."""
        v2 = getattr(self.nvml, "nvmlMemory_v2", None)
        got = self.reader.read("nvmlDeviceGetMemoryInfo", handle, v2) if v2 is not None else None
        return got if got is not None and got.ok else self.reader.read("nvmlDeviceGetMemoryInfo", handle)

    def nvlink_errors(self, handle: Any) -> tuple[dict[int, float], int]:
        """Sums over the links NVML knows of each error counter; (sums, error count)."""
        sums: dict[int, float] = {}
        errors = 0
        for link in range(int(getattr(self.nvml, "NVML_NVLINK_MAX_LINKS", 18))):
            if not self.reader.read("nvmlDeviceGetNvLinkState", handle, link).ok:
                break  # past the last link, or no NVLink at all
            for _, counter, _ in NVLINK_ERRORS:
                got = self.reader.read("nvmlDeviceGetNvLinkErrorCounter", handle, link, counter)
                if got.ok:
                    sums[counter] = sums.get(counter, 0.0) + float(got.value)
                elif got.error is not None:
                    errors += 1
        return sums, errors


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _labels(index: int, got: dict[str, Read], hostname: str, driver: str) -> dict[str, str]:
    pci = _text(getattr(got["pci"].value, "busId", "")) if got["pci"].ok else ""
    return {
        "gpu": str(index),
        "UUID": _text(got["uuid"].value) if got["uuid"].ok else "",
        "pci_bus_id": pci,
        "device": f"nvidia{index}",
        "modelName": _text(got["name"].value) if got["name"].ok else "",
        "Hostname": hostname,
        "DCGM_FI_DRIVER_VERSION": driver,
    }


def _one_gpu(reg: Registry, gpus: GpuReader, index: int, hostname: str, driver: str, xids: XidView) -> set[str]:
    """One GPU's metrics; returns its PCI key (empty when NVML could not open it)."""
    h = gpus.reader.read("nvmlDeviceGetHandleByIndex", index)
    if not h.ok:
        reg.add(*READ_ERRORS, 1, {"gpu": str(index), "Hostname": hostname})
        return set()
    got = gpus.read_all(h.value)
    labels = _labels(index, got, hostname, driver)
    for name, kind, help_text, key, take in FIELDS:
        if got[key].ok:
            reg.add(name, kind, help_text, take(got[key]), labels)
    reserved = getattr(got["memory"].value, "reserved", None) if got["memory"].ok else None
    if reserved is not None:
        reg.add(*RESERVED, float(reserved) / MIB, labels)
    sums, link_errors = gpus.nvlink_errors(h.value)
    for name, counter, help_text in NVLINK_ERRORS:
        if counter in sums:
            reg.add(name, "counter", help_text, sums[counter], labels)
    key = xid.pci_key(labels["pci_bus_id"]) or ""
    if xids.readable:
        events = xids.by_gpu.get(key, [])
        reg.add(*XID_LAST, events[-1] if events else 0, labels)
        for number in sorted(set(events)):
            cls = xid.XidEvent(labels["pci_bus_id"], number, "").cls  # not in the table: "ignore", as the checks judge
            reg.add(*XID_TOTAL, events.count(number), {**labels, "xid": str(number), "class": cls})
    errors = link_errors + sum(1 for r in got.values() if r.error is not None)
    reg.add(*READ_ERRORS, errors, {"gpu": str(index), "Hostname": hostname})
    return {key} if key else set()


def collect(reg: Registry, gpus: GpuReader, hostname: str, xids: XidView) -> None:
    """Every GPU's metrics into ``reg``; never raises for an NVML error."""
    reg.add(*XID_READABLE, 1 if xids.readable else 0)
    if not gpus.start():
        reg.add(*NVML_UP, 0)
        return
    count = gpus.reader.read("nvmlDeviceGetCount")
    if not count.ok:
        gpus.started = False  # the driver went away: start again next time
        reg.add(*NVML_UP, 0)
        return
    reg.add(*NVML_UP, 1)
    reg.add(*GPU_COUNT, int(count.value))
    version = gpus.reader.read("nvmlSystemGetDriverVersion")
    driver = _text(version.value) if version.ok else ""
    seen: set[str] = set()
    for index in range(int(count.value)):
        seen |= _one_gpu(reg, gpus, index, hostname, driver, xids)
    _lost_gpus(reg, xids, seen, hostname)


def _lost_gpus(reg: Registry, xids: XidView, seen: set[str], hostname: str) -> None:
    """XIDs of this node's GPUs NVML could not read (fallen off the bus: XID 79): labelled by PCI address
    only. A GPU counts as this node's when the kernel's PCI list has it (xid.sysfs_gpus), as in the checks."""
    for pci in sorted(set(xids.by_gpu) & xids.sysfs_gpus - seen):
        events = xids.by_gpu[pci]
        labels = {"pci_bus_id": pci, "Hostname": hostname}
        reg.add(*XID_LAST, events[-1], labels)
        for number in sorted(set(events)):
            cls = xid.XidEvent(pci, number, "").cls
            reg.add(*XID_TOTAL, events.count(number), {**labels, "xid": str(number), "class": cls})
