# pyright: strict
"""What exists: the cluster's instances as listed at the start of a call, kept current as the call
tags and terminates them, and which node group a Slurm node name belongs to. Every other part of the
agent decides from this one view, so a decision never rests on a second, staler DescribeInstances."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ..contract import TAG_NODE_NAME, AgentConfig, hostlist
from .ec2 import Instance


def fmt_nodes(nodes: Iterable[str]) -> str:
    """Node names as one hostlist for a log line (``-`` for none), so a 1000-node line stays short."""
    names = list(nodes)
    return hostlist.compress(names) if names else "-"


class Inventory:
    """The cluster's not-terminated instances, as listed at the start of a call and kept current."""

    def __init__(self, instances: Iterable[Instance]) -> None:
        self.by_id: dict[str, Instance] = {}
        self._by_node: dict[str, set[str]] = {}
        for inst in instances:
            self.put(inst)

    def all(self) -> list[Instance]:
        return sorted(self.by_id.values(), key=lambda i: i.id)

    def of_node(self, node: str) -> list[Instance]:
        return sorted((self.by_id[i] for i in self._by_node.get(node, ())), key=lambda i: i.id)

    def live_of_node(self, node: str) -> list[Instance]:
        return [i for i in self.of_node(node) if i.live]

    def put(self, inst: Instance) -> None:
        self.drop([inst.id])
        self.by_id[inst.id] = inst
        if inst.node is not None:
            self._by_node.setdefault(inst.node, set()).add(inst.id)

    def drop(self, ids: Iterable[str]) -> None:
        for iid in list(ids):
            old = self.by_id.pop(iid, None)
            if old is not None and old.node is not None:
                self._by_node.get(old.node, set()).discard(iid)

    def tag_node(self, iid: str, node: str) -> None:
        inst = self.by_id.get(iid)
        if inst is not None:
            tags = dict(inst.tags)
            tags[TAG_NODE_NAME] = node
            self.put(replace(inst, tags=tags))


def best_instance(instances: list[Instance]) -> Instance:
    """The instance to keep when a node has several: running before pending, then the oldest."""
    return sorted(instances, key=lambda i: (i.state != "running", i.launch_time, i.id))[0]


def split_by_group(cfg: AgentConfig, nodes: Iterable[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Slurm's node names by node group (each list in hostlist order, no repeats), and those of no group."""
    by_group: dict[str, list[str]] = {}
    unknown: list[str] = []
    for n in nodes:
        g = cfg.group_of_node(n)
        if g is None:
            unknown.append(n)
        else:
            by_group.setdefault(g.name, [])
            if n not in by_group[g.name]:
                by_group[g.name].append(n)
    for names in by_group.values():
        names.sort(key=hostlist.order_key)
    return by_group, unknown


def is_dynamic(cfg: AgentConfig, group_name: str | None) -> bool:
    """True for instances of a dynamic node group of the config (the agent launches and terminates those)."""
    g = cfg.group(group_name) if group_name else None
    return g is not None and not g.static
