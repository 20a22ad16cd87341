"""Generate ``docs/config-reference.md`` from the spec models' field docstrings.

The reference is never edited by hand: a test fails when it differs from what this module writes.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path

from pydantic import BaseModel

from gpucluster._paths import PACKAGE_DIR
from gpucluster.config.cluster import ClusterSpec
from gpucluster.load import REGION_KEY

REFERENCE = PACKAGE_DIR.parent / "docs" / "config-reference.md"  # in the checkout (a maintainer tool)


def _type_name(annotation: object) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation.__name__
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args if a is not type(None)) + " (optional)"
    if origin is tuple:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return "map of text"
    if isinstance(annotation, type):
        return {"str": "text", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation)


def _models(root: type[BaseModel]) -> list[type[BaseModel]]:
    seen: list[type[BaseModel]] = []

    def walk(model: type[BaseModel]) -> None:
        if model in seen:
            return
        seen.append(model)
        for field in model.model_fields.values():
            for arg in (field.annotation, *typing.get_args(field.annotation)):
                for inner in (arg, *typing.get_args(arg)):
                    if isinstance(inner, type) and issubclass(inner, BaseModel):
                        walk(inner)

    walk(root)
    return seen


def _default(field: typing.Any) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "see below"
    if value in ((), {}, None):
        return "—"
    return f"`{value}`"


def config_reference() -> str:
    lines = [
        "# Stack configuration reference",
        "",
        "Generated from the spec models by `gpucluster docs`; do not edit. Keys live under the `gpucluster:`",
        f"namespace of `stacks/Pulumi.<stack>.yaml`, except the region, which is `{REGION_KEY}`.",
        "",
    ]
    for model in _models(ClusterSpec):
        lines += [
            f"## {model.__name__}",
            "",
            (model.__doc__ or "").strip(),
            "",
            "| field | type | default | description |",
            "|---|---|---|---|",
        ]
        for name, field in model.model_fields.items():
            key = field.alias or name
            if model is ClusterSpec:
                key = REGION_KEY if name == "region" else f"gpucluster:{key}"
            doc = " ".join((field.description or "").split())
            lines.append(f"| `{key}` | {_type_name(field.annotation)} | {_default(field)} | {doc} |")
        lines.append("")
    return "\n".join(lines)


def write_config_reference(path: Path = REFERENCE) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(config_reference())
    return path
