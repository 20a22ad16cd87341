"""The plan as JSON: the stable, sorted document the golden files, ``--json`` and ``plan diff`` read.

Like a step of ``pulumi preview --json``, each resource carries its ``op`` (a plan made from nothing
creates everything; ``plan diff`` works out the rest from two plans) and the document a
``changeSummary``. The schema is ``schemas/plan.schema.json``; docs/plan-json.md describes both."""

from __future__ import annotations

import json
from typing import Any

from gpucluster.tools.plan.run.engine import Plan
from gpucluster.tools.plan.show.people import people


def to_json(plan: Plan) -> dict[str, Any]:
    doc = _document(plan)
    found = people(doc)  # a Slurm cluster's people, only where it has some (older plans keep their shape)
    return {**doc, "people": found} if found is not None else doc


def _document(plan: Plan) -> dict[str, Any]:
    return {
        "project": plan.project,
        "stack": plan.stack,
        "region": plan.region,
        "ok": plan.ok,
        "error": plan.error,
        "resources": [
            {
                "op": "create",
                "urn": r.urn,
                "type": r.type,
                "name": r.name,
                "parent": r.parent,
                "custom": r.custom,
                "protect": r.protect,
                "retainOnDelete": r.retain_on_delete,
                "id": r.id,
                "inputs": r.inputs,
                # Inputs whose change `pulumi up` leaves alone on an existing resource (plan diff reads it).
                **({"ignoreChanges": sorted(r.ignore_changes)} if r.ignore_changes else {}),
            }
            for r in sorted(plan.resources, key=lambda r: r.urn)
        ],
        "changeSummary": {"create": len(plan.resources)} if plan.resources else {},
        "outputs": plan.outputs,
        "findings": plan.findings,
        "files": dict(sorted(plan.files.items())),
        **({"imageLocks": dict(sorted(plan.image_locks.items()))} if plan.image_locks else {}),
    }


def dumps(plan: Plan) -> str:
    return json.dumps(to_json(plan), indent=2, sort_keys=True) + "\n"
