"""pydantic's validation errors as findings: each names the config path as the user wrote it
(``gpucluster:nodeGroups[0].instanceType``, ``aws:region``), says what is wrong in words (never a raw pattern, never
the docstrings' reST), and how to fix it.

- A misspelt field next to the required field it was meant to be is one finding, "unknown field 'instanceTyp'; did
  you mean 'instanceType'?", not that plus "'instanceType' is required but missing".
- A missing field says what to set, from the field's docstring (its first sentence, its type and bounds).
- A validator's own message keeps its fix (after :data:`~gpucluster.config.base.FIX_MARK`).
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Sequence

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from gpucluster.config.base import FIX_MARK
from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.errors import Finding, error

NAMESPACE = "gpucluster"
REGION_KEY = "aws:region"


def render_path(loc: Sequence[int | str]) -> str:
    head, *rest = loc
    key = REGION_KEY if head == "region" else f"{NAMESPACE}:{head}"
    out = key
    for part in rest:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _model_classes(annotation: object) -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is not None or isinstance(annotation, types.UnionType):
        for arg in typing.get_args(annotation):
            found += _model_classes(arg)
    return found


def model_at(loc: Sequence[int | str], root: type[BaseModel] = ClusterSpec) -> type[BaseModel] | None:
    """The model class whose fields live at ``loc`` (aliases, list indexes skipped)."""
    model: type[BaseModel] | None = root
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        field = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        if field is None:
            return None
        classes = _model_classes(field.annotation)
        model = classes[0] if classes else None
    return model


_KIND = {int: "a whole number", float: "a number", str: "text", bool: "true or false"}
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)\.(?:\s|$)")
"""The end of a sentence: a full stop before a blank, not the one of "e.g.", "i.e." or "etc."."""
_REST = ((re.compile(r":[a-z]+:`~?(?:[\w.]*\.)?([^`]+)`"), r"\1"), (re.compile(r"``([^`]+)``"), r"`\1`"))
"""reST in the docstrings, as plain text: roles to their last name, double backquotes to single ones."""


def plain(text: str) -> str:
    """A docstring's text for a message: reST markup undone, lines joined."""
    text = " ".join(text.split())
    for pattern, repl in _REST:
        text = pattern.sub(repl, text)
    return text


def field_doc(loc: Sequence[int | str]) -> str:
    """First sentence of the field's docstring at ``loc``, in plain text, with its type and bounds."""
    parent = model_at(loc[:-1])
    if parent is None or not isinstance(loc[-1], str):
        return ""
    for name, field in parent.model_fields.items():
        if loc[-1] in (name, field.alias):
            doc = plain(_SENTENCE_END.split(field.description or "", maxsplit=1)[0]).rstrip(".")
            args = typing.get_args(field.annotation) or (field.annotation,)
            kinds = [_KIND[a] for a in args if a in _KIND]
            bounds = [
                f"{sym} {getattr(m, attr)}"
                for m in field.metadata
                for attr, sym in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))
                if getattr(m, attr, None) is not None
            ]
            shape = ", ".join(([kinds[0]] if kinds else []) + bounds)
            return f"{doc} ({shape})." if shape else f"{doc}."
    return ""


def _typos(errs: Sequence[ErrorDetails]) -> dict[tuple[int | str, ...], str]:
    """``{location of an unknown field: the missing required sibling it was meant to be}``."""
    missing: dict[tuple[int | str, ...], list[str]] = {}
    for err in errs:
        loc = tuple(err["loc"])
        if err["type"] == "missing" and loc and isinstance(loc[-1], str):
            missing.setdefault(loc[:-1], []).append(loc[-1])
    out: dict[tuple[int | str, ...], str] = {}
    for err in errs:
        loc = tuple(err["loc"])
        if err["type"] == "extra_forbidden" and loc:
            close = difflib.get_close_matches(str(loc[-1]), missing.get(loc[:-1], []), n=1, cutoff=0.6)
            if close:
                out[loc] = close[0]
    return out


def _unknown_field(loc: tuple[int | str, ...], path: str, meant: str | None) -> Finding:
    name = str(loc[-1])
    if meant is not None:
        doc = field_doc((*loc[:-1], meant))
        fix = f"rename {name} to {meant}, which is required: {doc}" if doc else f"rename {name} to {meant}, which is required"
        return error(path, f"unknown field {name!r}; did you mean {meant!r}?", fix, None, "unknown-field")
    parent = model_at(loc[:-1])
    valid = sorted(f.alias or n for n, f in parent.model_fields.items()) if parent else []
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
    if close:
        return error(
            path, f"unknown field {name!r}; did you mean {close[0]!r}?", f"rename {name} to {close[0]}", None, "unknown-field"
        )
    return error(
        path, f"unknown field {name!r}", f"remove it, or use one of the fields here: {', '.join(valid)}", None, "unknown-field"
    )


def _missing_field(loc: tuple[int | str, ...], path: str) -> Finding:
    name = path if len(loc) == 1 else str(loc[-1])
    doc = field_doc(loc)
    return error(path, f"{name!r} is required but missing", f"set {name}: {doc}" if doc else f"set {name}", None, "missing")


def pydantic_findings(exc: ValidationError) -> list[Finding]:
    out: list[Finding] = []
    errs = exc.errors(include_url=False)
    item_locs = [tuple(e["loc"]) for e in errs]
    typos = _typos(errs)
    meant = {(*at[:-1], name) for at, name in typos.items()}
    for err in errs:
        loc = tuple(err["loc"])
        if err["type"] == "too_short" and any(len(o) > len(loc) and o[: len(loc)] == loc for o in item_locs):
            continue  # the items failed, so fewer survived; their own errors say why
        kind = err["type"]
        msg = str(err["msg"])
        value: object = err.get("input")
        path = render_path(loc) if loc else NAMESPACE
        if kind == "missing":
            if loc not in meant:  # else the misspelt field's finding says to rename it
                out.append(_missing_field(loc, path))
        elif kind == "extra_forbidden":
            out.append(_unknown_field(loc, path, typos.get(loc)))
        elif kind in ("value_error", "assertion_error"):
            text = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
            text, _, fix = text.partition(FIX_MARK)  # validators may say how to fix it after FIX_MARK
            shown = value if not isinstance(value, (dict, list)) else None
            out.append(error(path, text, fix, shown, "invalid"))
        else:
            shown = value if not isinstance(value, (dict, list)) or kind.endswith("_type") else None
            doc = field_doc(loc) if loc and isinstance(loc[-1], str) else ""
            out.append(error(path, f"{msg[0].lower()}{msg[1:]}", f"expected: {doc}" if doc else "", shown, kind))
    return out
