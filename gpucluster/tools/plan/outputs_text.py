"""The stack's outputs in the text plan, as ``pulumi up`` will export them: one line per value, nested
keys joined with dots, a map of plain values or a record on one line, a list or map of records one line
per record, secrets as ``[secret]``.

The estimate, findings and storage sizing are outputs too, but the plan shows them in sections of their own."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gpucluster.tools.plan.stackfile import SECRET

SHOWN_ELSEWHERE = ("estimate", "findings", "storageSizing")


def _scalar(value: Any) -> str:
    if value == SECRET:
        return "[secret]"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def _inline(value: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_scalar(v) if not isinstance(v, (dict, list)) else json.dumps(v)}" for k, v in sorted(value.items()))


def _walk(key: str, value: Any, out: list[tuple[str, str]]) -> None:
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        for k, v in sorted(value.items()):  # a map of records (partitions, teams): one line per record
            out.append((f"{key}.{k}", _inline(v) if v else "{}"))
    elif isinstance(value, dict) and value and not any(isinstance(v, (dict, list)) for v in value.values()):
        out.append((key, _inline(value)))  # a map of plain values (node group → name): one line
    elif isinstance(value, dict) and value:
        for k, v in sorted(value.items()):
            _walk(f"{key}.{k}", v, out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for n, v in enumerate(value):
            out.append((f"{key}[{n}]", _inline(v)))
    else:
        out.append((key, _scalar(value)))


def output_lines(outputs: dict[str, Any], rewrite: Callable[[str], str] = str) -> list[str]:
    """``Outputs`` and one line per exported value (``rewrite`` shows mock ids as what they stand for)."""
    rows: list[tuple[str, str]] = []
    for key, value in sorted(outputs.items()):
        if key not in SHOWN_ELSEWHERE and value not in ({}, [], None):
            _walk(key, value, rows)
    if not rows:
        return ["Outputs: none"]
    width = min(max(len(k) for k, _ in rows), 36)
    return ["Outputs (what `pulumi stack output` will show)", *(f"  {k:<{width}} {rewrite(v)}" for k, v in rows)]
