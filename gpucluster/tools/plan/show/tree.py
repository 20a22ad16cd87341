"""The plan's resource tree: components and the resources under them, each described
(:mod:`gpucluster.tools.plan.show.describe`).

Two forms. The full tree (``--full-tree``) gives every resource its own lines. The default, compact tree
keeps every resource but folds siblings of one type into one line (``×N`` with every name and every
description), repeated components of one kind into one node, and a resource that only serves one sibling onto
that sibling's line (:func:`_belongs_to`: an instance's own network interface, a role's policies), so a
stack of 85 resources reads on a screen: nothing that changes what ``pulumi up`` creates is left out, only
repeated labels."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gpucluster.tools.plan.run.engine import Plan
from gpucluster.tools.plan.run.monitor import Registration
from gpucluster.tools.plan.show.describe import DESCRIBERS

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


def tree_lines(plan: Plan, *, full: bool = False, rewrite: Rewrite = str) -> list[str]:
    """The tree, one root after another; ``rewrite`` turns each description line's mock values into
    what they stand for (:mod:`gpucluster.tools.plan.run.placeholders`)."""
    out: list[str] = []
    kids: dict[str | None, list[Registration]] = {}
    for r in sorted_resources(plan):
        kids.setdefault(r.parent, []).append(r)
    for root in _roots(plan):
        if full:
            _full(root, kids, "", out, last=True, is_root=True, rewrite=rewrite)
        else:
            _compact(_Node([root]), kids, "", out, last=True, is_root=True, rewrite=rewrite)
    return out


def _full(
    r: Registration,
    kids: dict[str | None, list[Registration]],
    prefix: str,
    out: list[str],
    *,
    last: bool,
    rewrite: Rewrite,
    is_root: bool = False,
) -> None:
    label = f"{r.type.split(':')[-1]} {r.name}" if not r.custom else f"{short_type(r.type)}  {r.name}"
    branch = "" if is_root else ("└─ " if last else "├─ ")
    out.append(f"{prefix}{branch}{label}{_marks(r)}")
    child_prefix = prefix if is_root else prefix + ("   " if last else "│  ")
    describer = DESCRIBERS.get(r.type)
    if describer and r.custom:
        for line in describer(r.inputs):
            out.append(f"{child_prefix}      {rewrite(line)}")
    children = kids.get(r.urn, [])
    for n, kid in enumerate(children):
        _full(kid, kids, child_prefix, out, last=n == len(children) - 1, rewrite=rewrite)


@dataclass
class _Node:
    """Siblings of one type shown as one entry (one resource, or ×N)."""

    members: list[Registration] = field(default_factory=list)

    @property
    def first(self) -> Registration:
        return self.members[0]


def _group(children: list[Registration]) -> list[_Node]:
    nodes: dict[str, _Node] = {}
    for r in children:
        nodes.setdefault(r.type, _Node()).members.append(r)
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
    is_root: bool = False,
    held: dict[str, list[Registration]] | None = None,
) -> None:
    r, count = node.first, len(node.members)
    kind = short_type(r.type) if r.custom else r.type.split(":")[-1]
    times = f" ×{count}" if count > 1 else ""
    marks = sorted({_marks(m) for m in node.members})
    branch = "" if is_root else ("└─ " if last else "├─ ")
    gap = "  " if r.custom else " "  # as in the full tree
    out.append(f"{prefix}{branch}{kind}{times}{gap}{_names(node.members)}{''.join(marks)}")
    child_prefix = prefix if is_root else prefix + ("   " if last else "│  ")
    describer = DESCRIBERS.get(r.type)
    held = held or {}
    details = ""
    if describer and r.custom:
        # Each member's description on the resource's own line, lines joined; members in the order of the names.
        details = " | ".join(rewrite(_with_owned(m, " · ".join(describer(m.inputs)), held)) for m in node.members)
    out[-1] += f"  — {details}" if details else ""
    siblings = [k for m in node.members for k in kids.get(m.urn, [])]
    owned = _belongs_to(siblings, kids)
    children = _group([k for k in siblings if k.urn not in owned])
    if r.custom and children:  # a resource's own children (a namespace's NetworkPolicies) ride on its line
        out[-1] += " · with " + ", ".join(_label(c) for c in children)
        return
    plain = [c for c in children if _plain(c)]
    if len(plain) > 1:  # resources with nothing to describe: one line for all of them
        children = [c for c in children if not _plain(c)] + [_Node(members=[m for c in plain for m in c.members])]
    for n, kid in enumerate(children):
        last = n == len(children) - 1
        if len({m.type for m in kid.members}) > 1:
            branch = "└─ " if last else "├─ "
            out.append(f"{child_prefix}{branch}" + ", ".join(_label(c) for c in _group(kid.members)))
        else:
            _compact(kid, kids, child_prefix, out, last=last, rewrite=rewrite, held=_held(owned, siblings))


def _plain(node: _Node) -> bool:
    """A custom resource with no description, no protection and no children."""
    r = node.first
    return r.custom and r.type not in DESCRIBERS and not any(m.protect or m.retain_on_delete for m in node.members)


def _label(node: _Node) -> str:
    count = len(node.members)
    return f"{short_type(node.first.type)}{f' ×{count}' if count > 1 else ''} {_names(node.members)}"


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


def _with_owned(r: Registration, text: str, held: dict[str, list[Registration]]) -> str:
    """``r``'s description with what it holds: an interface named where the instance's description gives its id
    (with the interface's own description), policies after a role's."""
    for owned in held.get(r.urn, []):
        describer = DESCRIBERS.get(owned.type)
        what = " · ".join(describer(owned.inputs)) if describer else ""
        label = f"{owned.name} ({what})" if what else owned.name
        if owned.id is not None and owned.type == "aws:ec2/networkInterface:NetworkInterface" and owned.id in text:
            text = text.replace(owned.id, label)
        else:
            text += f" · + {label}"
    return text
