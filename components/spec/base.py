"""The base every spec model shares: frozen, strict about unknown keys, camelCase in config files.

Fields are snake_case in Python and camelCase in the stack config (``instance_type`` ↔
``instanceType``), the usual Pulumi config style. Each field is documented by the docstring under it;
``docs/config-reference.md`` is generated from those docstrings (``gpucluster docs``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$|^[a-z]$")
TAG_KEY_MAX = 128
TAG_VALUE_MAX = 256


class SpecModel(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        validate_default=True,
        str_strip_whitespace=True,
        # ``.inf``, ``1e400``, ``nan``: no field means "unbounded", and a non-finite number would
        # overflow the sizing arithmetic or end up as ``Infinity`` (invalid JSON) in ``plan --json``.
        allow_inf_nan=False,
    )


def check_name(value: str, what: str) -> str:
    """Names end up in AWS resource names, Slurm node names and Kubernetes labels: keep them DNS-safe."""
    if not NAME_RE.match(value):
        raise ValueError(
            f"{what} {value!r} is not a valid name: use 1-32 lowercase letters, digits and '-', "
            "starting with a letter and not ending with '-'"
        )
    return value


def check_unique(names: Iterable[str], what: str) -> None:
    """Raise when a name repeats: ``what`` is the singular (``node group``, ``team``)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"two {what}s are named {name!r}; {what} names must be unique")
        seen.add(name)


def check_tags(tags: dict[str, str]) -> dict[str, str]:
    for key, val in tags.items():
        if key.lower().startswith("aws:"):
            raise ValueError(f"tag key {key!r} uses the reserved 'aws:' prefix; choose another key")
        if not key or len(key) > TAG_KEY_MAX:
            raise ValueError(f"tag key {key!r} must be 1-{TAG_KEY_MAX} characters")
        if len(val) > TAG_VALUE_MAX:
            raise ValueError(f"tag {key!r} has a value longer than {TAG_VALUE_MAX} characters")
    return tags
