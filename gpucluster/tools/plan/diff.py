"""The difference between two JSON plans, resource by resource and input by input: the core of the CI
preview (``gpucluster plan diff``), which must name every changed input and protection flag."""

from __future__ import annotations

from typing import Any


def _flatten(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{path}.{k}" if path else str(k)))
        return out or {path: {}}
    if isinstance(value, list):
        out = {}
        for n, v in enumerate(value):
            out.update(_flatten(v, f"{path}[{n}]"))
        return out or {path: []}
    return {path: value}


def diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable differences between two JSON plans: resources added, removed and changed."""
    before = {r["urn"]: r for r in old.get("resources", [])}
    after = {r["urn"]: r for r in new.get("resources", [])}
    lines: list[str] = []
    for urn in sorted(after.keys() - before.keys()):
        lines.append(f"+ {after[urn]['type']} {after[urn]['name']}")
    for urn in sorted(before.keys() - after.keys()):
        lines.append(f"- {before[urn]['type']} {before[urn]['name']}")
    for urn in sorted(before.keys() & after.keys()):
        a, b = _flatten(before[urn]["inputs"]), _flatten(after[urn]["inputs"])
        changed = sorted(k for k in a.keys() | b.keys() if a.get(k, "<absent>") != b.get(k, "<absent>"))
        flags = [f for f in ("protect", "retainOnDelete") if before[urn].get(f) != after[urn].get(f)]
        if changed or flags:
            lines.append(f"~ {after[urn]['type']} {after[urn]['name']}")
            for k in changed:
                lines.append(f"    {k}: {a.get(k, '<absent>')!r} → {b.get(k, '<absent>')!r}")
            for f in flags:
                lines.append(f"    {f}: {before[urn].get(f)} → {after[urn].get(f)}")
    for path in sorted(set(old.get("files", {})) | set(new.get("files", {}))):
        if old.get("files", {}).get(path) != new.get("files", {}).get(path):
            lines.append(f"~ file {path}")
    return lines
