# pyright: strict
"""Every NVML reading the checks use, taken once per run into a :class:`NodeSnapshot`.

The NVML binding is NVIDIA's ``nvidia-ml-py`` (import name ``pynvml``), imported only when a run needs
it, so the package still imports on CPU nodes and head nodes. Every call may fail: ``NotSupported``
(retired pages on H100, NVLink on a PCIe card) becomes a reading the check skips with that reason;
any other NVML error is kept as an error text the check reports. If NVML cannot start at all
(no library, driver not loaded) the snapshot says so and the ``driver`` check fails the node.

The command line's ``--fake-nvml /path/scenario.json`` swaps the binding for :mod:`.fake_nvml`, a table
of readings: the tests use it, and so can an operator replaying a real card's readings (altered to
show how the program judges a degraded GPU) without touching the card. It is an argument, never an
environment variable: the root wrappers that run the program never pass it, and nothing a job or a
caller's environment holds can swap the GPUs the program judges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NOT_SUPPORTED = 3  # NVML_ERROR_NOT_SUPPORTED
INVALID_ARGUMENT = 2  # NVML_ERROR_INVALID_ARGUMENT: past the last NVLink link


class NvmlUnavailable(RuntimeError):
    """The binding itself is missing (nvidia-ml-py not installed): the program cannot run (exit 2)."""


@dataclass(frozen=True)
class Read:
    """One reading: a value, or NotSupported, or an error text."""

    value: Any = None
    unsupported: bool = False
    error: str | None = None

    @property
    def ok(self) -> bool:
        return not self.unsupported and self.error is None

    def why(self) -> str:
        return "NotSupported" if self.unsupported else (self.error or "")


@dataclass(frozen=True)
class GpuSnapshot:
    index: int
    name: Read
    bus_id: Read
    pcie_gen: Read
    pcie_width: Read
    pcie_max_gen: Read
    pcie_max_width: Read
    ecc_mode: Read  # (current, pending), 1 = enabled
    ecc_uncorrected_volatile: Read
    remapped_rows: Read  # (correctable, uncorrectable, pending, failure)
    retired_pages_pending: Read
    clock_events: Read  # bitmask
    temperature: Read  # degrees C
    nvlink: Read  # (links active, links present)


@dataclass(frozen=True)
class NodeSnapshot:
    init_error: str | None = None  # "driver not loaded" and friends: no GPU could be read
    driver_version: str | None = None
    gpus: tuple[GpuSnapshot, ...] = field(default_factory=tuple)
    count_error: str | None = None


def load_binding(fake: str | None = None) -> Any:
    """The fake when ``fake`` names a scenario file (``--fake-nvml``), else nvidia-ml-py."""
    if fake:
        from .fake_nvml import FakeNvml

        return FakeNvml.from_file(fake)
    try:
        import pynvml  # type: ignore[import-not-found]  # nvidia-ml-py, on GPU images only
    except ImportError as exc:
        raise NvmlUnavailable(f"the NVML binding is not installed (pip install nvidia-ml-py): {exc}") from None
    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class _Reader:
    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml

    def error_code(self, exc: BaseException) -> int | None:
        if isinstance(exc, self.nvml.NVMLError):
            return int(getattr(exc, "value", -1))
        return None

    def read(self, fn: str, *args: Any) -> Read:
        func = getattr(self.nvml, fn, None)
        if func is None:
            return Read(unsupported=True, error=None)  # an older binding without the call
        try:
            return Read(value=func(*args))
        except Exception as exc:  # NVMLError and anything the binding raises on a sick GPU
            code = self.error_code(exc)
            if code == NOT_SUPPORTED:
                return Read(unsupported=True)
            return Read(error=f"{fn}: {exc or type(exc).__name__}")

    def nvlink(self, handle: Any) -> Read:
        """(active, present) over the links NVML knows; NotSupported when link 0 is."""
        active = present = 0
        for link in range(int(getattr(self.nvml, "NVML_NVLINK_MAX_LINKS", 18))):
            state = self.read("nvmlDeviceGetNvLinkState", handle, link)
            if state.unsupported and link == 0:
                return state
            if state.error is not None and link == 0:
                return state
            if not state.ok:
                break  # past the last link (InvalidArgument / NotSupported)
            present += 1
            active += 1 if state.value == 1 else 0
        return Read(value=(active, present))

    def gpu(self, index: int) -> GpuSnapshot | Read:
        h = self.read("nvmlDeviceGetHandleByIndex", index)
        if not h.ok:
            return h
        handle = h.value
        pci = self.read("nvmlDeviceGetPciInfo", handle)
        bus = Read(value=_text(getattr(pci.value, "busId", ""))) if pci.ok else pci
        clocks = "nvmlDeviceGetCurrentClocksEventReasons"
        if getattr(self.nvml, clocks, None) is None:  # bindings before the rename
            clocks = "nvmlDeviceGetCurrentClocksThrottleReasons"
        name = self.read("nvmlDeviceGetName", handle)
        ecc_mode = self.read("nvmlDeviceGetEccMode", handle)
        return GpuSnapshot(
            index=index,
            name=Read(value=_text(name.value)) if name.ok else name,
            bus_id=bus,
            pcie_gen=self.read("nvmlDeviceGetCurrPcieLinkGeneration", handle),
            pcie_width=self.read("nvmlDeviceGetCurrPcieLinkWidth", handle),
            pcie_max_gen=self.read("nvmlDeviceGetMaxPcieLinkGeneration", handle),
            pcie_max_width=self.read("nvmlDeviceGetMaxPcieLinkWidth", handle),
            ecc_mode=Read(value=tuple(ecc_mode.value)) if ecc_mode.ok else ecc_mode,
            ecc_uncorrected_volatile=self.read(
                "nvmlDeviceGetTotalEccErrors",
                handle,
                self.nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                self.nvml.NVML_VOLATILE_ECC,
            ),
            remapped_rows=self.read("nvmlDeviceGetRemappedRows", handle),
            retired_pages_pending=self.read("nvmlDeviceGetRetiredPagesPendingStatus", handle),
            clock_events=self.read(clocks, handle),
            temperature=self.read("nvmlDeviceGetTemperature", handle, self.nvml.NVML_TEMPERATURE_GPU),
            nvlink=self.nvlink(handle),
        )


Reader = _Reader  # the metrics exporter (gpucluster_agents.metrics.gpu) reads more, by the same rules


def snapshot(nvml: Any) -> NodeSnapshot:
    """Read every GPU once. Never raises for NVML errors: they become readings."""
    r = _Reader(nvml)
    init = r.read("nvmlInit")
    if not init.ok:
        return NodeSnapshot(init_error=f"NVML did not start ({init.why()}): driver not loaded?")
    try:
        version = r.read("nvmlSystemGetDriverVersion")
        count = r.read("nvmlDeviceGetCount")
        if not count.ok:
            return NodeSnapshot(driver_version=_text(version.value) if version.ok else None, count_error=count.why())
        gpus: list[GpuSnapshot] = []
        errors: list[str] = []
        for i in range(int(count.value)):
            g = r.gpu(i)
            if isinstance(g, GpuSnapshot):
                gpus.append(g)
            else:
                errors.append(f"gpu{i}: {g.why()}")
        return NodeSnapshot(
            driver_version=_text(version.value) if version.ok else None,
            gpus=tuple(gpus),
            count_error="; ".join(errors) or None,
        )
    finally:
        r.read("nvmlShutdown")
