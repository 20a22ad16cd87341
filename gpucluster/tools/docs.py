"""Generate ``docs/config-reference.md`` from the spec models' field docstrings.

The reference is never edited by hand: a test fails when it differs from what this module writes. ``gpucluster
docs`` writes it into the checkout it runs from (a clone, or an editable install of one) or into ``--out DIR``;
run from an installed wheel without ``--out`` it refuses (:class:`NotACheckout`) rather than write into the
installation (site-packages).
"""

from __future__ import annotations

import types
import typing
from pathlib import Path

import tomllib
from pydantic import BaseModel

from gpucluster._paths import PACKAGE_DIR
from gpucluster.config.cluster import ClusterSpec
from gpucluster.load import REGION_KEY

REFERENCE_NAME = "config-reference.md"
REFERENCE = PACKAGE_DIR.parent / "docs" / REFERENCE_NAME
"""Where the reference lives in a checkout (the file the tests compare)."""


class NotACheckout(Exception):
    """``gpucluster docs`` without ``--out``, run from an installed package: there is no project to write into."""


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
        "Generated from the spec models by `gpucluster generate`; do not edit. Keys live under the `gpucluster:`",
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


def checkout_root(package_dir: Path | None = None) -> Path | None:
    """The checkout of the project this package runs from (its ``pyproject.toml`` names ``gpucluster``), or ``None``
    when it runs from an installed wheel (the folder above the package is site-packages)."""
    root = (package_dir or PACKAGE_DIR).parent
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text()).get("project") or {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return root if project.get("name") == "gpucluster" else None


def reference_path(out: Path | None = None, package_dir: Path | None = None) -> Path:
    """Where ``gpucluster docs`` writes: ``out/config-reference.md``, else the checkout's ``docs/config-reference.md``;
    raises :class:`NotACheckout` for an installed package without ``out``."""
    if out is not None:
        return out / REFERENCE_NAME
    root = checkout_root(package_dir)
    if root is None:
        installed = package_dir or PACKAGE_DIR
        raise NotACheckout(
            f"gpucluster runs from an installed package ({installed}), not from a checkout of the project, and will not "
            f"write into the installation; pass --out DIR to write {REFERENCE_NAME} there (e.g. --out docs)"
        )
    return root / "docs" / REFERENCE_NAME


def write_config_reference(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(config_reference())
    return path
