"""What the mocks made up, said as what it stands for, for the text plan only.

Under the mock engine every id, ARN, generated name and looked-up AMI is a deterministic fake
(``ami-08fb…``, ``p5-training-data-00000000000049366199741689``) that reads as real. The text plan
shows each as its origin instead: "AMI from SSM /aws/service/…", "name set by AWS at create",
"(id of NAME, assigned at create)". The JSON plan keeps the fakes, so it stays exact and stable for
``plan diff``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from gpucluster.tools.plan.run.monitor import Registration

SKIP_STATE = {"ownerId", "status", "latestVersion", "defaultVersion"}
"""State the mocks fill in that is not an assigned id: the account, a Helm status, version numbers."""

_SSM = "aws:ssm/getParameter:getParameter"


def strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from strings(v)


def leaves(value: Any, key: str = "") -> Iterable[tuple[str, Any]]:
    """(the last key, value) of every leaf of a resource's state: an EKS cluster's OIDC issuer is nested."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from leaves(v, str(k))
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from leaves(v, key)
    else:
        yield key, value


def stand_ins(resources: list[Registration], calls: Iterable[tuple[str, Mapping[str, Any]]], region: str) -> dict[str, str]:
    """``{fake value: what it stands for}`` for one plan: the values the mocks assigned to each resource
    (in its state, not its inputs) and the AMIs they answered SSM parameter look-ups with."""
    from gpucluster.tools.plan.run.fakes import digest

    names = {r.name for r in resources}
    out: dict[str, str] = {}
    for token, args in calls:
        name = str(args.get("name"))
        if token == _SSM and ("ami" in name or "image" in name):
            out[f"ami-{digest(region, name)}"] = f"(AMI from SSM {name})"
    for r in resources:
        if not r.custom:
            continue
        chosen = set(strings(r.inputs))
        for key, value in sorted(leaves(r.state), key=lambda kv: kv[0]):
            if key in SKIP_STATE or not isinstance(value, str) or len(value) < 6 or value in chosen or value in names:
                continue
            if r.type == "aws:s3/bucket:Bucket" and key in ("id", "bucket") and r.inputs.get("bucketPrefix"):
                out[value] = f"{r.inputs['bucketPrefix']}… (name set by AWS at create)"
            else:
                out.setdefault(value, f"({'id' if key == 'id' else key} of {r.name}, assigned at create)")
    return out


def replacer(stand: Mapping[str, str]):
    """A function that rewrites every fake in a line of text (whole tokens, longest first)."""
    if not stand:
        return lambda text: text
    pattern = re.compile(r"(?<![\w.-])(" + "|".join(re.escape(k) for k in sorted(stand, key=len, reverse=True)) + r")(?![\w-])")
    return lambda text: pattern.sub(lambda m: stand[m.group(1)], text)
