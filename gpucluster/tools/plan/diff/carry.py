"""A replacement carried to what depends on it.

When ``pulumi up`` replaces a resource, AWS gives the new one a new id, ARN, address or DNS name; every resource
whose input holds one of those (an Output of the replaced resource) changes with it: the head node when its
network interface is replaced (``networkInterfaces`` forces a new instance), a volume attachment when its
instance is, a file system's data repository associations (``fileSystemId``), the launch templates whose user
data mounts the file system by its DNS name (a new version, so the groups on it roll or take it for new nodes),
the DNS record of the controller's address. Pulumi's own preview shows these as unknown ("output<string>") and
diffs them; the offline plan knows the references from the values: the mock engine derives every id and
attribute from the resource's type and name (:mod:`~gpucluster.tools.plan.run.mocks`), so the values AWS would
assign a replaced resource are worked out again from its recorded inputs and looked for in the inputs of every
other resource of the new plan (user data decoded).

A dependent is marked as the change its provider would make: ``replace`` where a carried path forces a new
resource (the safety table, :mod:`~gpucluster.tools.plan.diff.safety`), else ``update``; a dependent that is
replaced carries on to its own dependents. Each carried path records the replaced resources it comes from
(:attr:`Step.carried <gpucluster.tools.plan.diff.step.Step.carried>`), which the renderers name. Paths the new
program ignores (``ignore_changes``) are not carried, as ``pulumi up`` would not touch them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from gpucluster.tools.plan.diff.safety import replace_reasons
from gpucluster.tools.plan.diff.step import USER_DATA_KEYS, Step, flatten
from gpucluster.tools.plan.run.placeholders import SKIP_STATE, leaves, strings

MIN_LENGTH = 6
"""Shorter assigned values (a status, a version) say nothing about a reference."""


def assigned_values(resource: Mapping[str, Any], region: str | None) -> tuple[set[str], set[str]]:
    """``(tokens, exact)``: the values AWS assigns ``resource`` that change when it is replaced. ``tokens`` are
    looked for inside a dependent's values (ids, ARNs, addresses, DNS names, generated names); ``exact`` only as a
    whole value (an id that is a name the program chose: a replacement keeps the text, not the identity)."""
    rid = resource.get("id")
    inputs = resource.get("inputs") or {}
    chosen = set(strings(inputs))
    tokens: set[str] = set()
    exact: set[str] = set()
    if isinstance(rid, str) and rid:
        (exact if rid in chosen else tokens).add(rid)
    for key, value in leaves(_state(resource, region)):
        if key in SKIP_STATE or not isinstance(value, str) or len(value) < MIN_LENGTH or value in chosen:
            continue
        tokens.add(value)
    return tokens, exact - tokens


def _state(resource: Mapping[str, Any], region: str | None) -> dict[str, Any]:
    """What the mock engine filled in on ``resource`` when it was planned, worked out again from its type, name and
    inputs (nothing when that does not give back its recorded id: a resource read, or faked by a test)."""
    from pulumi.runtime.mocks import MockResourceArgs

    from gpucluster.facts.catalog import load_catalog
    from gpucluster.tools.plan.run.mocks import PlanMocks

    if not resource.get("custom", True) or not resource.get("id"):
        return {}
    mocks = PlanMocks(region=region or "us-east-1", catalog=load_catalog())
    args = MockResourceArgs(str(resource["type"]), str(resource["name"]), dict(resource.get("inputs") or {}), "", "", True)
    rid, state = mocks.new_resource(args)
    return state if rid == resource.get("id") else {}


def _searchable(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """A resource's input leaves, user data decoded (with the files its cloud-config writes) under its own key."""
    from gpucluster.tools.plan.run.files import cloud_config_files, decode_user_data

    out: dict[str, Any] = {}
    for key, value in inputs.items():
        if key in USER_DATA_KEYS and isinstance(value, str):
            text = decode_user_data(value)
            out[key] = "\n".join([text, *cloud_config_files("", text).values()])
        else:
            out.update(flatten(value, key))
    return out


class _Matcher:
    """Finds a replaced resource's assigned values in a dependent's input leaves."""

    def __init__(self, tokens: set[str], exact: set[str]) -> None:
        ordered = sorted(tokens, key=len, reverse=True)
        self.pattern = (
            re.compile(r"(?<![\w.-])(?:" + "|".join(re.escape(v) for v in ordered) + r")(?![\w-])") if ordered else None
        )
        self.exact = exact

    def paths(self, leaves_: Mapping[str, Any]) -> Iterator[str]:
        for path, value in leaves_.items():
            if not isinstance(value, str):
                continue
            if value in self.exact or (self.pattern is not None and self.pattern.search(value)):
                yield path


def _ignored(step: Step, path: str) -> bool:
    ignored = [str(p) for p in (step.new or {}).get("ignoreChanges") or ()]
    return any(path == i or path.startswith((i + ".", i + "[")) for i in ignored)


def carry_replacements(steps: Sequence[Step], region: str | None) -> None:
    """Mark every step whose inputs hold a value of a replaced resource as updated or replaced (see the module doc),
    until no new replacement follows."""
    dependents = [s for s in steps if s.custom and s.new is not None and s.op in ("same", "update", "replace")]
    searchable = {s.key: _searchable((s.new or {}).get("inputs") or {}) for s in dependents}
    queue = [s for s in steps if s.op == "replace" and s.new is not None]
    done: set[str] = set()
    while queue:
        replaced = queue.pop(0)
        if replaced.key in done:
            continue
        done.add(replaced.key)
        matcher = _Matcher(*assigned_values(replaced.new or {}, region))
        for s in dependents:
            if s.key == replaced.key:
                continue
            paths = [p for p in matcher.paths(searchable[s.key]) if not _ignored(s, p)]
            if paths and _carry(s, replaced.name, paths):
                queue.append(s)


def _carry(step: Step, cause: str, paths: list[str]) -> bool:
    """Carry ``cause``'s replacement into ``step`` through ``paths``; True when that makes ``step`` a replacement."""
    for path in paths:
        names = step.carried.setdefault(path, [])
        if cause not in names:
            names.append(cause)
    step.diff_reasons = sorted({*step.diff_reasons, *(p.split(".", 1)[0].split("[", 1)[0] for p in paths)})
    old, new = (step.old or {}).get("inputs") or {}, (step.new or {}).get("inputs") or {}
    reasons = replace_reasons(step.type, sorted({*step.changed, *step.carried}), old, new)
    was = step.op
    step.replace_reasons = reasons
    step.op = "replace" if reasons else "update"
    return step.op == "replace" and was != "replace"
