"""``gpucluster plan diff --format json``: the comparison in the shape of ``pulumi preview --json``.

Pulumi's preview digest (``sdk/go/common/display/json.go`` in pulumi/pulumi) has ``steps`` (``op``,
``urn``, ``oldState``/``newState``, ``diffReasons``, ``replaceReasons``, ``detailedDiff``) and
``changeSummary`` (a count per op); tools that read it read this. Our own fields ride along:
``dataLoss``, ``disruption``, ``protect``, ``notes`` per step, the rendered ``files`` that changed (as
unified diffs) and ``cost`` (the cost delta, given by the caller). Like Pulumi's, unchanged (``same``)
steps are counted but not listed. The schema is ``schemas/diff.schema.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpucluster.tools.plan.diff.changes import detailed_diff
from gpucluster.tools.plan.diff.step import Comparison, Step
from gpucluster.tools.plan.diff.teams import team_lines
from gpucluster.tools.plan.diff.text import file_diff

STATE_KEYS = ("urn", "type", "custom", "id", "parent", "protect", "retainOnDelete", "inputs")


def _state(doc: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if doc is None else {k: doc[k] for k in STATE_KEYS if k in doc}


def step_json(s: Step) -> dict[str, Any]:
    out: dict[str, Any] = {"op": s.op, "urn": s.urn, "type": s.type, "name": s.name, "logicalKey": s.key}
    if s.old is not None:
        out["oldState"] = _state(s.old)
    if s.new is not None:
        out["newState"] = _state(s.new)
    if s.op == "update":
        out["diffReasons"] = s.diff_reasons
    if s.op == "replace":
        out["diffReasons"] = s.diff_reasons
        out["replaceReasons"] = s.replace_reasons
    if s.changed or s.carried:
        out["detailedDiff"] = detailed_diff(s)
    if s.carried:
        out["carried"] = {path: names for path, names in sorted(s.carried.items())}
    out.update(dataLoss=s.data_loss, disruption=s.disruption, protect=s.protect, notes=s.notes)
    return out


def to_json(c: Comparison, *, cost: Any = None) -> dict[str, Any]:
    """The diff document; ``cost`` is whatever the cost delta's own JSON is (``null`` when not given)."""
    return {
        "project": c.project,
        "oldStack": c.old_stack,
        "newStack": c.new_stack,
        "steps": [step_json(s) for s in c.changes],
        "files": [{"path": f.path, "op": f.op, "diff": "\n".join(file_diff(f, indent=""))} for f in c.files],
        "teams": team_lines(c),
        **({"images": c.images} if c.images else {}),
        "changeSummary": c.counts(),
        "dataLoss": bool(c.data_loss),
        "cost": cost,
    }
