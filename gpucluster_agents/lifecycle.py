# pyright: strict
"""What the config or AWS took away from under the agent, found in every call's start:

- **Vanished instances.** A dynamic node Slurm counts as up (idle, allocated, or DOWN and not
  responding) whose instance is gone: AWS terminated it (spot interruption, the end of a capacity
  block, retirement) or a person did. Slurm alone would leave the node DOWN for good, so the agent
  sets it ``state=power_down_force`` with a ``gpucluster:`` reason: Slurm requeues its jobs, runs
  SuspendProgram (nothing left to terminate) and the node is IDLE and powered down again, ready
  for the next resume with new hardware. POWER_DOWN_FORCE exists since Slurm 21.08 and resets the
  node to IDLE (scontrol man page), which is what ParallelCluster's clustermgtd does for unhealthy
  dynamic nodes.
- **Strays.** Instances the agent launched (launch-token tag) for a node group the config no longer
  has (removed or renamed), or for a node beyond a group's shrunk ``max_nodes``. They are listed by
  the cluster tag, never by the configured group list, so they cannot hide. Their node is drained
  if Slurm still has it; the instance is terminated once it has been seen for
  ``orphan_grace_seconds`` and its node (if Slurm still has one) runs no job. When Slurm's view is
  unavailable nothing is terminated: a wrong reading must never mass-terminate.

Nodes whose own reason is an operator's (not ``gpucluster:`` and not Slurm's "Not responding") are
left alone: a person's DOWN or DRAIN stays until that person ends it.
"""

from __future__ import annotations

import logging
import os
from typing import Any, cast

from . import hostlist
from .contract import AgentConfig
from .ec2 import Ec2, Instance
from .inventory import Inventory, fmt_nodes
from .launcher import terminate
from .slurm import NodeState, Slurm
from .state import StateDir, read_json, write_json_atomic

log = logging.getLogger("gpucluster_agents")

VANISHED_REASON = "gpucluster: instance gone (spot interruption, capacity block end or retirement), powered down"
STRAY_REASON = "gpucluster: node group removed or shrunk in the config, instance to be terminated"
_IN_TRANSITION = ("POWERED_DOWN", "POWERING_UP", "POWERING_DOWN", "POWER_DOWN")
_BUSY = ("ALLOCATED", "MIXED", "COMPLETING")


def _operators(st: NodeState) -> bool:
    """True when the node's reason was set by a person (the agent's start with ``gpucluster``)."""
    reason = st.reason or ""
    return bool(reason) and not reason.startswith("gpucluster") and not reason.startswith("Not responding")


def split_strays(cfg: AgentConfig, instances: list[Instance]) -> tuple[list[Instance], list[Instance]]:
    """(the config's instances, strays). An instance of a group the config lacks counts as a stray only
    if the agent launched it (launch-token tag); other tagged instances are left to their owner."""
    mine: list[Instance] = []
    strays: list[Instance] = []
    for inst in instances:
        g = cfg.group(inst.group) if inst.group else None
        if g is None:
            if inst.token:
                strays.append(inst)
        elif not g.static and inst.node is not None and not g.owns(inst.node):
            strays.append(inst)
        else:
            mine.append(inst)
    return mine, strays


def return_vanished(
    cfg: AgentConfig,
    slurm: Slurm,
    inv: Inventory,
    states: dict[str, NodeState] | None,
    state: StateDir,
    skip: frozenset[str] = frozenset(),
) -> list[str]:
    """Power down (and so return to service) dynamic nodes that Slurm counts as up but that have no
    live instance. Nodes being resumed by this call, named in a launch journal entry (their instance
    may not be listed yet) or in ``skip`` are left alone. Returns the nodes powered down."""
    if states is None:
        return []
    pending: set[str] = set()
    for entry in state.journal_entries():
        pending |= {str(v) for v in dict(entry.get("assignments") or {}).values()}
        pending |= {str(n) for n in list(entry.get("nodes") or [])}
    gone: list[str] = []
    for node, st in states.items():
        g = cfg.group_of_node(node)
        if g is None or g.static or node in skip or node in pending or inv.live_of_node(node):
            continue
        if any(st.has(f) for f in _IN_TRANSITION) or _operators(st):
            continue
        if st.has("DOWN") and (st.reason or "").startswith("gpucluster") and not st.has("NOT_RESPONDING"):
            continue  # the agent's own hold (holds.py) ends it
        gone.append(node)
    gone.sort(key=hostlist.order_key)
    if gone:
        log.info("decision power_down_force nodes=%s: no instance (AWS took it away) reason=%r", fmt_nodes(gone), VANISHED_REASON)
        slurm.power_down_force(gone, VANISHED_REASON)
    return gone


def handle_strays(
    cfg: AgentConfig,
    ec2: Ec2,
    slurm: Slurm,
    state: StateDir,
    strays: list[Instance],
    states: dict[str, NodeState] | None,
    now: float,
) -> list[str]:
    """Drain the nodes of strays Slurm still has and terminate strays seen for ``orphan_grace_seconds``
    whose node runs no job. First sightings live in ``state_dir/strays.json``. Returns the ids terminated."""
    path = os.path.join(state.path, "strays.json")
    raw = read_json(path)
    seen_before = cast("dict[str, Any]", raw) if isinstance(raw, dict) else {}
    seen: dict[str, float] = {s.id: float(seen_before.get(s.id, now)) for s in strays}
    if seen != seen_before:
        write_json_atomic(path, seen)
    if not strays:
        return []
    if states is None:
        log.error("strays: %s; Slurm's node states are unavailable, terminating nothing", ",".join(s.id for s in strays))
        return []
    drain: list[str] = []
    kill: list[str] = []
    for inst in sorted(strays, key=lambda i: i.id):
        st = states.get(inst.node) if inst.node else None
        age = now - seen[inst.id]
        log.info(
            "decision stray instance=%s group=%s node=%s slurm=%s seen=%.0fs: not in the config's node groups",
            inst.id,
            inst.group,
            inst.node or "-",
            "+".join(st.flags) if st else "unknown",
            age,
        )
        if st is not None and inst.node and not st.has("DRAIN") and not _operators(st) and inst.live:
            drain.append(inst.node)
        busy = st is not None and any(st.has(f) for f in _BUSY)
        if age >= cfg.orphan_grace_seconds and not busy:
            kill.append(inst.id)
    if drain:
        log.info("decision drain nodes=%s reason=%r", fmt_nodes(drain), STRAY_REASON)
        slurm.drain(drain, STRAY_REASON)
    if not kill:
        return []
    log.info("decision terminate strays=%s: past the %ss grace, no job running", ",".join(kill), cfg.orphan_grace_seconds)
    failed = terminate(ec2, Inventory(strays), kill, "stray")
    done = [i for i in kill if i not in failed]
    write_json_atomic(path, {k: v for k, v in seen.items() if k not in done})
    return done
