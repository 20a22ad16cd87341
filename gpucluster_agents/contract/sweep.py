# pyright: strict
"""``sweep.json``: the settings of the Kubernetes health sweep (:mod:`gpucluster_agents.health.k8s_sweep`, a
DaemonSet on GPU nodes), and how the DaemonSet starts it. The control plane writes it with :func:`to_json`
(render/kubernetes/health.py), the sweep reads it with :func:`load`: one schema, strict like the health config's."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, fields
from typing import Any, cast

from .health import HealthConfigError, read_json
from .jsonread import Reader

SCHEMA_VERSION = 1
# How the DaemonSet starts this module: the package zip (argv[1]) first on the path, then main().
SWEEP_MAIN = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); from gpucluster_agents.health.k8s_sweep import main; sys.exit(main())"
)
_URL = re.compile(r"^https?://[^\s/]+$")
_ABSOLUTE = re.compile(r"^/\S*$")
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$")  # condition types, taint and label keys


@dataclass(frozen=True)
class SweepSettings:
    """``sweep.json``: what the control plane decided, read once at start."""

    condition: str  # the node condition type the sweep owns
    taint_key: str  # its fault taint (effect NoSchedule)
    taint_value: str
    boot_taint_key: str  # the taint a GPU node registers with until its boot check passes
    group_label: str  # the node label naming its node group: health-<group>.json
    interval_seconds: int  # between rounds
    sweep_budget_seconds: int  # how long the sweep mode may take before it counts as a fault
    boot_budget_seconds: int  # the same for the boot mode
    api: str  # the API server, e.g. https://kubernetes.default.svc
    service_account_dir: str  # the pod's token and ca.crt
    health_config_dir: str  # where the health-<group>.json files lie
    package: str  # the node package (a zip or a folder) the health program runs from

    @property
    def taint(self) -> dict[str, str]:
        return {"key": self.taint_key, "value": self.taint_value, "effect": "NoSchedule"}

    def budget(self, mode: str) -> int:
        return self.boot_budget_seconds if mode == "boot" else self.sweep_budget_seconds


def to_json(settings: SweepSettings) -> str:
    """``sweep.json``: sorted keys, the same settings always the same bytes."""
    return json.dumps({"schema_version": SCHEMA_VERSION, **asdict(settings)}, indent=2, sort_keys=True) + "\n"


_STRINGS = {
    "condition": (_NAME, "letters, digits, '-', '_', '.', '/'"),
    "taint_key": (_NAME, "a qualified name"),
    "taint_value": (_NAME, "a label value"),
    "boot_taint_key": (_NAME, "a qualified name"),
    "group_label": (_NAME, "a qualified name"),
    "api": (_URL, "http(s)://host[:port], no path"),
    "service_account_dir": (_ABSOLUTE, "an absolute path"),
    "health_config_dir": (_ABSOLUTE, "an absolute path"),
    "package": (_ABSOLUTE, "an absolute path"),
}
_INTS = ("interval_seconds", "sweep_budget_seconds", "boot_budget_seconds")


def parse(data: Any, path: str | None = None) -> SweepSettings:
    """:class:`SweepSettings` from decoded JSON; raises HealthConfigError listing every problem by key."""
    if not isinstance(data, dict):
        raise HealthConfigError([f"top level must be a JSON object, got {type(data).__name__}"], path)
    obj = cast("dict[str, Any]", data)
    errors: list[str] = []
    r = Reader(errors)
    r.unknown(obj, {"schema_version", *(f.name for f in fields(SweepSettings))}, "")
    if obj.get("schema_version") != SCHEMA_VERSION:
        r.err("schema_version", f"this program reads schema_version {SCHEMA_VERSION}, got {obj.get('schema_version')!r}")
    kw: dict[str, Any] = {}
    for key, (pattern, hint) in _STRINGS.items():
        kw[key] = r.string(obj, key, "", default="", required=True, pattern=pattern, hint=hint)
    for key in _INTS:
        kw[key] = r.integer(obj, key, "", default=1, minimum=1, maximum=86400, required=True)
    if errors:
        raise HealthConfigError(errors, path)
    return SweepSettings(**kw)


def load(path: str) -> SweepSettings:
    return parse(read_json(path), path)
