"""IAM policies in the default text plan, summarised: statements counted (denials and conditioned ones said), actions
counted per service, resources counted by kind. Every statement in full is in ``plan --json`` and in
``plan --detail`` (:func:`~gpucluster.tools.plan.show.describe.describe_policy`, one line each).

A role's line carries its inline policies' summary, so a cluster's roles read one line each instead of one line of
thousands of characters."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any


def _listed(value: Any) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _kind(resource: str) -> str:
    """``arn:aws:s3:::bucket/key`` → ``s3``; ``*`` → ``*``; a value that is not an ARN as itself (a stand-in)."""
    if resource == "*":
        return "*"
    parts = resource.split(":")
    return parts[2] if len(parts) > 5 and parts[0] == "arn" else "other"


def statements(policy: Any) -> list[dict[str, Any]] | None:
    """The statements of a policy document (text or parsed); None where it is not known yet."""
    try:
        doc = json.loads(policy) if isinstance(policy, str) else policy
    except json.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    found = doc.get("Statement", [])
    return [found] if isinstance(found, dict) else [s for s in found if isinstance(s, dict)]


TOP = 4
"""The services or resource kinds a summary names; the others are counted."""


def _counted(counter: Counter[str], noun: str) -> str:
    items = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
    rest = f" and {len(items) - TOP} more" if len(items) > TOP else ""
    return f"{noun} " + ", ".join(f"{k} {n}" for k, n in items[:TOP]) + rest


def summary_parts(docs: Iterable[Any]) -> list[str]:
    """The summary of one or more policies as parts of a line: ``5 statements (1 Deny, 2 conditioned)``, the distinct
    actions per service ``actions ec2 9, s3 2``, the distinct resources per kind ``resources ec2 6, s3 2, any (*) 1``."""
    sts: list[dict[str, Any]] = []
    for doc in docs:
        found = statements(doc)
        if found is None:
            return ["policy (not yet known)"]
        sts += found
    if not sts:
        return ["no statements"]
    actions = {a for st in sts for a in _listed(st.get("Action")) + _listed(st.get("NotAction"))}
    resources = {r for st in sts for r in _listed(st.get("Resource")) + _listed(st.get("NotResource"))}
    by_service = Counter(a.split(":")[0] if ":" in a else a for a in actions)
    by_kind = Counter("any (*)" if r == "*" else _kind(r) for r in resources)
    deny = sum(1 for st in sts if st.get("Effect") == "Deny")
    cond = sum(1 for st in sts if st.get("Condition"))
    notes = [f"{deny} Deny" if deny else "", f"{cond} conditioned" if cond else ""]
    head = f"{len(sts)} statement{'s' if len(sts) > 1 else ''}"
    head += f" ({', '.join(n for n in notes if n)})" if any(notes) else ""
    return [head, _counted(by_service, "actions"), _counted(by_kind, "resources")]
