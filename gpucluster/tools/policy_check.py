"""``gpucluster policy``: the policy pack's rules over the offline plan, for CI without an AWS account.

The rules are :mod:`gpucluster.policy`'s, the ones the Pulumi policy pack in ``policy-pack/`` runs in a real
``pulumi preview --policy-pack policy-pack``; here they read the plan JSON (``gpucluster plan --json``),
made on the spot from the stack or read from a file. A violation exits :data:`EXIT_VIOLATIONS`, so a
CI step fails on it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gpucluster.policy.evaluate import RULES, evaluate, from_plan
from gpucluster.policy.model import Violation

EXIT_VIOLATIONS = 3


def check(doc: Mapping[str, Any]) -> list[Violation]:
    """Every violation in a plan JSON document."""
    return evaluate(from_plan(doc))


def render_text(doc: Mapping[str, Any], found: list[Violation]) -> str:
    """One line per rule (pass or its count), then each violation with its fix."""
    resources = [r for r in doc.get("resources") or [] if isinstance(r, Mapping) and r.get("custom", True)]
    lines = [f"gpucluster policy — stack {doc.get('stack', '?')}: {len(RULES)} rules over {len(resources)} resources"]
    width = max(len(rule.name) for rule in RULES)
    for rule in RULES:
        count = sum(1 for v in found if v.rule == rule.name)
        status = "pass" if not count else f"FAIL ({count})"
        lines.append(f"  {status:<9} {rule.name:<{width}}  {rule.description}")
    if found:
        lines.append("")
        lines.append("violations:")
        lines += [f"  [{v.rule}] {v.render()}" for v in found]
    lines.append("")
    lines.append(f"{len(found)} violation(s)" if found else "no violations")
    return "\n".join(lines) + "\n"


def render_json(doc: Mapping[str, Any], found: list[Violation]) -> str:
    body = {
        "stack": doc.get("stack"),
        "rules": [
            {
                "name": rule.name,
                "description": rule.description,
                "stack": rule.stack,
                "violations": sum(1 for v in found if v.rule == rule.name),
            }
            for rule in RULES
        ],
        "violations": [v.to_json() for v in found],
    }
    return json.dumps(body, indent=2, sort_keys=True) + "\n"
