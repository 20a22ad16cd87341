# pyright: strict
"""Quarantine and replacement of nodes the health program drained, in the maintenance pass.

Which drains are ours: a node with Slurm's DRAIN flag whose reason starts with ``gpucluster:``. The
health program (``gpucluster_agents.health``) drains with ``gpucluster: <check> <detail>`` and names the
action it wants in parentheses, ``(reboot)`` or ``(replace)``; a ``gpucluster:`` drain that names none
is replaced. A drain without the prefix is an operator's and is never touched.

What happens, once the node has no jobs (IDLE or DOWN, never while a job runs on it):
- reboot-class fault, and no reboot of this node within ``repair.reboot_window_seconds``: EC2
  RebootInstances; the node stays drained with the reason ``gpucluster: rebooted <instance> for: …``
  and is handed back (``state=resume``) after ``repair.reboot_settle_seconds`` if it responds and the
  health program did not drain it again. Drained again: a recurrence, so it is replaced.
- replace, dynamic node: ``state=power_down_force``; slurmctld runs the SuspendProgram (the agent's
  suspend terminates the instance) and, with ``idle_on_node_suspend``, returns the node to ``idle~``,
  so the next resume launches new hardware.
- replace, static node: Auto Scaling SetInstanceHealth Unhealthy; the group terminates the instance
  and launches another, which ``static_groups`` names after the node; the node is then handed back.

At most :func:`share_limit` nodes of a group are being rebooted or replaced at once; the
rest wait for a later pass. Slurm forgets a drain reason when it powers a node down, so every verdict is
kept in ``state_dir/quarantine.json`` (active repairs and a bounded history) for the log and ``status``.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any, cast

from .contract import AgentConfig, NodeGroup
from .inventory import Inventory, best_instance
from .repair_api import RepairApi
from .repair_contract import Repair
from .slurm import NodeState, Slurm
from .state import read_json, write_json_atomic

log = logging.getLogger("gpucluster_agents")

PREFIX = "gpucluster:"
REBOOTED = "gpucluster: rebooted"  # the agent's own reason while a rebooted node settles
_ACTION_RE = re.compile(r"\((reboot|replace)\)")
HISTORY_MAX = 500  # finished repairs kept for status (oldest dropped first)
FILE = "quarantine.json"

Record = dict[str, Any]  # {node, group, instance, action, verdict, since, phase[, ended, outcome]}


def drain_action(reason: str | None) -> str | None:
    """The action a drain reason asks for: ``reboot`` or ``replace``; None for a drain that is not the
    health program's (no ``gpucluster:`` prefix, or the agent's own reboot marker). The last action
    named in parentheses wins; none named means replace."""
    text = (reason or "").strip()
    if not text.startswith(PREFIX) or text.startswith(REBOOTED):
        return None
    found = _ACTION_RE.findall(text)
    return str(found[-1]) if found else "replace"


def share_limit(repair: Repair, max_nodes: int) -> int:
    """How many nodes of a group of ``max_nodes`` may be in repair at once: the share, at least one."""
    return max(1, max_nodes * repair.max_share_percent // 100)


def _busy(st: NodeState) -> bool:
    """A job may still run on the node: anything but IDLE or DOWN as its base state, or COMPLETING."""
    return st.has("COMPLETING") or not (st.has("IDLE") or st.has("DOWN"))


class Book:
    """``state_dir/quarantine.json``: the repairs under way (by node) and the finished ones."""

    def __init__(self, state_dir: str) -> None:
        self.path = os.path.join(state_dir, FILE)
        raw = read_json(self.path)
        doc = cast("dict[str, Any]", raw) if isinstance(raw, dict) else {}
        active = doc.get("active")
        history = doc.get("history")
        self.active: dict[str, Record] = (
            {str(k): cast("Record", v) for k, v in cast("dict[Any, Any]", active).items() if isinstance(v, dict)}
            if isinstance(active, dict)
            else {}
        )
        self.history: list[Record] = (
            [cast("Record", v) for v in cast("list[Any]", history) if isinstance(v, dict)] if isinstance(history, list) else []
        )

    def save(self) -> None:
        write_json_atomic(self.path, {"active": self.active, "history": self.history[-HISTORY_MAX:]})

    def finish(self, node: str, outcome: str, now: float) -> None:
        rec = self.active.pop(node)
        rec.update(ended=now, outcome=outcome)
        self.history.append(rec)
        log.info(
            "decision quarantine-end node=%s action=%s instance=%s outcome=%s verdict=%r",
            node,
            rec.get("action"),
            rec.get("instance"),
            outcome,
            rec.get("verdict"),
        )

    def rebooted_since(self, node: str, since: float) -> bool:
        return any(
            r.get("node") == node and r.get("action") == "reboot" and float(r.get("since") or 0) >= since
            for r in [*self.history, *self.active.values()]
        )

    def in_flight(self, group: str) -> int:
        return sum(1 for r in self.active.values() if r.get("group") == group)


class Quarantine:
    """One maintenance pass over drained nodes (see the module docstring)."""

    def __init__(self, cfg: AgentConfig, api: RepairApi, slurm: Slurm, state_dir: str) -> None:
        self.cfg = cfg
        self.api = api
        self.slurm = slurm
        self.book = Book(state_dir)

    def run(self, inv: Inventory, states: dict[str, NodeState] | None, now: float) -> None:
        if states is None:
            return  # scontrol failed: no view of drains this pass
        # ``states`` predates this pass: a node whose state a repair step changed is not looked at again
        touched = {node for node in sorted(self.book.active) if self._progress(node, inv, states, now)}
        for node, st in sorted(states.items()):
            if node not in self.book.active and node not in touched:
                self._consider(node, st, inv, now)
        self.book.save()

    # ------------------------------------------------------------------ repairs under way
    def _progress(self, node: str, inv: Inventory, states: dict[str, NodeState], now: float) -> bool:
        """Move one repair on; True when it changed the node in Slurm (its state in ``states`` is stale)."""
        rec = self.book.active[node]
        st = states.get(node)
        group = self.cfg.group_of_node(node)
        live_ids = {i.id for i in inv.live_of_node(node)}
        if st is None or group is None:
            self.book.finish(node, "node gone from config or Slurm", now)
            return True
        if rec.get("action") == "reboot":
            return self._progress_reboot(node, rec, st, now)
        if group.static:
            if rec.get("instance") in live_ids:
                return False  # the Auto Scaling group has not taken the old instance away yet
            if live_ids and st.has("DRAIN") and st.reason == rec.get("verdict"):
                log.info("decision quarantine node=%s has a new instance %s: state=resume", node, ",".join(sorted(live_ids)))
                self.slurm.resume([node])
            self.book.finish(node, "replaced", now)
            return True
        if st.powered_down or rec.get("instance") not in live_ids:
            self.book.finish(node, "replaced", now)
            return True
        if st.has("DRAIN") and not st.has("POWERING_DOWN") and st.reason == rec.get("verdict"):
            log.info("decision quarantine node=%s still drained, power_down_force again", node)
            self.slurm.power_down_force([node])
        return True

    def _progress_reboot(self, node: str, rec: Record, st: NodeState, now: float) -> bool:
        if now - float(rec.get("since") or 0) < self.cfg.repair.reboot_settle_seconds:
            return True
        if not st.has("DRAIN"):
            self.book.finish(node, "rebooted (undrained by someone else)", now)
            return False
        if not (st.reason or "").startswith(REBOOTED):
            # the health program drained it again: a recurrence, replaced in this same pass
            self.book.finish(node, f"recurred: {st.reason}", now)
            return False
        if st.has("NOT_RESPONDING") or st.has("DOWN"):
            log.warning("quarantine: node %s has not come back since its reboot; replacing it", node)
            self.book.finish(node, "did not come back after reboot", now)
            self.slurm.drain([node], f"gpucluster: no response after reboot of {rec.get('instance')} (replace)")
            return True
        log.info("decision quarantine node=%s back after reboot: state=resume", node)
        self.slurm.resume([node])
        self.book.finish(node, "rebooted", now)
        return True

    # ------------------------------------------------------------------ new drains
    def _consider(self, node: str, st: NodeState, inv: Inventory, now: float) -> None:
        if not st.has("DRAIN"):
            return
        action = drain_action(st.reason)
        group = self.cfg.group_of_node(node)
        if action is None or group is None:
            return
        live = inv.live_of_node(node)
        if not group.static and st.powered_down and not live:
            # drained while powered down: there is no hardware to replace, the next resume gets new one
            log.info("decision quarantine node=%s drained while powered down (%r): state=resume", node, st.reason)
            self.slurm.resume([node])
            return
        if st.has("POWERING_DOWN") or st.has("POWERING_UP") or (group.static and not live):
            return  # in transition, or a static node without an instance (static_groups handles it)
        if _busy(st):
            log.info("quarantine: node %s drained (%r), waiting for its jobs to end", node, st.reason)
            return
        inst = best_instance(live) if live else None
        window_start = now - self.cfg.repair.reboot_window_seconds
        if action == "reboot" and inst is not None and not self.book.rebooted_since(node, window_start):
            todo = "reboot"
        else:
            todo = "replace"
        limit = share_limit(self.cfg.repair, group.max_nodes)
        if self.book.in_flight(group.name) >= limit:
            log.info(
                "decision quarantine-defer node=%s action=%s: %d of group %s already in repair (limit %d)",
                node,
                todo,
                self.book.in_flight(group.name),
                group.name,
                limit,
            )
            return
        iid = inst.id if inst is not None else None
        if self._act(node, group, todo, iid, st.reason or ""):
            self.book.active[node] = {
                "node": node,
                "group": group.name,
                "instance": iid,
                "action": todo,
                "asked": action,
                "verdict": st.reason,
                "since": now,
            }

    def _act(self, node: str, group: NodeGroup, todo: str, iid: str | None, verdict: str) -> bool:
        log.info(
            "decision quarantine node=%s group=%s mode=%s action=%s instance=%s verdict=%r",
            node,
            group.name,
            group.mode,
            todo,
            iid or "-",
            verdict,
        )
        if todo == "reboot":
            assert iid is not None
            if not self.api.reboot(iid):
                return False
            # keep it drained under our own reason: a reason the health program replaces means a recurrence
            self.slurm.drain([node], f"{REBOOTED} {iid} for: {verdict[len(PREFIX) :].strip()}")
            return True
        if group.static:
            return iid is not None and self.api.set_unhealthy(iid)
        return self.slurm.power_down_force([node])


def status_lines(state_dir: str, limit: int = 20) -> list[str]:
    """Human lines for ``status``: repairs under way, then the latest finished ones."""
    book = Book(state_dir)
    out = [f"repairs under way: {len(book.active)}"]
    for node, r in sorted(book.active.items()):
        out.append(
            f"  {node} group={r.get('group')} action={r.get('action')} instance={r.get('instance')} verdict={r.get('verdict')!r}"
        )
    recent = book.history[-limit:]
    out.append(f"finished repairs (latest {len(recent)} of {len(book.history)}):")
    for r in recent:
        out.append(
            f"  {r.get('node')} action={r.get('action')} instance={r.get('instance')} outcome={r.get('outcome')!r}"
            f" verdict={r.get('verdict')!r}"
        )
    return out
