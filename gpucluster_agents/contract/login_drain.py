# pyright: strict
"""``/etc/gpucluster/login-drain.json``: what a login node's drain program (:mod:`gpucluster_agents.boot.login_drain`)
needs from its Auto Scaling group. The control plane writes it with :meth:`DrainConfig.to_json`
(render/slurm/login.py), the program reads it with :func:`parse_config`: strict, every problem at once."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, cast

PATH = "/etc/gpucluster/login-drain.json"

# the hook's heartbeat bounds (PutLifecycleHook)
_INTS = {"grace_seconds": (30, 7200), "poll_seconds": (1, 300)}
_STRINGS = ("region", "asg_name", "hook_name")


@dataclasses.dataclass(frozen=True)
class DrainConfig:
    """The login group's values, as the user data writes them to :data:`PATH`."""

    region: str
    asg_name: str
    hook_name: str
    grace_seconds: int
    poll_seconds: int

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"


def parse_config(doc: Any) -> DrainConfig:
    """A :class:`DrainConfig` from a decoded JSON document; a missing, unknown or mistyped key is a ValueError naming
    it, all reported at once (a drain that silently used a default would cut users off or never complete)."""
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    doc = cast("dict[str, Any]", doc)
    errors = [f"{k}: unknown key" for k in sorted(set(doc) - set(_STRINGS) - set(_INTS))]
    for key in (*_STRINGS, *_INTS):
        value, bounds = doc.get(key), _INTS.get(key)
        if key not in doc:
            errors.append(f"{key}: required key is missing")
        elif bounds is None and not (isinstance(value, str) and value.strip()):
            errors.append(f"{key}: must be a non-empty string")
        elif bounds and not (type(value) is int and bounds[0] <= value <= bounds[1]):
            errors.append(f"{key}: must be seconds from {bounds[0]} to {bounds[1]}, got {value!r}")
    if errors:
        raise ValueError("; ".join(errors))
    return DrainConfig(**doc)
