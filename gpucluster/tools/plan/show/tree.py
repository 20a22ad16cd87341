"""The plan's resource tree: components and the resources under them, each described
(:mod:`gpucluster.tools.plan.show.describe`).

Two forms. The full tree (``--full-tree``) gives every resource its own lines. The default, compact tree
keeps every resource but folds siblings of one type into one line (``×N`` with every name and every
description), repeated components of one kind into one node, and a resource that only serves one sibling onto
that sibling's line (:func:`_belongs_to`: an instance's own network interface, a role's policies), so a
stack of 85 resources reads on a screen: nothing that changes what ``pulumi up`` creates is left out, only
repeated labels."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from gpucluster.tools.plan.run.engine import Plan
from gpucluster.tools.plan.run.monitor import Registration
from gpucluster.tools.plan.show.describe import DESCRIBERS
from gpucluster.tools.plan.show.policy import summary_parts
from gpucluster.tools.plan.show.width import elide

Rewrite = Callable[[str], str]


def short_type(token: str) -> str:
    """``aws:ec2/launchTemplate:LaunchTemplate`` → ``aws:ec2:LaunchTemplate``."""
    parts = token.split(":")
    if len(parts) == 3 and "/" in parts[1]:
        return f"{parts[0]}:{parts[1].split('/')[0]}:{parts[2]}"
    return token


def sorted_resources(plan: Plan) -> list[Registration]:
    """Components first, then by type and name: stable whatever order the runtime registered them in."""
    return sorted(plan.resources, key=lambda r: (r.custom, r.type, r.name))


def _marks(r: Registration) -> str:
    marks = [m for m, on in (("protected", r.protect), ("retained on delete", r.retain_on_delete)) if on]
    return f"  [{', '.join(marks)}]" if marks else ""


def _roots(plan: Plan) -> list[Registration]:
    urns = {x.urn for x in plan.resources}
    return [r for r in sorted_resources(plan) if r.parent is None or r.parent not in urns]


@dataclass(frozen=True)
class _Fit:
    """How wide a line may be (None: as wide as its content) and whether to keep every part (``--detail``: the
    report wraps the long lines) or elide what does not fit (``… and N more``)."""

    width: int | None = None
    detail: bool = False
    stem: str = ""
    """The enclosing component's name and ``-``: where names are elided, a child's name says only the rest
    (``…-head`` under ``SlurmCluster slurm-p5-slurm``)."""

    @property
    def elides(self) -> bool:
        return self.width is not None and not self.detail

    def line(self, head: str, parts: list[str], sep: str = " · ") -> str:
        if self.width is None or self.detail:
            return head + sep.join(parts)
        if "  — " in head and len(head) + 12 > self.width:  # no room for a description: the name and marks, whole
            return head.rpartition("  — ")[0]
        return elide(head, [self.rel(p.replace(_AT_CREATE, ")")) for p in parts], self.width, sep, count=sep != " · ")

    def rel(self, text: str) -> str:
        """``text`` with the enclosing component's names relative to it, where names are elided."""
        if not self.elides or not self.stem:
            return text
        return re.sub(rf"(?<![\w-]){re.escape(self.stem)}(?=[\w{{])", "…-", text)

    def under(self, node: _Node) -> _Fit:
        """The fit of a component's children."""
        names = _names(node.members)
        return replace(self, stem=names.split("{")[0] if "{" in names else names + "-")

    def names(self, members: list[Registration], room: int) -> str:
        """:func:`_names`, the braced list elided to ``room`` columns (at least 40) where names are elided."""
        whole = self.rel(_names(members)) if members[0].custom else _names(members)
        room = max(room, 40)
        if not self.elides or len(whole) <= room or "{" not in whole:
            return whole
        stem, inner = whole[:-1].split("{", 1)
        return elide(stem + "{", inner.split(","), room - 1, ",", first=True) + "}"


def tree_lines(
    plan: Plan, *, full: bool = False, rewrite: Rewrite = str, width: int | None = None, detail: bool = False
) -> list[str]:
    """The tree, one root after another; ``rewrite`` turns each description line's mock values into
    what they stand for (:mod:`gpucluster.tools.plan.run.placeholders`). With a ``width``, a description that
    does not fit is elided (``… and N more``) unless ``detail`` keeps it whole."""
    out: list[str] = []
    kids: dict[str | None, list[Registration]] = {}
    fit = _Fit(width, detail)
    for r in sorted_resources(plan):
        kids.setdefault(r.parent, []).append(r)
    for root in _roots(plan):
        if full:
            _full(root, kids, "", out, last=True, is_root=True, rewrite=rewrite, fit=fit)
        else:
            _compact(_Node([root]), kids, "", out, last=True, is_root=True, rewrite=rewrite, fit=fit)
    return out


def _full(
    r: Registration,
    kids: dict[str | None, list[Registration]],
    prefix: str,
    out: list[str],
    *,
    last: bool,
    rewrite: Rewrite,
    fit: _Fit,
    is_root: bool = False,
) -> None:
    label = f"{r.type.split(':')[-1]} {r.name}" if not r.custom else f"{short_type(r.type)}  {r.name}"
    branch = "" if is_root else ("└─ " if last else "├─ ")
    out.append(f"{prefix}{branch}{label}{_marks(r)}")
    child_prefix = prefix if is_root else prefix + ("   " if last else "│  ")
    describer = DESCRIBERS.get(r.type)
    if describer and r.custom:
        for line in describer(r.inputs):
            out.append(fit.line(f"{child_prefix}      ", split_parts(rewrite(line))))
    children = kids.get(r.urn, [])
    for n, kid in enumerate(children):
        _full(kid, kids, child_prefix, out, last=n == len(children) - 1, rewrite=rewrite, fit=fit)


@dataclass
class _Node:
    """Siblings of one type shown as one entry (one resource, or ×N)."""

    members: list[Registration] = field(default_factory=list)

    @property
    def first(self) -> Registration:
        return self.members[0]


def _group(children: list[Registration]) -> list[_Node]:
    """Siblings by type; roles and launch templates each on their own (what each node may do, what each boots
    with: a line each)."""
    nodes: dict[str, _Node] = {}
    for r in children:
        nodes.setdefault(r.urn if r.type in _A_LINE_EACH else r.type, _Node()).members.append(r)
    return list(nodes.values())


def _names(members: list[Registration]) -> str:
    """``a-b-x, a-b-y`` → ``a-b-{x,y}``: every name, the common prefix once."""
    names = [m.name for m in members]
    if len(names) == 1:
        return names[0]
    common = names[0]
    for n in names[1:]:
        while not n.startswith(common):
            common = common[:-1]
    cut = common.rfind("-") + 1
    return f"{names[0][:cut]}{{{','.join(n[cut:] for n in names)}}}"


def _compact(
    node: _Node,
    kids: dict[str | None, list[Registration]],
    prefix: str,
    out: list[str],
    *,
    last: bool,
    rewrite: Rewrite,
    fit: _Fit,
    is_root: bool = False,
    held: dict[str, list[Registration]] | None = None,
) -> None:
    r, count = node.first, len(node.members)
    kind = short_type(r.type) if r.custom else r.type.split(":")[-1]
    times = f" ×{count}" if count > 1 else ""
    marks = sorted({_marks(m) for m in node.members})
    branch = "" if is_root else ("└─ " if last else "├─ ")
    gap = "  " if r.custom else " "  # as in the full tree
    lead = f"{prefix}{branch}{kind}{times}{gap}"
    room = (fit.width or 0) - len(lead) - len("".join(marks)) - 40  # leave a description 40 columns
    header = f"{lead}{fit.names(node.members, room)}{''.join(marks)}"
    child_prefix = prefix if is_root else prefix + ("   " if last else "│  ")
    held = held or {}
    # Each member's description on the resource's own line; members in the order of the names.
    described = [_member_parts(m, held, rewrite, fit) for m in node.members] if r.custom and r.type in DESCRIBERS else []
    if described and all(d == described[0] for d in described):  # one description, said once
        out.append(fit.line(f"{header}  — {'each ' if count > 1 and fit.elides else ''}", described[0]))
    elif described:
        out.append(_members_line(fit, f"{header}  — ", described))
    else:
        out.append(header)
    siblings = [k for m in node.members for k in kids.get(m.urn, [])]
    owned = _belongs_to(siblings, kids)
    children = _group([k for k in siblings if k.urn not in owned])
    if r.custom and children:  # a resource's own children (a namespace's NetworkPolicies) ride on its line
        labels = [_label(c, named=not fit.elides) for c in children]
        if fit.elides:  # fitted to a width: on a row of their own under it, counted
            out.append(fit.line(f"{child_prefix}      with ", labels, ", "))
        else:
            out[-1] += " · with " + ", ".join(labels)
        return
    plain = [c for c in children if _plain(c) or (fit.elides and _many(c, kids))]
    if len(plain) > 1:  # resources with nothing to describe: one line for all of them
        children = [c for c in children if c not in plain] + [_Node(members=[m for c in plain for m in c.members])]
    fit = fit if r.custom else fit.under(node)
    for n, kid in enumerate(children):
        last = n == len(children) - 1
        if len({m.type for m in kid.members}) > 1:
            branch = "└─ " if last else "├─ "
            labels = [_label(c, named=not fit.elides) for c in _group(kid.members)]
            out.append(fit.line(f"{child_prefix}{branch}", labels, ", "))
        else:
            _compact(kid, kids, child_prefix, out, last=last, rewrite=rewrite, fit=fit, held=_held(owned, siblings))


def _members_line(fit: _Fit, head: str, described: list[list[str]]) -> str:
    """Siblings' descriptions, ``|``-separated: as many whole ones as fit and the others counted, or where not even
    the first fits, the first one elided and the others counted."""
    line = fit.line(head, [" · ".join(p) for p in described], " | ")
    if not fit.elides or len(described) < 2 or not line.endswith(" …") or "  — " not in line:
        return line
    tail = f" | … and {len(described) - 1} more"
    first = replace(fit, width=(fit.width or 0) - len(tail)).line(head, described[0])
    return first + tail if "  — " in first else first


def _many(node: _Node, kids: dict[str | None, list[Registration]]) -> bool:
    """Three or more unprotected siblings of one type described each differently (a security group's rules, a
    bucket's objects), where the plan is fitted to a width: their line would show the first and count the others,
    so they join the line of resources counted by type. Never roles and policies."""
    r = node.first
    describer = DESCRIBERS.get(r.type)
    if len(node.members) < 3 or not r.custom or describer is None or r.type.startswith("aws:iam/"):
        return False
    if any(m.protect or m.retain_on_delete or kids.get(m.urn) for m in node.members):
        return False
    return len({tuple(describer(m.inputs)) for m in node.members}) > 1


def _plain(node: _Node) -> bool:
    """A custom resource with no description, no protection and no children."""
    r = node.first
    return r.custom and r.type not in DESCRIBERS and not any(m.protect or m.retain_on_delete for m in node.members)


def _label(node: _Node, *, named: bool = True) -> str:
    """``type ×N names``; without the names where the plan is fitted to a width (the types and counts)."""
    count = len(node.members)
    label = f"{short_type(node.first.type)}{f' ×{count}' if count > 1 else ''}"
    return f"{label} {_names(node.members)}" if named else label


_OWNED_BY = {
    # owned type → (owner type, how the owned resource names its owner)
    "aws:ec2/networkInterface:NetworkInterface": "aws:ec2/instance:Instance",
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": "aws:iam/role:Role",
    "aws:iam/rolePolicy:RolePolicy": "aws:iam/role:Role",
}


def _names_owner(owned: Registration, owner: Registration) -> bool:
    if owned.type != "aws:ec2/networkInterface:NetworkInterface":  # a role's attachment or inline policy
        return owned.inputs.get("role") in (owner.state.get("name"), owner.id)
    interfaces = owner.inputs.get("networkInterfaces") or []
    return owned.id is not None and any(n.get("networkInterfaceId") == owned.id for n in interfaces if isinstance(n, dict))


def _belongs_to(siblings: list[Registration], kids: dict[str | None, list[Registration]]) -> dict[str, Registration]:
    """Siblings that only serve one other sibling, by urn → that sibling: a network interface one instance is
    attached by (and no other), a role's policy attachment or inline policy. Not when protected or a parent."""
    out: dict[str, Registration] = {}
    for r in siblings:
        owner_type = _OWNED_BY.get(r.type)
        if owner_type is None or r.protect or r.retain_on_delete or kids.get(r.urn):
            continue
        owners = [o for o in siblings if o.type == owner_type and _names_owner(r, o)]
        if len(owners) == 1:
            out[r.urn] = owners[0]
    return out


def _held(owned: dict[str, Registration], siblings: list[Registration]) -> dict[str, list[Registration]]:
    """owner urn → the resources shown on its line."""
    by_urn = {s.urn: s for s in siblings}
    held: dict[str, list[Registration]] = {}
    for urn, owner in owned.items():
        held.setdefault(owner.urn, []).append(by_urn[urn])
    return held


_AT_CREATE = ", assigned at create)"
"""Said of every stand-in (:mod:`~gpucluster.tools.plan.run.placeholders`); the elided tree leaves it to the
stand-in's brackets: ``(id of slurm-p5-network-vpc)``."""

_A_LINE_EACH = {"aws:iam/role:Role", "aws:ec2/launchTemplate:LaunchTemplate"}
"""Types the compact tree never folds into ``×N``."""

_INLINE = "aws:iam/rolePolicy:RolePolicy"


def split_parts(text: str) -> list[str]:
    """``a · b (c · d) · e`` → ``["a", "b (c · d)", "e"]``: the parts of a description, never inside brackets."""
    parts, depth, start = [], 0, 0
    for n, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and text.startswith(" · ", n):
            parts.append(text[start:n])
            start = n + 3
    return [*parts, text[start:]] if text else []


def _member_parts(r: Registration, held: dict[str, list[Registration]], rewrite: Rewrite, fit: _Fit) -> list[str]:
    """``r``'s description with what it holds, as parts: an interface named where the instance's description gives
    its id (with the interface's own description), policy attachments after a role's, and its inline policies
    summarised (:mod:`gpucluster.tools.plan.show.policy`; every statement: ``--detail``), named where names are not
    elided."""
    if r.type == _INLINE and fit.elides:  # a policy of its own: summarised
        return summary_parts([r.inputs.get("policy")])
    text = " · ".join(DESCRIBERS[r.type](r.inputs))
    inline = [o for o in held.get(r.urn, []) if o.type == _INLINE]
    for owned in held.get(r.urn, []):
        if owned.type == _INLINE:
            continue
        describer = DESCRIBERS.get(owned.type)
        what = " · ".join(describer(owned.inputs)) if describer else ""
        label = f"{owned.name} ({what})" if what else owned.name
        if owned.id is not None and owned.type == "aws:ec2/networkInterface:NetworkInterface" and owned.id in text:
            text = text.replace(owned.id, label)
        else:
            text += f" · + {label}"
    parts = split_parts(rewrite(text))
    if inline:  # the inline policies' summary before the attachments
        first, *rest = summary_parts(o.inputs.get("policy") for o in inline)
        parts[1:1] = [first, *rest] if fit.elides else [f"+ {_names(inline)}", first, *rest]
    return parts
