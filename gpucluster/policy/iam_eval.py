"""A small offline evaluator of gpucluster's own IAM policy documents.

It answers one question for the tests and the policy rules: does this set of policy documents allow this
request? A request is one action on one resource with its condition keys, the *authorization context*: EC2
authorizes a RunInstances once per resource it reads or creates (the instance, each volume and interface, the
subnet, each security group, the image, the launch template…), and the call succeeds only when every one of
those contexts is allowed (:func:`authorize`).

What it implements, with IAM's documented semantics:

- ``Effect`` Allow/Deny: an explicit deny wins, then any allow, else the implicit deny.
- ``Action``/``NotAction`` with ``*`` and ``?`` wildcards, case-insensitive.
- ``Resource``/``NotResource``: ``*``, or an ARN matched segment by segment (partition, service, region, account,
  resource) with ``*``/``?`` wildcards; policy variables (``${aws:PrincipalTag/…}``) from the context.
- ``Principal`` (trust policies): ``*``, ``Service`` and ``AWS`` values, when the request names its principal.
- ``Condition``: every operator block and every key must match (AND); a key's values are alternatives (OR).
  Operators: ``StringEquals``, ``StringNotEquals``, ``StringEqualsIgnoreCase``, ``StringNotEqualsIgnoreCase``,
  ``StringLike``, ``StringNotLike``, ``ArnEquals``, ``ArnLike``, ``ArnNotEquals``, ``ArnNotLike``, ``Bool``,
  ``Null``, ``NumericEquals``/``NotEquals``/``LessThan``/``LessThanEquals``/``GreaterThan``/``GreaterThanEquals``;
  the ``IfExists`` suffix; the ``ForAllValues:``/``ForAnyValue:`` set prefixes. A key missing from the context
  fails a positive operator and satisfies a negated one (``StringNotEquals`` …); ``…IfExists`` is satisfied by a
  missing key; ``ForAllValues`` is satisfied by a missing or empty key, ``ForAnyValue`` is not. A multi-valued
  key under a plain operator matches when any of its values does. Condition key names are case-insensitive.

What it is not: AWS's evaluator. It knows nothing of service control policies, permission boundaries, session
policies, resource-based policies other than a trust policy handed to it, or which condition keys a service
really puts in a request context; a test that builds a context states that model itself. An operator it does
not know raises :class:`UnsupportedPolicy` instead of guessing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

ContextValue = str | bool | int | Sequence[str]

ALLOW, DENY, IMPLICIT_DENY = "allow", "explicit-deny", "implicit-deny"


class UnsupportedPolicy(ValueError):
    """A policy element this evaluator does not implement: refuse, never guess."""


@dataclass(frozen=True)
class Request:
    """One authorization context: ``action`` (``ec2:RunInstances``) on ``resource`` (an ARN) with the condition
    keys in ``context``; ``principal`` (``{"Service": "…"}``) only when a trust policy is evaluated."""

    action: str
    resource: str
    context: Mapping[str, ContextValue] = field(default_factory=lambda: {})
    principal: Mapping[str, str] | None = None

    def key(self, name: str) -> list[str] | None:
        """The values of condition key ``name`` (case-insensitive), ``None`` when the context lacks it."""
        wanted = name.lower()
        for k, v in self.context.items():
            if k.lower() == wanted:
                if isinstance(v, bool):
                    return ["true" if v else "false"]
                if isinstance(v, (str, int)):
                    return [str(v)]
                return [str(x) for x in v]
        return None


@dataclass(frozen=True)
class Decision:
    """The outcome for one request, and the statements (by Sid, or their index) that decided it."""

    result: str
    allowed_by: tuple[str, ...] = ()
    denied_by: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        return self.result == ALLOW


def statements(policies: Iterable[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    """Every statement of ``policies`` with a name: its Sid, or ``<policy index>.<statement index>``."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    for i, doc in enumerate(policies):
        body = doc.get("Statement", [])
        for j, st in enumerate([body] if isinstance(body, Mapping) else body):
            out.append((str(st.get("Sid") or f"{i}.{j}"), st))
    return out


def evaluate(policies: Iterable[Mapping[str, Any]], request: Request) -> Decision:
    """IAM's decision for ``request`` under ``policies`` (all of one principal, or one trust policy)."""
    allows: list[str] = []
    denies: list[str] = []
    for name, st in statements(policies):
        if statement_matches(st, request):
            (denies if st.get("Effect") == "Deny" else allows).append(name)
    if denies:
        return Decision(DENY, tuple(allows), tuple(denies))
    return Decision(ALLOW if allows else IMPLICIT_DENY, tuple(allows))


def authorize(policies: Sequence[Mapping[str, Any]], requests: Iterable[Request]) -> dict[str, Decision]:
    """The decision for each of a call's authorization contexts, by resource; the call is allowed only when
    every one is (``all(d.allowed for d in authorize(...).values())``)."""
    return {r.resource: evaluate(policies, r) for r in requests}


def statement_matches(st: Mapping[str, Any], request: Request) -> bool:
    """Whether one statement applies to ``request`` (action, resource, principal and every condition)."""
    if st.get("Effect") not in ("Allow", "Deny"):
        raise UnsupportedPolicy(f"Effect {st.get('Effect')!r}")
    if not _listed(st, "Action", "NotAction", lambda p: _glob(p.lower(), request.action.lower())):
        return False
    if ("Resource" in st or "NotResource" in st) and not _listed(
        st, "Resource", "NotResource", lambda p: _resource_matches(_substitute(p, request), request.resource)
    ):
        return False
    if "Principal" in st and request.principal is not None and not _principal_matches(st["Principal"], request.principal):
        return False
    return all(
        _operator_matches(op, key, _as_list(values), request)
        for op, block in (st.get("Condition") or {}).items()
        for key, values in block.items()
    )


def _as_list(value: Any) -> list[str]:
    items = value if isinstance(value, (list, tuple)) else [value]
    return ["true" if v is True else "false" if v is False else str(v) for v in items]


def _listed(st: Mapping[str, Any], positive: str, negative: str, match: Any) -> bool:
    if positive in st:
        return any(match(p) for p in _as_list(st[positive]))
    if negative in st:
        return not any(match(p) for p in _as_list(st[negative]))
    raise UnsupportedPolicy(f"a statement without {positive} or {negative}")


@lru_cache(maxsize=4096)
def _pattern(glob: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob), re.DOTALL)


def _glob(pattern: str, value: str) -> bool:
    return _pattern(pattern).fullmatch(value) is not None


def _arn_like(pattern: str, arn: str) -> bool:
    """ARN matching: six segments, each matched on its own (a wildcard does not cross a segment's ``:``,
    except in the resource part, which may hold colons)."""
    if pattern == "*":
        return True
    p, a = pattern.split(":", 5), arn.split(":", 5)
    return len(p) == len(a) == 6 and all(_glob(x, y) for x, y in zip(p, a, strict=True))


def _resource_matches(pattern: str, resource: str) -> bool:
    return pattern == "*" or _arn_like(pattern, resource)


_VARIABLE = re.compile(r"\$\{([^}]+)\}")


def _substitute(value: str, request: Request) -> str:
    """Policy variables (``${aws:PrincipalTag/x509Subject/CN}``) from the context; a variable the context lacks
    makes the element match nothing (IAM: the comparison fails)."""

    def one(m: re.Match[str]) -> str:
        got = request.key(m[1])
        return got[0] if got else "\x00unresolved\x00"

    return _VARIABLE.sub(one, value)


def _principal_matches(principal: Any, asked: Mapping[str, str]) -> bool:
    if principal == "*":
        return True
    if not isinstance(principal, Mapping):
        raise UnsupportedPolicy(f"Principal {principal!r}")
    return any(kind in asked and asked[kind] in _as_list(values) for kind, values in principal.items())


_STRING = ("StringEquals", "StringNotEquals", "StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase", "StringLike")
_KNOWN = {
    *_STRING,
    "StringNotLike",
    "ArnEquals",
    "ArnLike",
    "ArnNotEquals",
    "ArnNotLike",
    "Bool",
    "Null",
    "NumericEquals",
    "NumericNotEquals",
    "NumericLessThan",
    "NumericLessThanEquals",
    "NumericGreaterThan",
    "NumericGreaterThanEquals",
}
_NEGATED = {"StringNotEquals", "StringNotEqualsIgnoreCase", "StringNotLike", "ArnNotEquals", "ArnNotLike", "NumericNotEquals"}


def _compare(base: str, wanted: str, got: str) -> bool:
    if base in ("StringEquals", "StringNotEquals"):
        return wanted == got
    if base in ("StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase"):
        return wanted.lower() == got.lower()
    if base in ("StringLike", "StringNotLike"):
        return _glob(wanted, got)
    if base in ("ArnEquals", "ArnLike", "ArnNotEquals", "ArnNotLike"):
        return _arn_like(wanted, got)
    if base == "Bool":
        return wanted.lower() == got.lower()
    if base.startswith("Numeric"):
        return _numeric(base, wanted, got)
    raise UnsupportedPolicy(f"condition operator {base!r}")


def _numeric(base: str, wanted: str, got: str) -> bool:
    try:
        w, g = float(wanted), float(got)
    except ValueError:
        return False
    test = {
        "NumericEquals": g == w,
        "NumericNotEquals": g == w,  # negated by the caller
        "NumericLessThan": g < w,
        "NumericLessThanEquals": g <= w,
        "NumericGreaterThan": g > w,
        "NumericGreaterThanEquals": g >= w,
    }
    if base not in test:
        raise UnsupportedPolicy(f"condition operator {base!r}")
    return test[base]


def _operator_matches(op: str, key: str, wanted: list[str], request: Request) -> bool:
    qualifier, _, base = op.rpartition(":")
    if qualifier not in ("", "ForAllValues", "ForAnyValue"):
        raise UnsupportedPolicy(f"condition operator {op!r}")
    if_exists = base.endswith("IfExists")
    base = base.removesuffix("IfExists")
    if base not in _KNOWN:
        raise UnsupportedPolicy(f"condition operator {op!r}")
    got = request.key(key)
    wanted = [_substitute(w, request) for w in wanted]
    if base == "Null":
        if qualifier or if_exists:
            raise UnsupportedPolicy(f"condition operator {op!r}")
        return all((got is None) == (w.lower() == "true") for w in wanted[:1])
    negated = base in _NEGATED

    def one(value: str) -> bool:
        hit = any(_compare(base, w, value) for w in wanted)
        return not hit if negated else hit

    if qualifier == "ForAllValues":
        return got is None or all(one(v) for v in got)
    if qualifier == "ForAnyValue":
        return got is not None and any(one(v) for v in got)
    if got is None:
        return if_exists or negated
    return any(one(v) for v in got) if not negated else all(one(v) for v in got)
