"""The stack's outputs in the text plan, as ``pulumi up`` will export them: one line per value, nested
keys joined with dots, a map of plain values or a record on one line, a list or map of records one line
per record, secrets as ``[secret]``, a multi-line text (a rendered file) as its size, the
values of a map that only AWS will know (ids, ARNs; a map of them counts as one) on one line as ``key.{a,b}  assigned
at create``.

The estimate, findings and storage sizing are outputs too, but the plan shows them in sections of their own; so is
``storage`` (each file system's kind, mount point and EFA), which the summary's ``storage`` row shows (``--json`` keeps
every output)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from gpucluster.tools.plan.run.stackfile import SECRET
from gpucluster.tools.plan.show.width import elide

SHOWN_ELSEWHERE = ("estimate", "findings", "storageSizing", "storage")


def _scalar(value: Any) -> str:
    if value == SECRET:
        return "[secret]"
    if isinstance(value, str) and "\n" in value.rstrip("\n"):  # a file's text (hybridNodes.files): its size, not its lines
        return f"<text: {len(value.splitlines())} lines, {len(value.encode()):,} B>"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def _inline(value: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_scalar(v) if not isinstance(v, (dict, list)) else json.dumps(v)}" for k, v in sorted(value.items()))


STAND_IN = re.compile(r"^\((?:[^()]*, assigned at create)\)$")
"""A value only AWS will know, as the plan's ``rewrite`` shows it."""


def _pending(value: Any, rewrite: Callable[[str], str]) -> bool:
    """``value`` (a scalar or a list of them) is only known once AWS creates the resources."""
    items = value if isinstance(value, list) else [value]
    return bool(items) and all(isinstance(v, str) and STAND_IN.match(rewrite(v)) for v in items)


def _walk(key: str, value: Any, out: list[tuple[str, str]], rewrite: Callable[[str], str]) -> None:
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        for k, v in sorted(value.items()):  # a map of records (partitions, teams): one line per record
            out.append((f"{key}.{k}", _inline(v) if v else "{}"))
    elif isinstance(value, dict) and value and not any(isinstance(v, (dict, list)) for v in value.values()):
        out.append((key, _inline(value)))  # a map of plain values (node group → name): one line
    elif isinstance(value, dict) and value:
        # values only AWS will know (ids, ARNs of resources the tree lists) share one line: {a,b} like the tree
        # (a map whose every value is such, e.g. the policy ARNs per user, counts as one of them)
        pending = sorted(k for k, v in value.items() if _pending(list(v.values()) if isinstance(v, dict) else v, rewrite))
        if len(pending) > 1:
            out.append((f"{key}.{{{','.join(pending)}}}", "assigned at create"))
        for k, v in sorted(value.items()):
            if k not in pending or len(pending) == 1:
                _walk(f"{key}.{k}", v, out, rewrite)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for n, v in enumerate(value):
            out.append((f"{key}[{n}]", _inline(v)))
    elif value not in ({}, [], None):  # an empty nested value says nothing
        out.append((key, _scalar(value)))


def output_lines(outputs: dict[str, Any], rewrite: Callable[[str], str] = str, width: int | None = None) -> list[str]:
    """``Outputs`` and one line per exported value (``rewrite`` shows mock ids as what they stand for); with a
    ``width``, the values too wide for a line are named on one (``plan --json`` and ``--detail`` show them)."""
    rows: list[tuple[str, str]] = []
    for key, value in sorted(outputs.items()):
        if key not in SHOWN_ELSEWHERE and value not in ({}, [], None):
            _walk(key, value, rows, rewrite)
    if not rows:
        return ["Outputs: none"]
    column = min(max(len(k) for k, _ in rows), 36)
    shown = [(k, f"  {k:<{column}} {rewrite(v)}") for k, v in rows]
    out = ["Outputs (what `pulumi stack output` will show)"]
    out += [line for _, line in shown if width is None or len(line) <= width]
    wide = [k for k, line in shown if width is not None and len(line) > width]
    if wide:  # values too wide for a line: named on one, shown by --detail and --json
        out.append(elide("  too wide to show here (plan --detail, --json): ", wide, width or 0, ", "))
    return out
