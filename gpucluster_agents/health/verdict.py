# pyright: strict
"""One run's outcome: every check with its value and threshold, the node's action, and the reason Slurm
shows. The JSON shape is what the agent's quarantine pass, the Kubernetes sweep and people read:
``{node, mode, time, checks: [{name, ok, value, threshold, action, detail}], action, reason}``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

ACTIONS = ("none", "reboot", "replace")  # in rising order: the node's action is the worst of its checks
REASON_PREFIX = "gpucluster:"  # the agent acts only on drains whose reason starts with this
REASON_MAX = 256  # Slurm keeps longer reasons, but sinfo/scontrol columns and NHC-style tooling expect short ones
SKIPPED = "skipped: "  # a check that could not be read (NotSupported, tool absent, budget) is not a fault


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    value: Any = None
    threshold: Any = None
    action: str = "none"
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ok": self.ok,
            "value": self.value,
            "threshold": self.threshold,
            "action": self.action,
            "detail": self.detail,
        }


def passed(name: str, value: Any = None, threshold: Any = None, detail: str = "") -> Check:
    return Check(name, True, value, threshold, "none", detail)


def failed(name: str, action: str, value: Any, threshold: Any, detail: str) -> Check:
    assert action in ("reboot", "replace"), action
    return Check(name, False, value, threshold, action, detail)


def skipped(name: str, why: str, value: Any = None, threshold: Any = None) -> Check:
    return Check(name, True, value, threshold, "none", SKIPPED + why)


def worst(actions: list[str]) -> str:
    return max(actions, key=ACTIONS.index, default="none")


def reason(checks: list[Check]) -> str:
    """``gpucluster: <check> <short>``: the first check with the worst action, plus how many others failed."""
    faults = [c for c in checks if not c.ok]
    if not faults:
        return f"{REASON_PREFIX} healthy"
    top = worst([c.action for c in faults])
    first = next(c for c in faults if c.action == top)
    # The action the agent's repair pass reads (gpucluster_agents/repair/quarantine.py): "(reboot)" or "(replace)".
    more = (f" (+{len(faults) - 1} more)" if len(faults) > 1 else "") + (f" ({top})" if top in ("reboot", "replace") else "")
    text = f"{REASON_PREFIX} {first.name} {first.detail}".strip()
    # Slurm stores the reason as given; keep it printable, one line, no quotes for shell wrappers to trip on
    text = " ".join(text.replace('"', "'").replace("(", "[").replace(")", "]").split())
    if len(text) + len(more) > REASON_MAX:
        text = text[: REASON_MAX - len(more) - 3].rstrip() + "..."
    return text + more


@dataclass(frozen=True)
class Verdict:
    node: str
    mode: str
    time: str  # ISO 8601 UTC
    checks: tuple[Check, ...]

    @property
    def action(self) -> str:
        return worst([c.action for c in self.checks if not c.ok])

    @property
    def healthy(self) -> bool:
        return self.action == "none"

    @property
    def reason(self) -> str:
        return reason(list(self.checks))

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "mode": self.mode,
            "time": self.time,
            "checks": [c.to_dict() for c in self.checks],
            "action": self.action,
            "reason": self.reason,
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)


def append_log(path: str, verdict: Verdict) -> str | None:
    """Append one line to the JSON-lines log; the error text when it cannot be written (the verdict still
    goes to stdout and, on a fault, to Slurm: a full disk must not hide a bad GPU)."""
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(verdict.to_json() + "\n")
    except OSError as exc:
        return f"cannot append to {path}: {exc}"
    return None
