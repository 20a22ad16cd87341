# pyright: strict
"""What the config or AWS took away from under the agent, found in every call's start:

- **Vanished instances.** A dynamic node Slurm counts as up (idle, allocated, or DOWN and not
  responding) whose instance is gone: AWS terminated it (spot interruption, the end of a capacity
  block, retirement) or a person did. Slurm alone would leave the node DOWN for good, so the agent
  sets it ``state=power_down_force`` with a ``gpucluster:`` reason: Slurm requeues its jobs, runs
  SuspendProgram (nothing left to terminate) and the node is IDLE and powered down again, ready
  for the next resume with new hardware. POWER_DOWN_FORCE exists since Slurm 21.08 and resets the
  node to IDLE (scontrol man page), which is what ParallelCluster's clustermgtd does for unhealthy
  dynamic nodes. Powering down a node kills its job, so it never rests on one read:
  - *two agreeing listings*: a node is acted on only when it was already missing from a listing of an
    earlier pass at least ``confirm_seconds`` (the lesser of 60 s, one maintain interval, and
    ``orphan_grace_seconds``, the agent's window for EC2's eventual consistency) before; first misses
    live in ``state_dir/vanished.json``, and a listing that shows the instance again forgets them;
  - *a cap per pass*: at most ``vanished_cap`` nodes of a group at once, max(2, 20 % of the group's
    nodes Slurm counts as up). A spot reclaim or a retirement takes one or a few; a listing that lost
    a page, a filter or a tag takes many. Above the cap the agent does nothing for that group's nodes,
    logs one ``ALERT vanished-over-cap`` line per pass and ``status`` shows the nodes and the scontrol
    command that returns them once a person has checked EC2 (20 % is where EKS managed node groups
    stop repairing, and the share ``repair.max_share_percent`` halves for one pass).
  - a group with an instance whose node map could not be read (``names.recover_from_maps``) is left
    alone that pass: the unnamed instance may be one of its nodes'.
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
import time
from collections import Counter
from typing import Any, cast

from ..contract import AgentConfig, hostlist
from .ec2 import Ec2, Instance
from .inventory import Inventory, fmt_nodes
from .launcher import terminate
from .slurm import NodeState, Slurm
from .state import FirstSeen, StateDir, clamped, read_json, write_json_atomic

log = logging.getLogger("gpucluster_agents")

VANISHED_REASON = "gpucluster: instance gone (spot interruption, capacity block end or retirement), powered down"
STRAY_REASON = "gpucluster: node group removed or shrunk in the config, instance to be terminated"
VANISHED_ALERT = "ALERT vanished-over-cap"  # the stable prefix monitoring alerts on (one line per group and pass)
VANISHED_CAP_MIN = 2  # nodes of a group powered down per pass for a vanished instance, at least ...
VANISHED_CAP_PERCENT = 20  # ... or this share of the group's nodes Slurm counts as up
VANISHED_CONFIRM_MAX = 60.0  # seconds between the two listings that must agree, at most
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


def confirm_seconds(orphan_grace_seconds: int) -> float:
    """Seconds a node must have been missing from an earlier pass's listing before it counts as vanished."""
    return min(VANISHED_CONFIRM_MAX, float(orphan_grace_seconds))


def vanished_cap(up: int) -> int:
    """Vanished nodes of one group the agent powers down in one pass: max(2, 20 % of its nodes that are up)."""
    return max(VANISHED_CAP_MIN, up * VANISHED_CAP_PERCENT // 100)


def vanished_candidates(
    cfg: AgentConfig, inv: Inventory, states: dict[str, NodeState], pending: set[str], skip: frozenset[str]
) -> tuple[dict[str, list[str]], Counter[str]]:
    """({group: nodes Slurm counts as up without a live instance}, {group: its nodes Slurm counts as up})."""
    gone: dict[str, list[str]] = {}
    up: Counter[str] = Counter()
    for node, st in states.items():
        g = cfg.group_of_node(node)
        if g is None or g.static or any(st.has(f) for f in _IN_TRANSITION):
            continue
        up[g.name] += 1
        if node in skip or node in pending or inv.live_of_node(node) or _operators(st):
            continue
        if st.has("DOWN") and (st.reason or "").startswith("gpucluster") and not st.has("NOT_RESPONDING"):
            continue  # the agent's own hold (holds.py) ends it
        gone.setdefault(g.name, []).append(node)
    return gone, up


def return_vanished(
    cfg: AgentConfig,
    slurm: Slurm,
    inv: Inventory,
    states: dict[str, NodeState] | None,
    state: StateDir,
    now: float,
    skip: frozenset[str] = frozenset(),
    unsure: frozenset[str] = frozenset(),
) -> list[str]:
    """Power down (and so return to service) dynamic nodes that Slurm counts as up but that have had no live
    instance in two listings ``confirm_seconds`` apart, at most ``vanished_cap`` per group (above it: none, and
    an alert). Nodes being resumed, named in a launch journal entry (their instance may not be listed yet), in
    ``skip``, or of a group in ``unsure`` are left alone. Returns the nodes powered down."""
    if states is None:
        return []
    pending: set[str] = set()
    for entry in state.journal_entries():
        pending |= {str(v) for v in dict(entry.get("assignments") or {}).values()}
        pending |= {str(n) for n in list(entry.get("nodes") or [])}
    candidates, up = vanished_candidates(cfg, inv, states, pending, skip)
    for gname in sorted(unsure & set(candidates)):
        log.warning("vanished: group %s left alone this pass (an instance's node map could not be read)", gname)
        del candidates[gname]
    missing = FirstSeen(state.path, "vanished.json")
    earlier = set(missing.seen)
    ages = missing.update((n for ns in candidates.values() for n in ns), now)
    wait = confirm_seconds(cfg.orphan_grace_seconds)
    over: dict[str, dict[str, object]] = {}
    gone: list[str] = []
    for gname, nodes in sorted(candidates.items()):
        confirmed = [n for n in nodes if n in earlier and ages[n] >= wait]
        if len(nodes) > len(confirmed):
            log.info(
                "vanished: group %s nodes=%s missing from one listing, waiting for a second",
                gname,
                fmt_nodes(set(nodes) - set(confirmed)),
            )
        cap = vanished_cap(up[gname])
        if len(confirmed) > cap:
            over[gname] = {"nodes": sorted(confirmed, key=hostlist.order_key), "cap": cap, "up": up[gname]}
            log.error(
                "%s group=%s nodes=%s count=%d cap=%d up=%d: two listings agree these nodes have no instance, more "
                "than the cap per pass; nothing done (check EC2, then: %s)",
                VANISHED_ALERT,
                gname,
                fmt_nodes(confirmed),
                len(confirmed),
                cap,
                up[gname],
                release_command(confirmed),
            )
            continue
        gone.extend(confirmed)
    save_over_cap(state.path, over, now)
    gone.sort(key=hostlist.order_key)
    if gone:
        log.info("decision power_down_force nodes=%s: no instance (AWS took it away) reason=%r", fmt_nodes(gone), VANISHED_REASON)
        slurm.power_down_force(gone, VANISHED_REASON)
    return gone


def release_command(nodes: list[str]) -> str:
    """What an operator runs to do by hand what the cap stopped (the agent's own power-down)."""
    return f"scontrol update nodename={fmt_nodes(nodes)} state=power_down_force reason='{VANISHED_REASON}'"


def save_over_cap(state_dir: str, over: dict[str, dict[str, object]], now: float) -> None:
    """``vanished-over-cap.json``: the groups stopped by the cap this pass, since when (for ``status``)."""
    path = os.path.join(state_dir, "vanished-over-cap.json")
    raw = read_json(path)
    before = cast("dict[str, Any]", raw) if isinstance(raw, dict) else {}
    doc: dict[str, Any] = {}
    for gname, info in over.items():
        old = before.get(gname)
        since = float(cast("dict[str, Any]", old).get("since") or now) if isinstance(old, dict) else now
        doc[gname] = {**info, "since": clamped(since, now, f"vanished cap of {gname}")}
    if doc != before:
        write_json_atomic(path, doc)


def status_lines(state_dir: str) -> list[str]:
    """``status``: groups the vanished cap stopped, and nodes waiting for a second listing."""
    raw = read_json(os.path.join(state_dir, "vanished-over-cap.json"))
    over = cast("dict[str, Any]", raw) if isinstance(raw, dict) else {}
    out: list[str] = []
    for gname, info in sorted(over.items()):
        d = cast("dict[str, Any]", info) if isinstance(info, dict) else {}
        nodes = [str(n) for n in cast("list[Any]", d.get("nodes") or [])]
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(d.get("since") or 0)))
        out.append(
            f"vanished: group {gname}: {len(nodes)} nodes without an instance in two listings ({fmt_nodes(nodes)}), "
            f"over the cap {d.get('cap')} per pass: nothing done since {since}"
        )
        out.append(f"  if EC2 shows their instances gone, return them with: {release_command(nodes)}")
    waiting = FirstSeen(state_dir, "vanished.json").seen
    if waiting:
        out.append(f"vanished: {fmt_nodes(waiting)} missing from a listing, waiting for a second")
    return out or ["vanished: none (no node waits for a second listing, no group over the cap)"]


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
    ages = FirstSeen(state.path, "strays.json").update((s.id for s in strays), now)
    if not strays:
        return []
    if states is None:
        log.error("strays: %s; Slurm's node states are unavailable, terminating nothing", ",".join(s.id for s in strays))
        return []
    drain: list[str] = []
    kill: list[str] = []
    for inst in sorted(strays, key=lambda i: i.id):
        st = states.get(inst.node) if inst.node else None
        age = ages[inst.id]
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
    return [i for i in kill if i not in failed]
