"""Two JSON plans compared as ``pulumi up`` would apply the second over the first: one step per resource.

Each step is ``create``, ``update`` (in place), ``replace``, ``delete`` or ``same``, with the changed
input paths (``diffReasons``, top-level like Pulumi's), the ones that force a replacement
(``replaceReasons``, from :mod:`~gpucluster.tools.plan.diff.safety`), ``dataLoss`` (a replacement or deletion
of a resource that holds data, protected or not) and ``disruption`` (:mod:`~gpucluster.tools.plan.
disruption`). The mock engine runs no provider diff, so the table is what makes a replacement visible.

Resources match on their *logical key*: the URN's type chain and the name without the cluster's prefix
(``slurm-p5-lustre-fs`` → ``lustre-fs``), so plans of two stacks with different names compare. Across
stacks, ids and the cluster name inside values are normalized before comparing (each plan's mock ids
are derived from its own names); user data is compared decoded.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from gpucluster.tools.plan.diff.carry import carry_replacements
from gpucluster.tools.plan.diff.disruption import add_disruption
from gpucluster.tools.plan.diff.images import image_lock_lines
from gpucluster.tools.plan.diff.safety import replace_reasons, safety_of
from gpucluster.tools.plan.diff.step import ABSENT, USER_DATA_KEYS, Comparison, FileChange, Step, flatten
from gpucluster.tools.plan.run.files import decode_user_data

ENCODED_CONTENT = re.compile(r"(content: )([A-Za-z0-9+/]{40,}={0,2})$", re.MULTILINE)
"""A ``write_files`` entry's gz+b64/b64 content inside cloud-config: the plan shows it decoded as a file."""


def readable_user_data(text: str) -> str:
    """Decoded user data with each encoded ``write_files`` content folded to a marker (its decoded text is
    a file of the plan of its own, diffed on its own)."""
    return ENCODED_CONTENT.sub(r"\1<encoded; decoded in the plan's files>", decode_user_data(text))


def top(path: str) -> str:
    """The top-level property of a leaf path (what Pulumi lists in ``diffReasons``)."""
    return path.split(".", 1)[0].split("[", 1)[0]


def prefix_of(doc: Mapping[str, Any]) -> str:
    """The prefix every logical name of a plan starts with: its cluster name (the stack by default)."""
    outputs = doc.get("outputs") or {}
    name = outputs.get("clusterName") if isinstance(outputs, Mapping) else None
    return str(name or doc.get("stack") or "")


def strip_prefix(name: str, prefix: str) -> str:
    if prefix and name.startswith(prefix + "-"):
        return name[len(prefix) + 1 :]
    return "" if name == prefix else name


def logical_key(resource: Mapping[str, Any], prefix: str) -> str:
    """``TYPECHAIN::name`` of a URN, without the stack, the project and the cluster's name prefix."""
    urn = str(resource["urn"])
    parts = urn.split("::")
    chain = parts[2] if len(parts) >= 4 else str(resource["type"])
    return f"{chain}::{strip_prefix(str(resource['name']), prefix)}"


GENERATED_HEX = re.compile(r"(?<![0-9A-Fa-f])(?=[0-9a-fA-F]*[0-9])[0-9a-fA-F]{7,}(?![0-9A-Fa-f])")
"""Hex runs of 7+ characters with a digit: what the mock engine derives from a resource's name (ids,
name suffixes, mount names). Across stacks these differ by construction, so they compare as equal."""

PRIVATE_IP = re.compile(r"(?<![\d.])(?:10|172|192)\.\d{1,3}\.\d{1,3}\.\d{1,3}(?![\d./])")
"""A private address (not a CIDR): the mock engine derives those from names too."""
MOCK_CA = re.compile(r'("certificate-authority-data": ")[^"]*')
"""The EKS cluster's CA in a kubeconfig: the mock's is the cluster's name, base64-encoded."""


class _Normalizer:
    """Rewrites a plan's ids, cluster name and generated hex to stack-independent tokens, for comparing
    across stacks (within one stack, values compare as they are)."""

    def __init__(self, doc: Mapping[str, Any], prefixes: tuple[str, str], keys: Mapping[str, str]) -> None:
        pairs = [(str(r["id"]), f"<id {keys[r['urn']]}>") for r in doc.get("resources", []) if r.get("id")]
        self.ids = dict(pairs)
        # An id that is the cluster's name (an EKS cluster's id is its name) is not replaced inside longer
        # texts: there it is the name, rewritten to ``<cluster>`` below on both sides alike.
        self.subs = sorted(((i, t) for i, t in pairs if len(i) >= 8 and i not in prefixes), key=lambda p: -len(p[0]))
        # Both plans' cluster names, as whole words, on both sides: a name that is also a word ("other")
        # then reads the same in both texts.
        names = sorted({p for p in prefixes if p}, key=len, reverse=True)
        self.cluster = re.compile("|".join(rf"(?<![\w-]){re.escape(p)}(?![\w])" for p in names)) if names else None

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            if value in self.ids:
                return self.ids[value]
            for old, token in self.subs:
                if old in value:
                    value = value.replace(old, token)
            value = self.cluster.sub("<cluster>", value) if self.cluster else value
            return MOCK_CA.sub(r"\1<ca>", PRIVATE_IP.sub("<ip>", GENERATED_HEX.sub("<hex>", value)))
        if isinstance(value, Mapping):
            return {k: self(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v) for v in value]
        return value


def _user_data_view(data: str) -> dict[str, str]:
    """User data as the text plus each file it writes, decoded: equal exactly when the user data is."""
    from gpucluster.tools.plan.run.files import cloud_config_files

    text = decode_user_data(data)
    return {"text": readable_user_data(text), **{k or "/": v for k, v in cloud_config_files("", text).items()}}


def _comparable(inputs: Mapping[str, Any], normalize: _Normalizer | None) -> dict[str, Any]:
    out = {k: _user_data_view(v) if k in USER_DATA_KEYS and isinstance(v, str) else v for k, v in inputs.items()}
    return flatten(normalize(out) if normalize else out)


# --- comparing ---------------------------------------------------------------------------------------


def compare(old: Mapping[str, Any], new: Mapping[str, Any]) -> Comparison:
    """The steps that turn ``old`` (a plan JSON) into ``new``; raises ``KeyError``/``TypeError`` on a
    document that is not a plan."""
    po, pn = prefix_of(old), prefix_of(new)
    before = {logical_key(r, po): r for r in old.get("resources", [])}
    after = {logical_key(r, pn): r for r in new.get("resources", [])}
    cross = po != pn or old.get("stack") != new.get("stack")
    norm_old = _Normalizer(old, (po, pn), {r["urn"]: k for k, r in before.items()}) if cross else None
    norm_new = _Normalizer(new, (po, pn), {r["urn"]: k for k, r in after.items()}) if cross else None
    steps: list[Step] = []
    for key in sorted(before.keys() | after.keys()):
        a, b = before.get(key), after.get(key)
        r = b or before[key]  # the key is in one side at least
        step = Step(
            op="same",
            key=key,
            type=str(r["type"]),
            name=str(r["name"]),
            urn=str(r["urn"]),
            custom=bool(r.get("custom", True)),
            old=a,
            new=b,
        )
        if a is None:
            step.op = "create"
        elif b is None:
            step.op = "delete"
        else:
            _classify(step, a, b, norm_old, norm_new)
        steps.append(step)
    carry_replacements(steps, str(new.get("region") or old.get("region") or "") or None)
    add_disruption(steps, new.get("files") or {})
    for step in steps:
        step.data_loss = _data_loss(step)
    return Comparison(
        old_stack=str(old.get("stack", "")),
        new_stack=str(new.get("stack", "")),
        project=str(new.get("project") or old.get("project") or ""),
        steps=steps,
        files=list(_file_changes(old, new, po, pn, norm_old, norm_new)),
        images=image_lock_lines(old, new),
    )


def _classify(step: Step, a: Mapping[str, Any], b: Mapping[str, Any], norm_old: Any, norm_new: Any) -> None:
    fa, fb = _comparable(a.get("inputs") or {}, norm_old), _comparable(b.get("inputs") or {}, norm_new)
    changed = sorted(k for k in fa.keys() | fb.keys() if fa.get(k, ABSENT) != fb.get(k, ABSENT))
    # ignore_changes: `pulumi up` keeps the existing resource's value, so these are no change (and no replacement).
    ignored = [str(p) for p in b.get("ignoreChanges") or ()]
    step.ignored = sorted({p for p in changed for i in ignored if p == i or p.startswith((i + ".", i + "["))})
    step.changed = [p for p in changed if p not in step.ignored]
    step.diff_reasons = sorted({top(p) for p in step.changed})
    for flag in ("protect", "retainOnDelete"):
        if bool(a.get(flag)) != bool(b.get(flag)):
            step.notes.append(f"{flag}: {bool(a.get(flag))} → {bool(b.get(flag))}")
    if not step.changed and not step.notes:
        return
    step.replace_reasons = replace_reasons(step.type, step.changed, a.get("inputs") or {}, b.get("inputs") or {})
    step.op = "replace" if step.replace_reasons else "update"


def _data_loss(step: Step) -> str | None:
    entry = safety_of(step.type)
    if step.op not in ("replace", "delete") or entry is None or entry.holds_data is None:
        return None
    doc = step.old or {}
    verb = "replacing" if step.op == "replace" else "deleting"
    why = f" (forced by {step.because()})" if step.replace_reasons else ""
    text = f"{verb} {step.name}{why} loses {entry.holds_data}"
    if doc.get("protect"):
        text += "; it is protected, so `pulumi up` stops before touching it"
    if doc.get("retainOnDelete"):
        text += (
            "; retained on delete: the old one stays in AWS, outside the stack"
            if step.op == "replace"
            else "; retained on delete: it stays in AWS, outside the stack"
        )
    return text


def detailed_diff(step: Step) -> dict[str, dict[str, Any]]:
    """Pulumi's ``detailedDiff``: each changed path with its kind (``add``/``delete``/``update``, and
    ``-replace`` when it forces a replacement)."""
    out: dict[str, dict[str, Any]] = {}
    for path in [*step.changed, *sorted(p for p in step.carried if p not in step.changed)]:
        before, after = step.value("old", path), step.value("new", path)
        kind = "add" if before == ABSENT else "delete" if after == ABSENT else "update"
        if any(path == r or path.startswith((r + ".", r + "[")) for r in step.replace_reasons):
            kind += "-replace"
        out[path] = {"kind": kind, "inputDiff": True}
    return out


def _file_changes(
    old: Mapping[str, Any], new: Mapping[str, Any], po: str, pn: str, norm_old: Any, norm_new: Any
) -> Iterator[FileChange]:
    fo = {strip_prefix(k, po): (k, v) for k, v in (old.get("files") or {}).items()}
    fn = {strip_prefix(k, pn): (k, v) for k, v in (new.get("files") or {}).items()}
    for key in sorted(fo.keys() | fn.keys()):
        a, b = fo.get(key), fn.get(key)
        if a is None and b is not None:
            yield FileChange(b[0], "create", None, b[1])
        elif b is None and a is not None:
            yield FileChange(a[0], "delete", a[1], None)
        elif a is not None and b is not None:
            before, after = a[1], b[1]
            if key.endswith("/user-data"):
                before, after = readable_user_data(before), readable_user_data(after)
            same = (norm_old(before) == norm_new(after)) if norm_old and norm_new else before == after
            if not same:
                yield FileChange(b[0], "update", before, after)
