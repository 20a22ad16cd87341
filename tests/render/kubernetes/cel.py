"""A ValidatingAdmissionPolicy evaluated offline: its CEL run by cel-python (the Common Expression Language
in pure Python) the way the API server runs it, and its field paths checked against the Kubernetes schemas.

No Kubernetes API server runs here (no kube-apiserver is packaged for Debian 12; FACTS.md), so this is how
admission is proven offline: the expressions that ship, evaluated against requests built as the API server
builds them (``object``, ``oldObject``, ``request``, ``variables``). What it cannot prove: the API server's
own type checking of the expressions (emulated by :func:`field_paths_exist`), its cost limits, and that the
policy is actually registered and bound on a live cluster.

The API server's semantics kept here: ``matchConditions`` first (a false one skips the policy); variables
in order, each seeing the ones before; every validation evaluated; an evaluation error counts as a refusal
(``failurePolicy: Fail``), and is reported apart so a test can tell "refused" from "broke".
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import celpy
import kubernetes_validate
from celpy import celtypes

_ENV = celpy.Environment()


@functools.cache
def _program(expression: str) -> Any:
    return _ENV.program(_ENV.compile(expression))


@dataclass
class Verdict:
    """What the policy decided about one request."""

    matched: bool
    refused: list[str] = field(default_factory=list)
    """The message of each validation that came out false."""
    errors: list[str] = field(default_factory=list)
    """Validations whose evaluation failed (the API server refuses those too, with failurePolicy Fail)."""

    @property
    def allowed(self) -> bool:
        return not self.refused and not self.errors


def _evaluate(expression: str, activation: dict[str, Any]) -> Any:
    result = _program(expression).evaluate(activation)
    if isinstance(result, celpy.CELEvalError):
        raise result
    return result


def evaluate(policy: Mapping[str, Any], *, obj: Any, old: Any = None, request: Mapping[str, Any]) -> Verdict:
    """Run ``policy`` on a request whose object is ``obj`` (and ``old`` for an UPDATE)."""
    spec = policy["spec"]
    activation: dict[str, Any] = {
        "object": celpy.json_to_cel(obj),
        "oldObject": celpy.json_to_cel(old),
        "request": celpy.json_to_cel(dict(request)),
    }
    for condition in spec.get("matchConditions", []):
        if not bool(_evaluate(condition["expression"], activation)):
            return Verdict(matched=False)
    variables: dict[celtypes.StringType, Any] = {}
    for variable in spec.get("variables", []):
        activation["variables"] = celtypes.MapType(variables)
        variables[celtypes.StringType(variable["name"])] = _evaluate(variable["expression"], activation)
    activation["variables"] = celtypes.MapType(variables)
    verdict = Verdict(matched=True)
    for validation in spec["validations"]:
        try:
            ok = _evaluate(validation["expression"], activation)
        except Exception as e:  # the API server treats any evaluation error as a failure
            verdict.errors.append(f"{validation['expression'][:80]}…: {e}")
            continue
        if not isinstance(ok, celtypes.BoolType):
            verdict.errors.append(f"{validation['expression'][:80]}… returned {ok!r}, not a boolean")
        elif not ok:
            verdict.refused.append(message(validation, activation))
    return verdict


def message(validation: Mapping[str, Any], activation: dict[str, Any]) -> str:
    if "messageExpression" in validation:
        return str(_evaluate(validation["messageExpression"], activation))
    return str(validation["message"])


# --- field paths against the schemas (a stand-in for the API server's type checking) -----------------------

_SCHEMAS = os.path.join(os.path.dirname(kubernetes_validate.__file__), "kubernetes-json-schema")
MACROS = {"all", "exists", "exists_one", "filter", "map"}


@functools.cache
def definitions(version: str) -> dict[str, Any]:
    """The OpenAPI definitions of Kubernetes ``version`` (``1.30``) as kubernetes-validate ships them."""
    with open(os.path.join(_SCHEMAS, f"v{version}.0-local", "_definitions.json"), encoding="utf-8") as fh:
        return json.load(fh)["$defs"]


def _resolve(defs: Mapping[str, Any], schema: Mapping[str, Any]) -> Mapping[str, Any]:
    while "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _is_array(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "array" or (isinstance(kind, list) and "array" in kind)


def missing_fields(expression: str, roots: Mapping[str, str], version: str) -> list[str]:
    """Every ``root.a.b`` path of ``expression`` (``roots``: CEL name → definition, e.g. ``{"object":
    "io.k8s.api.core.v1.Pod"}``) that Kubernetes ``version``'s schema lacks. A path stops at a macro
    (``.all(``) on a list, or at a map's key."""
    defs = definitions(version)
    out = []
    names = "|".join(re.escape(r) for r in roots)
    for match in re.finditer(rf"(?<![\w.'])({names})((?:\.[A-Za-z_]\w*)+)", expression):
        root, path = match.group(1), match.group(2).lstrip(".").split(".")
        schema = _resolve(defs, defs[roots[root]])
        for step in path:
            if _is_array(schema) or "additionalProperties" in schema:
                if step not in MACROS:
                    out.append(f"{root}.{'.'.join(path)}")
                break
            props = schema.get("properties", {})
            if step not in props:
                out.append(f"{root}.{'.'.join(path)}")
                break
            schema = _resolve(defs, props[step])
    return out


def expressions(policy: Mapping[str, Any]) -> Iterable[str]:
    spec = policy["spec"]
    for group in ("matchConditions", "variables", "validations"):
        for item in spec.get(group, []):
            yield item["expression"]
            if "messageExpression" in item:
                yield item["messageExpression"]
