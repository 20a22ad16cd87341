# pyright: strict
"""A stand-in for the ``pynvml`` calls the health program makes, answering from a table of readings.

Selected by ``GPUCLUSTER_HEALTH_FAKE_NVML=/path/scenario.json`` (read only when set): the tests drive
every check with it, and an operator can replay a real card's readings — altered to show a throttled
or degraded GPU — without changing anything on the card. Scenario file::

    {"init_error": null,                  # or "DRIVER_NOT_LOADED", "LIBRARY_NOT_FOUND"
     "driver_version": "580.159.04",
     "gpu_count": 8,                      # what nvmlDeviceGetCount answers
     "gpu": {<reading>: <value>, ...},    # every GPU's readings
     "per_gpu": {"3": {<reading>: <value>}},  # overrides for one GPU
     "bench": {"hbm_copy_gbps": 3020, "gemm_tflops": 760}}  # what the deep checks "measure" (optional)

Readings: name, pci_bus_id, pcie_gen, pcie_width, pcie_max_gen, pcie_max_width, ecc_mode [current,
pending], ecc_uncorrected_volatile, remapped_rows [corr, unc, pending, failure], retired_pages_pending,
clock_events (bitmask), temperature, nvlink (a list of link states, 1 = up); and for the metrics exporter
(gpucluster_agents.metrics): uuid (default GPU-…<index>), power_mw, energy_mj, clock_sm, clock_mem (MHz),
utilization [gpu %, memory %], encoder_util, decoder_util (%), memory [total, free, used, reserved] bytes,
ecc {"<type>,<counter>": n} (type 0 corrected / 1 uncorrected, counter 0 volatile / 1 aggregate; the
uncorrected volatile count is ecc_uncorrected_volatile), violation_power_ns, violation_thermal_ns,
pcie_replay, nvlink_errors {"<link>": [replay, recovery, crc_flit, crc_data]}. A GPU's ``grow``
{<reading>: step} makes a number reading rise by ``step`` at every read (a counter that moves between
two scrapes, for rules on its increase). Any value may be
``"NotSupported"`` or ``{"error": "<NVML error name>"}`` (e.g. GPU_IS_LOST) to make that call raise.
"""

from __future__ import annotations

import json
from typing import Any, cast

# The NVML constants the program uses, with the values nvidia-ml-py gives them.
_ERRORS = {
    "INVALID_ARGUMENT": 2,
    "NOT_SUPPORTED": 3,
    "NO_PERMISSION": 4,
    "DRIVER_NOT_LOADED": 9,
    "TIMEOUT": 10,
    "LIBRARY_NOT_FOUND": 12,
    "GPU_IS_LOST": 15,
    "RESET_REQUIRED": 16,
    "UNKNOWN": 999,
}
_NAMES = {v: k for k, v in _ERRORS.items()}

# Readings of a healthy H100 SXM as NVML reports them (FACTS.md: PCIe gen5 x16 = max, ECC on, no
# errors, rows not remapped, retired pages NotSupported, idle clock event reason, 37 C); 18 NVLink links.
H100_HEALTHY: dict[str, Any] = {
    "name": "NVIDIA H100 80GB HBM3",
    "pci_bus_id": "00000000:53:00.0",
    "pcie_gen": 5,
    "pcie_width": 16,
    "pcie_max_gen": 5,
    "pcie_max_width": 16,
    "ecc_mode": [1, 1],
    "ecc_uncorrected_volatile": 0,
    "remapped_rows": [0, 0, 0, 0],
    "retired_pages_pending": "NotSupported",
    "clock_events": 1,
    "temperature": 37,
    "nvlink": [1] * 18,
    # an idle H100 SXM as NVML reads it (the metrics exporter's readings)
    "power_mw": 71_532,
    "energy_mj": 4_620_000_000,
    "clock_sm": 345,
    "clock_mem": 2619,
    "utilization": [0, 0],
    "encoder_util": 0,
    "decoder_util": 0,
    "memory": [85_520_809_984, 84_950_843_392, 4_718_592, 565_248_000],
    "ecc": {"0,0": 0, "0,1": 0, "1,1": 0},
    "violation_power_ns": 0,
    "violation_thermal_ns": 0,
    "pcie_replay": 0,
    "nvlink_errors": {},
}


class NVMLError(Exception):
    """Carries ``value`` like nvidia-ml-py's NVMLError, which is what the program looks at."""

    def __init__(self, value: int) -> None:
        super().__init__(_NAMES.get(value, str(value)))
        self.value = value


class _Pci:
    def __init__(self, bus_id: str) -> None:
        self.busId = bus_id


class _Reading:
    """A struct NVML returns (utilisation, memory, violation time): the fields the program reads."""

    def __init__(self, **values: int) -> None:
        self.__dict__.update(values)


class FakeNvml:
    NVMLError = NVMLError
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_INVALID_ARGUMENT = 2
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_TEMPERATURE_GPU = 0
    NVML_FEATURE_ENABLED = 1
    NVML_NVLINK_MAX_LINKS = 36
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_PERF_POLICY_POWER = 0
    NVML_PERF_POLICY_THERMAL = 1
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
    NVML_AGGREGATE_ECC = 1
    nvmlMemory_v2 = 0x02000028

    def __init__(self, scenario: dict[str, Any]) -> None:
        self.scenario = scenario
        self.initialised = False
        self.reads: dict[tuple[int, str], int] = {}

    @classmethod
    def from_file(cls, path: str) -> FakeNvml:
        with open(path, encoding="utf-8") as fh:
            return cls(json.load(fh))

    # -- helpers
    def _raise_for(self, value: Any) -> Any:
        if value == "NotSupported":
            raise NVMLError(_ERRORS["NOT_SUPPORTED"])
        if isinstance(value, dict) and "error" in value:
            raise NVMLError(_ERRORS.get(str(cast("dict[str, Any]", value)["error"]), 999))
        return cast("Any", value)

    def _reading(self, handle: int, key: str) -> Any:
        if not self.initialised:
            raise NVMLError(1)  # Uninitialized
        per = cast("dict[str, Any]", self.scenario.get("per_gpu", {})).get(str(handle), {})
        base = cast("dict[str, Any]", self.scenario.get("gpu", H100_HEALTHY))
        value = per[key] if key in per else base.get(key, H100_HEALTHY.get(key, "NotSupported"))
        step = cast("dict[str, Any]", per.get("grow", {})).get(key)
        if step is not None and isinstance(value, (int, float)):  # a counter that rises by ``step`` per read
            reads = self.reads.get((handle, key), 0)
            self.reads[(handle, key)] = reads + 1
            value = value + step * reads
        return self._raise_for(value)

    @property
    def bench(self) -> dict[str, Any]:
        return cast("dict[str, Any]", self.scenario.get("bench", {}))

    # -- the pynvml functions
    def nvmlInit(self) -> None:
        err = self.scenario.get("init_error")
        if err:
            raise NVMLError(_ERRORS.get(str(err), 999))
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.initialised = False

    def nvmlSystemGetDriverVersion(self) -> str:
        return str(self.scenario.get("driver_version", "580.159.04"))

    def nvmlDeviceGetCount(self) -> int:
        return int(self._raise_for(self.scenario.get("gpu_count", 8)))

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if index >= self.nvmlDeviceGetCount():
            raise NVMLError(_ERRORS["INVALID_ARGUMENT"])
        per = cast("dict[str, Any]", self.scenario.get("per_gpu", {})).get(str(index), {})
        if "handle" in per:
            self._raise_for(per["handle"])
        return index

    def nvmlDeviceGetName(self, h: int) -> str:
        return str(self._reading(h, "name"))

    def nvmlDeviceGetPciInfo(self, h: int) -> _Pci:
        return _Pci(str(self._reading(h, "pci_bus_id")))

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int:
        return int(self._reading(h, "pcie_gen"))

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int:
        return int(self._reading(h, "pcie_width"))

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:
        return int(self._reading(h, "pcie_max_gen"))

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:
        return int(self._reading(h, "pcie_max_width"))

    def nvmlDeviceGetEccMode(self, h: int) -> list[int]:
        return list(self._reading(h, "ecc_mode"))

    def nvmlDeviceGetTotalEccErrors(self, h: int, error_type: int, counter_type: int) -> int:
        if (error_type, counter_type) == (1, 0):
            return int(self._reading(h, "ecc_uncorrected_volatile"))
        table = cast("dict[str, Any]", self._reading(h, "ecc"))
        return int(self._raise_for(table.get(f"{error_type},{counter_type}", "NotSupported")))

    def nvmlDeviceGetRemappedRows(self, h: int) -> tuple[int, int, int, int]:
        corr, unc, pending, failure = self._reading(h, "remapped_rows")
        return (int(corr), int(unc), int(pending), int(failure))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: int) -> int:
        return int(self._reading(h, "retired_pages_pending"))

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return int(self._reading(h, "clock_events"))

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return int(self._reading(h, "temperature"))

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        links = self._reading(h, "nvlink")
        states = cast("list[Any]", links)
        if link >= len(states):
            raise NVMLError(_ERRORS["INVALID_ARGUMENT"])
        return int(self._raise_for(states[link]))

    # -- what the metrics exporter reads as well
    def nvmlDeviceGetUUID(self, h: int) -> str:
        per = cast("dict[str, Any]", self.scenario.get("per_gpu", {})).get(str(h), {})
        base = cast("dict[str, Any]", self.scenario.get("gpu", {}))
        value = per.get("uuid", base.get("uuid", f"GPU-00000000-0000-4000-8000-{h:012x}"))
        return str(self._raise_for(value))

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return int(self._reading(h, "power_mw"))

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        return int(self._reading(h, "energy_mj"))

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        return int(self._reading(h, "clock_sm" if clock == self.NVML_CLOCK_SM else "clock_mem"))

    def nvmlDeviceGetUtilizationRates(self, h: int) -> _Reading:
        gpu, memory = self._reading(h, "utilization")
        return _Reading(gpu=int(gpu), memory=int(memory))

    def nvmlDeviceGetEncoderUtilization(self, h: int) -> list[int]:
        return [int(self._reading(h, "encoder_util")), 167_000]

    def nvmlDeviceGetDecoderUtilization(self, h: int) -> list[int]:
        return [int(self._reading(h, "decoder_util")), 167_000]

    def nvmlDeviceGetMemoryInfo(self, h: int, version: int | None = None) -> _Reading:
        total, free, used, reserved = self._reading(h, "memory")
        if version is None:
            return _Reading(total=int(total), free=int(free), used=int(used))
        return _Reading(version=version, total=int(total), free=int(free), used=int(used), reserved=int(reserved))

    def nvmlDeviceGetViolationStatus(self, h: int, policy: int) -> _Reading:
        key = "violation_power_ns" if policy == self.NVML_PERF_POLICY_POWER else "violation_thermal_ns"
        return _Reading(referenceTime=1_700_000_000_000_000, violationTime=int(self._reading(h, key)))

    def nvmlDeviceGetPcieReplayCounter(self, h: int) -> int:
        return int(self._reading(h, "pcie_replay"))

    def nvmlDeviceGetNvLinkErrorCounter(self, h: int, link: int, counter: int) -> int:
        states = cast("list[Any]", self._reading(h, "nvlink"))
        if link >= len(states):
            raise NVMLError(_ERRORS["INVALID_ARGUMENT"])
        errors = cast("dict[str, Any]", self._reading(h, "nvlink_errors"))
        return int(self._raise_for(errors.get(str(link), [0, 0, 0, 0])[counter]))
