# pyright: strict
"""The sweep every call starts with: repair what earlier calls left behind, so a crash of any
earlier call is undone by the next one. Three layers, in order (the module docstring of
``agent.py`` says why each exists): launches that crashed between CreateFleet and the end of
tagging (from the launch journal: adopt or terminate), untagged instances nobody accounts for, and
a node's second, stopped or powered-down instance. Only dynamic node groups' instances are ever
terminated here; static groups belong to their Auto Scaling group."""

from __future__ import annotations

import logging
from typing import Any, Callable

from .contract import AgentConfig
from .ec2 import Ec2, Instance
from .inventory import Inventory, best_instance, is_dynamic
from .launcher import terminate
from .slurm import NodeState
from .state import StateDir

log = logging.getLogger("gpucluster_agents")


def sweep(
    cfg: AgentConfig,
    ec2: Ec2,
    state: StateDir,
    inv: Inventory,
    states: dict[str, NodeState] | None,
    wanted: set[str],
    now: float,
    handled: frozenset[str] = frozenset(),
) -> list[tuple[str, str]]:
    """Repair what earlier calls left behind; returns (node, address) pairs of adopted instances.

    ``wanted``: nodes this call is resuming (they want an instance whatever Slurm shows).
    ``handled``: nodes whose instances this call deals with itself (suspend, resume-fail)."""
    grace = cfg.orphan_grace_seconds
    addresses: list[tuple[str, str]] = []
    to_kill: dict[str, str] = {}

    def node_wants(node: str) -> bool:
        g = cfg.group_of_node(node)
        if g is None or g.static:
            return False
        if inv.live_of_node(node):
            return False
        if node in wanted:
            return True
        st = states.get(node) if states else None
        return bool(st and st.has("POWERING_UP") and not st.has("DOWN"))

    # 1. launches that crashed between CreateFleet and the end of tagging
    journaled: set[str] = set()
    entries = state.journal_entries()
    taken = {str(v) for e in entries for v in dict(e.get("assignments") or {}).values()}
    for entry in entries:
        token = str(entry["token"])
        journaled.add(token)
        raw_assign: dict[str, Any] = entry.get("assignments") or {}
        assignments: dict[str, str] = {str(k): str(v) for k, v in raw_assign.items()}
        started = float(entry.get("started") or 0.0)
        untagged = [i for i in inv.all() if i.token == token and i.node is None]
        if entry.get("recovered"):
            assignments.update(recover_assignments(cfg, untagged, node_wants, taken))
        log.info(
            "decision sweep journal token=%s group=%s age=%.0fs assigned=%d untagged=%s",
            token,
            entry.get("group"),
            now - started,
            len(assignments),
            ",".join(i.id for i in untagged) or "-",
        )
        for inst in untagged:
            node = assignments.get(inst.id)
            if node and inst.live and node_wants(node):
                failed = ec2.tag_nodes({inst.id: node})
                if not failed:
                    inv.tag_node(inst.id, node)
                    log.info("decision adopt instance=%s node=%s token=%s", inst.id, node, token)
                    if inst.private_ip:
                        addresses.append((node, inst.private_ip))
                    continue
            to_kill[inst.id] = f"orphan of crashed launch {token}"
        # instances tagged before the crash whose node never got its address
        for iid, node in assignments.items():
            inst = inv.by_id.get(iid)
            if inst and inst.node == node and inst.live and inst.private_ip:
                st = states.get(node) if states else None
                if node in wanted or (st and st.has("POWERING_UP") and not st.has("DOWN")):
                    if (node, inst.private_ip) not in addresses:
                        addresses.append((node, inst.private_ip))
        if now - started > grace:
            log.info("decision sweep journal token=%s older than %ss, dropping it", token, grace)
            state.journal_end(token)

    # 2. untagged instances nobody accounts for (static groups' instances are named, not swept)
    for inst in inv.all():
        if not is_dynamic(cfg, inst.group):
            continue
        if inst.node is not None or inst.id in to_kill or (inst.token and inst.token in journaled):
            continue
        age = inst.age(now)
        if age >= grace:
            to_kill[inst.id] = f"orphan without node-name tag, {age:.0f}s old"
        else:
            log.info("decision sweep instance=%s untagged but only %.0fs old, leaving it", inst.id, age)

    # 3. duplicates, stopped instances, instances of powered-down nodes
    by_node: dict[str, list[Instance]] = {}
    for inst in inv.all():
        if inst.node is not None and inst.id not in to_kill and is_dynamic(cfg, inst.group):
            by_node.setdefault(inst.node, []).append(inst)
    for node, insts in sorted(by_node.items()):
        live = [i for i in insts if i.live]
        for i in insts:
            if not i.live:
                to_kill[i.id] = f"node {node} instance is {i.state}"
        if len(live) > 1:
            keep = best_instance(live)
            for i in live:
                if i.id != keep.id:
                    to_kill[i.id] = f"second instance of node {node} (keeping {keep.id})"
        st = states.get(node) if states else None
        if live and st is not None and st.powered_down and node not in wanted and node not in handled:
            for i in live:
                to_kill[i.id] = f"node {node} is powered down in Slurm"
        elif st is None and states is not None and live:
            log.warning("sweep: instance(s) %s tagged with node %s that Slurm does not know", ",".join(i.id for i in live), node)

    for iid, why in sorted(to_kill.items()):
        log.info("decision terminate instance=%s: %s", iid, why)
    if to_kill:
        terminate(ec2, inv, sorted(to_kill), "sweep")
    return addresses


def recover_assignments(
    cfg: AgentConfig, untagged: list[Instance], wants: Callable[[str], bool], taken: set[str]
) -> dict[str, str]:
    """Instance -> node for a launch whose journal entry was unreadable (quarantined): its instances
    still carry the launch token and node-group tags, and any node of that group that still wants an
    instance can take one (they share the launch template), lowest node first. Nodes named by another
    journal entry are left to it."""
    out: dict[str, str] = {}
    used = set(taken)
    for inst in untagged:
        g = cfg.group(inst.group) if inst.group else None
        if g is None or g.static or not inst.live:
            continue
        node = next((n for n in g.node_names() if n not in used and wants(n)), None)
        if node is not None:
            log.info("decision recover instance=%s node=%s: its journal entry was quarantined", inst.id, node)
            out[inst.id] = node
            used.add(node)
    return out
