# pyright: strict
"""Static node groups (``mode: static``): their instances belong to an Auto Scaling group, so the
agent never launches or terminates them. It only matches instances to node names (each new
instance gets the lowest free name of its group as a tag; the instance waits for that tag before it
starts slurmd) and keeps Slurm's view true: names without an instance are DOWN, and come back once
an instance carries them."""

from __future__ import annotations

import logging

from ..contract import AgentConfig, hostlist
from .ec2 import Ec2, Instance
from .inventory import Inventory, fmt_nodes
from .slurm import NodeState, Slurm

log = logging.getLogger("gpucluster_agents")

# The reason the agent gives static nodes that no instance of their Auto Scaling group carries.
STATIC_NO_INSTANCE = "gpucluster: no instance"


def reconcile_static(cfg: AgentConfig, ec2: Ec2, slurm: Slurm, inv: Inventory, states: dict[str, NodeState] | None) -> None:
    """Name the instances of static node groups and keep Slurm's view of those nodes true.

    Each live instance of a static group without a node name of that group gets the lowest free
    one (oldest instance first); names without an instance are set DOWN so jobs go elsewhere, and
    come back (``state=resume``) once an instance carries them. Nothing is launched or terminated:
    the Auto Scaling group owns these instances."""
    for g in cfg.node_groups:
        if not g.static:
            continue
        named: dict[str, Instance] = {}
        unnamed: list[Instance] = []
        for inst in sorted((i for i in inv.all() if i.group == g.name and i.live), key=lambda i: (i.launch_time, i.id)):
            if inst.node is not None and g.owns(inst.node) and inst.node not in named:
                named[inst.node] = inst
            else:
                if inst.node is not None:
                    log.warning("static group %s: instance %s carries node name %s, renaming it", g.name, inst.id, inst.node)
                unnamed.append(inst)
        free = [n for n in g.node_names() if n not in named]
        assignments = {inst.id: node for inst, node in zip(unnamed, free)}
        for inst in unnamed[len(free) :]:
            log.error("static group %s: no free node name for instance %s (max_nodes %d)", g.name, inst.id, g.max_nodes)
        if assignments:
            log.info(
                "decision name static group=%s %s",
                g.name,
                " ".join(f"{iid}={node}" for iid, node in sorted(assignments.items(), key=lambda kv: hostlist.order_key(kv[1]))),
            )
            failed = ec2.tag_nodes(assignments)
            pairs: list[tuple[str, str]] = []
            for iid, node in assignments.items():
                if iid in failed:
                    continue
                inv.tag_node(iid, node)
                named[node] = inv.by_id[iid]
                ip = inv.by_id[iid].private_ip
                if ip:
                    pairs.append((node, ip))
            if pairs:
                slurm.set_addresses(pairs)
        if states is None:
            continue
        down: list[str] = []
        back: list[str] = []
        for node in g.node_names():
            st = states.get(node)
            if st is None:
                continue
            if node in named:
                if st.has("DOWN") and (st.reason or "").startswith(STATIC_NO_INSTANCE):
                    back.append(node)
            elif not st.has("DOWN"):
                down.append(node)
        if down:
            reason = f"{STATIC_NO_INSTANCE} in the Auto Scaling group of static node group {g.name}"
            log.info("decision down nodes=%s reason=%r", fmt_nodes(down), reason)
            slurm.set_down(down, reason)
        if back:
            log.info("decision static nodes=%s have instances again: state=resume", fmt_nodes(back))
            slurm.resume(back)
