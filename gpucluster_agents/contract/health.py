# pyright: strict
"""The health program's config: thresholds from the instance facts, which checks each mode runs, and
where to read and write. Defined here, in the node package, so the control plane (which writes it with
:func:`to_json`) and the node (which reads it with :func:`parse`) share one schema, as the agent's
``contract/__init__.py`` does. Parsing is strict: an unknown key or a wrong type is an error naming its key
path, never a silent default on a node that then passes a check it should have failed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields, replace
from typing import Any, cast

from .jsonread import Reader

SCHEMA_VERSION = 1
MODES = ("boot", "prolog", "sweep", "deep")
DEFAULT_PATH = "/etc/gpucluster/health.json"

# Every check the program knows, in the order it runs them (cheap first, so a budget cuts the slow ones).
CHECKS = (
    "driver",
    "gpu_count",
    "pcie_link",
    "ecc",
    "row_remap",
    "retired_pages",
    "clock_events",
    "temperature",
    "nvlink",
    "xid",
    "efa",
    "shared_fs",
    "hbm_copy",
    "gemm",
    "dcgm_diag",
    "nccl_pair",
)
_NVML = ("driver", "gpu_count", "pcie_link", "ecc", "row_remap", "retired_pages", "clock_events", "temperature", "nvlink")
# Slurm kills HealthCheckProgram at 60 s and the prolog delays every job: budgets stay well under.
DEFAULT_MODES: dict[str, tuple[tuple[str, ...], int]] = {
    "prolog": (("driver", "gpu_count", "ecc", "row_remap", "clock_events", "xid"), 10),
    "sweep": ((*_NVML, "xid", "efa", "shared_fs"), 45),
    "boot": ((*_NVML, "xid", "efa", "shared_fs", "hbm_copy", "gemm"), 120),
    "deep": (CHECKS, 3600),
}


class HealthConfigError(ValueError):
    """The config is missing, unreadable or invalid; ``errors`` lists every problem."""

    def __init__(self, errors: list[str], path: str | None = None) -> None:
        self.errors = list(errors)
        where = f"{path}: " if path else ""
        super().__init__(where + "; ".join(self.errors))


@dataclass(frozen=True)
class ModeConfig:
    checks: tuple[str, ...]
    budget_seconds: int


def _default_modes() -> tuple[tuple[str, ModeConfig], ...]:
    return tuple((m, ModeConfig(*DEFAULT_MODES[m])) for m in MODES)


@dataclass(frozen=True)
class HealthConfig:
    """One node's thresholds. Counts of 0 switch a check off (a CPU node has no GPUs to count)."""

    instance_type: str
    gpu_count: int
    gpu_model: str = ""  # the catalog's name (H100); a GPU whose NVML name lacks it is reported
    pcie_generation: int = 0  # the GPU's own maximum link generation (0: compare with NVML's max only)
    pcie_width: int = 0  # lanes
    pcie_idle_downshift: bool = False  # PCIe cards drop the link generation while idle: judge gen only under load
    nvlink_links: int = 0  # active NVLink links expected per GPU (0: not checked)
    efa_count: int = 0  # EFA devices the launch template attaches
    temperature_max_c: int = 85  # GPU core temperature above which the node is faulty
    hbm_copy_gbps: float | None = None  # device-to-device copy baseline, read + write, GB/s
    gemm_tflops: float | None = None  # dense BF16 GEMM baseline, TFLOP/s
    min_fraction: float = 0.9  # a benchmark passes at >= this share of its baseline
    nccl_busbw_gbps: float | None = None  # intra-node all_reduce_perf bus bandwidth floor (None: report only)
    shared_fs_mount: str | None = None  # e.g. /fsx
    shared_fs_type: str = "lustre"
    node_name: str | None = None  # the Slurm node name, when it is not the host name
    log_file: str = "/var/log/gpucluster/health.jsonl"
    slurm_bin_dir: str = "/usr/bin"
    sysfs_root: str = "/sys"
    mounts_file: str = "/proc/mounts"
    kernel_log_file: str | None = None  # None: /dev/kmsg, then journalctl -k -o json; a file: kmsg or journal JSON records
    modes: tuple[tuple[str, ModeConfig], ...] = field(default_factory=_default_modes)

    def mode(self, name: str) -> ModeConfig:
        return dict(self.modes)[name]

    @property
    def scontrol(self) -> str:
        return os.path.join(self.slurm_bin_dir, "scontrol")

    def with_modes(self, **changes: ModeConfig) -> HealthConfig:
        return replace(self, modes=tuple((m, changes.get(m, c)) for m, c in self.modes))


def to_dict(cfg: HealthConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    for f in fields(cfg):
        if f.name != "modes":
            out[f.name] = getattr(cfg, f.name)
    out["modes"] = {m: {"checks": list(c.checks), "budget_seconds": c.budget_seconds} for m, c in cfg.modes}
    return out


def to_json(cfg: HealthConfig) -> str:
    """``/etc/gpucluster/health.json``: sorted keys, the same config always the same bytes."""
    return json.dumps(to_dict(cfg), indent=2, sort_keys=True) + "\n"


_INTS = {"gpu_count": (0, 64), "pcie_generation": (0, 8), "pcie_width": (0, 32), "nvlink_links": (0, 36)}
_INTS.update({"efa_count": (0, 64), "temperature_max_c": (30, 120)})
_FLOATS = ("hbm_copy_gbps", "gemm_tflops", "nccl_busbw_gbps")
_PATHS = ("log_file", "slurm_bin_dir", "sysfs_root", "mounts_file")
_OPTIONAL_PATHS = ("shared_fs_mount", "kernel_log_file")
TOP_KEYS = frozenset({"schema_version", *(f.name for f in fields(HealthConfig))})


def _number(r: Reader, obj: dict[str, Any], key: str) -> float | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        r.err(key, f"must be a positive number or null, got {value!r}")
        return None
    return float(value)


def _parse_modes(r: Reader, raw: Any) -> tuple[tuple[str, ModeConfig], ...]:
    modes = dict(_default_modes())
    if raw is None:
        return tuple(modes.items())
    if not isinstance(raw, dict):
        r.err("modes", f"must be an object keyed by mode, got {raw!r}")
        return tuple(modes.items())
    for name, spec in cast("dict[str, Any]", raw).items():
        where = f"modes.{name}"
        if name not in MODES:
            r.err(where, f"unknown mode (allowed: {', '.join(MODES)})")
            continue
        if not isinstance(spec, dict):
            r.err(where, f"must be an object, got {spec!r}")
            continue
        obj = cast("dict[str, Any]", spec)
        r.unknown(obj, ("checks", "budget_seconds"), where)
        checks = obj.get("checks", list(modes[name].checks))
        if not isinstance(checks, list) or not all(isinstance(c, str) for c in cast("list[Any]", checks)):
            r.err(f"{where}.checks", f"must be a list of check names, got {checks!r}")
            continue
        names = cast("list[str]", checks)
        for c in names:
            if c not in CHECKS:
                r.err(f"{where}.checks", f"unknown check {c!r} (known: {', '.join(CHECKS)})")
        budget = r.integer(obj, "budget_seconds", where, default=modes[name].budget_seconds, minimum=1, maximum=86400)
        ordered = tuple(c for c in CHECKS if c in names)  # always cheap first
        modes[name] = ModeConfig(ordered, budget)
    return tuple(modes.items())


def parse(data: Any, path: str | None = None) -> HealthConfig:
    """A :class:`HealthConfig` from a decoded JSON document; raises HealthConfigError listing every problem."""
    if not isinstance(data, dict):
        raise HealthConfigError([f"top level must be a JSON object, got {type(data).__name__}"], path)
    obj = cast("dict[str, Any]", data)
    errors: list[str] = []
    r = Reader(errors)
    r.unknown(obj, TOP_KEYS, "")
    if obj.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
        r.err("schema_version", f"this program reads schema_version {SCHEMA_VERSION}, got {obj['schema_version']!r}")
    kw: dict[str, Any] = {}
    kw["instance_type"] = r.string(obj, "instance_type", "", required=True) or ""
    for key, (lo, hi) in _INTS.items():
        default = cast("int", HealthConfig.__dataclass_fields__[key].default)
        kw[key] = r.integer(obj, key, "", default=default, minimum=lo, maximum=hi, required=key == "gpu_count")
    for key in _FLOATS:
        kw[key] = _number(r, obj, key)
    fraction = obj.get("min_fraction", HealthConfig.min_fraction)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        r.err("min_fraction", f"must be a number in (0, 1], got {fraction!r}")
        fraction = HealthConfig.min_fraction
    kw["min_fraction"] = float(fraction)
    kw["pcie_idle_downshift"] = r.boolean(obj, "pcie_idle_downshift", "", default=False)
    model = obj.get("gpu_model", "")
    if not isinstance(model, str):
        r.err("gpu_model", f"must be a string, got {model!r}")
    kw["gpu_model"] = model if isinstance(model, str) else ""
    kw["shared_fs_type"] = r.string(obj, "shared_fs_type", "", default="lustre") or "lustre"
    kw["node_name"] = r.string(obj, "node_name", "", nullable=True)
    for key in _PATHS + _OPTIONAL_PATHS:
        default = cast("str | None", HealthConfig.__dataclass_fields__[key].default)
        value = r.string(obj, key, "", default=default, nullable=key in _OPTIONAL_PATHS)
        if value is not None and not os.path.isabs(value):
            r.err(key, f"must be an absolute path, got {value!r}")
        kw[key] = value
    kw["modes"] = _parse_modes(r, obj.get("modes"))
    if errors:
        raise HealthConfigError(errors, path)
    return HealthConfig(**kw)


def read_json(path: str) -> Any:
    """The decoded JSON document at ``path``; HealthConfigError when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise HealthConfigError(["file not found"], path) from None
    except (OSError, ValueError) as exc:
        raise HealthConfigError([f"cannot read it: {exc}"], path) from None


def load(path: str) -> HealthConfig:
    return parse(read_json(path), path)
