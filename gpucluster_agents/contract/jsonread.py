# pyright: strict
"""Typed reads out of a decoded JSON object that record every problem with its key path.

The agent config parser (:mod:`gpucluster_agents.contract`) uses it so that one run over a bad
file reports all of its mistakes at once, each naming the key (``node_groups[1].max_nodes``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, cast

BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
"""An S3 bucket name: 3..63 of a-z, 0-9, '.', '-', starting and ending with a letter or digit."""


class Reader:
    """Collects ``"<key path>: <problem>"`` strings in ``errors``; every read returns a safe default on error."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors

    def err(self, path: str, msg: str) -> None:
        self.errors.append(f"{path}: {msg}")

    def unknown(self, obj: Mapping[str, Any], allowed: Iterable[str], path: str) -> None:
        allowed = set(allowed)
        for key in sorted(set(obj) - allowed):
            where = f"{path}.{key}" if path else key
            self.err(where, f"unknown key (allowed: {', '.join(sorted(allowed))})")

    def section(self, raw: Any, allowed: Iterable[str], path: str) -> dict[str, Any] | None:
        """An optional object with a bucket (absent or null: None; not an object: an error and None), its unknown keys
        reported."""
        if raw is None:
            return None
        if not isinstance(raw, dict):
            self.err(path, f"must be an object with a bucket, got {raw!r}")
            return None
        obj = cast("dict[str, Any]", raw)
        self.unknown(obj, allowed, path)
        return obj

    def bucket(self, obj: Mapping[str, Any], path: str) -> str | None:
        """The required ``bucket`` key of a section: an S3 bucket name."""
        return self.string(
            obj, "bucket", path, required=True, pattern=BUCKET_RE, hint="an S3 bucket name: 3..63 of a-z, 0-9, '.', '-'"
        )

    def string(
        self,
        obj: Mapping[str, Any],
        key: str,
        path: str,
        default: str | None = None,
        required: bool = False,
        nullable: bool = False,
        pattern: re.Pattern[str] | None = None,
        hint: str = "",
    ) -> str | None:
        where = f"{path}.{key}" if path else key
        if key not in obj:
            if required:
                self.err(where, "required key is missing")
            return default
        value = obj[key]
        if value is None and nullable:
            return None
        if not isinstance(value, str) or not value:
            self.err(where, f"must be a non-empty string, got {value!r}")
            return default
        if pattern is not None and not pattern.match(value):
            self.err(where, f"{value!r} is not valid{(': ' + hint) if hint else ''}")
            return default
        return value

    def integer(
        self,
        obj: Mapping[str, Any],
        key: str,
        path: str,
        default: int,
        minimum: int,
        maximum: int | None = None,
        required: bool = False,
    ) -> int:
        where = f"{path}.{key}" if path else key
        if key not in obj:
            if required:
                self.err(where, "required key is missing")
            return default
        value = obj[key]
        if isinstance(value, bool) or not isinstance(value, int):
            self.err(where, f"must be an integer, got {value!r}")
            return default
        if value < minimum or (maximum is not None and value > maximum):
            bound = f">= {minimum}" if maximum is None else f"between {minimum} and {maximum}"
            self.err(where, f"must be {bound}, got {value}")
            return default
        return value

    def boolean(self, obj: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
        where = f"{path}.{key}" if path else key
        if key not in obj:
            return default
        value = obj[key]
        if not isinstance(value, bool):
            self.err(where, f"must be true or false, got {value!r}")
            return default
        return value
