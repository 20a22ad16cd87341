# pyright: strict
"""EC2 instance topology -> Slurm topology.conf (topology/tree): the agent writes it after every resume
(power/topology_pass.py), the control plane writes the first one, before any node runs, the same way
(render/slurm/conf.py).

DescribeInstanceTopology gives each running instance its network nodes, top layer first and
the node the instance hangs off last (3 or 4 layers). Each network node becomes a switch:
a switch lists its child switches, the bottom one lists the Slurm nodes. Nodes without topology
(not launched, not running yet, or an instance type EC2 does not map) go under one switch per node
group, ``unplaced-<group>``, so every node stays reachable; when there is more than one top switch
they all hang off ``root``, so a job may still span them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from . import hostlist

HEADER = (
    "# Slurm topology/tree, written by gpucluster-agents from EC2 DescribeInstanceTopology.",
    "# Regenerated after every resume; local edits are overwritten.",
)
ROOT = "root"


def render_topology(
    placements: Mapping[str, Sequence[str]],
    groups: Iterable[tuple[str, Sequence[str]]],
) -> list[str]:
    """Lines of topology.conf (no trailing newlines).

    placements: Slurm node -> network nodes, top layer first (DescribeInstanceTopology order).
    groups: (group name, every Slurm node of the group) - nodes missing from placements are unplaced.
    """
    children: dict[str, set[str]] = {}
    leaf_nodes: dict[str, set[str]] = {}
    parents: dict[str, set[str]] = {}
    for node, chain in placements.items():
        chain = [c for c in chain if c]
        if not chain:
            continue
        for upper, lower in zip(chain, chain[1:]):
            children.setdefault(upper, set()).add(lower)
            parents.setdefault(lower, set()).add(upper)
        for sw in chain:
            children.setdefault(sw, set())
        leaf_nodes.setdefault(chain[-1], set()).add(node)

    # A switch listing both switches and nodes is not allowed: give its nodes their own leaf.
    for sw in sorted(leaf_nodes):
        if children.get(sw):
            extra = f"{sw}-nodes"
            children[sw].add(extra)
            children[extra] = set()
            parents.setdefault(extra, set()).add(sw)
            leaf_nodes[extra] = leaf_nodes.pop(sw)

    placed = {n for n, chain in placements.items() if any(chain)}
    for name, nodes in groups:
        rest = [n for n in nodes if n not in placed]
        if rest:
            sw = f"unplaced-{name}"
            children[sw] = set()
            leaf_nodes[sw] = set(rest)

    tops = sorted(sw for sw in children if not parents.get(sw))
    if len(tops) > 1:
        children[ROOT] = set(tops)
        for t in tops:
            parents.setdefault(t, set()).add(ROOT)

    # Depth from the top, to print leaves first and the root last.
    depth: dict[str, int] = {}

    def walk(sw: str, d: int, seen: tuple[str, ...]) -> None:
        if sw in seen:
            return
        if depth.get(sw, -1) >= d:
            return
        depth[sw] = d
        for c in children.get(sw, ()):
            walk(c, d + 1, (*seen, sw))

    for t in [ROOT] if len(tops) > 1 else tops:
        walk(t, 0, ())

    lines: list[str] = list(HEADER)
    for sw in sorted(children, key=lambda s: (-depth.get(s, 0), s)):
        if sw in leaf_nodes:
            lines.append(f"SwitchName={sw} Nodes={hostlist.compress(leaf_nodes[sw])}")
        elif children[sw]:
            lines.append(f"SwitchName={sw} Switches={','.join(sorted(children[sw]))}")
    return lines
