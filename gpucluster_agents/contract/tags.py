# pyright: strict
"""A node group's instance tags in the agent config (``node_groups[].tags``): the agent puts them on every instance
it launches, beside its own ``gpucluster:`` tags."""

from __future__ import annotations

from typing import Any, cast

from .jsonread import Reader

RESERVED_TAG_PREFIXES = ("aws:", "gpucluster:")


def parse_tags(r: Reader, raw: Any, path: str) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        r.err(path, f"must be an object of string to string, got {raw!r}")
        return ()
    out: list[tuple[str, str]] = []
    for key, value in cast("dict[Any, Any]", raw).items():
        if not isinstance(key, str) or not key or len(key) > 128:
            r.err(path, f"tag key {key!r} must be a string of 1..128 characters")
        elif key.lower().startswith(RESERVED_TAG_PREFIXES):
            r.err(f"{path}.{key}", "keys starting with aws: or gpucluster: are reserved")
        elif not isinstance(value, str) or len(value) > 256:
            r.err(f"{path}.{key}", f"tag value must be a string of at most 256 characters, got {value!r}")
        else:
            out.append((key, value))
    if len(out) > 40:
        r.err(path, f"at most 40 tags (EC2 allows 50 and the agent adds its own), got {len(out)}")
    return tuple(sorted(out))
