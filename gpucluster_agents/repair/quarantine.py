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

At most :func:`share_limit` of a group's running nodes (those with an instance) are in repair at once,
a replacement counting until ``repair.share_window_seconds`` after it ended (the node is powered down, not
back in service); the rest wait for a later pass. Above that, the group's brake (``brake.py``) stops every
repair of a group the health program drains in numbers, until an operator releases it.

Crash safety: the repair record is written (fsync) before RebootInstances, the drain, the power-down or
SetInstanceHealth, with ``phase: starting``; a record found still ``starting`` (or ``rebooted``: the drain
marker failed) is finished by the next pass: a node already showing the ``rebooted <instance>`` marker is
settling; a node still drained by the health program gets its action again (a second reboot of an idle,
drained node is harmless; power-down and Unhealthy are idempotent). A ``rebooted`` drain without any record
(quarantine.json lost) is rechecked: it gets a record, settles and is handed back if it responds.

Slurm forgets a drain reason when it powers a node down, so every verdict is kept in
``state_dir/quarantine.json`` (active repairs and a bounded history) for the log and ``status``.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any, cast

from ..contract import AgentConfig, NodeGroup, hostlist
from ..contract.repair import Repair
from ..power.inventory import Inventory, best_instance
from ..power.slurm import REASON_MAX, NodeState, Slurm, clean_reason
from ..power.state import read_json, write_json_atomic
from .api import RepairApi
from .brake import Brake, strip_note

log = logging.getLogger("gpucluster_agents")

PREFIX = "gpucluster:"
REBOOTED = "gpucluster: rebooted"  # the agent's own reason while a rebooted node settles
# drains that are not faults: the rolling update's (power/roll.py REASON), a capacity block's end (power/spot.py)
NOT_FAULTS = ("gpucluster: image update", "gpucluster: capacity block ending")
_ACTION_RE = re.compile(r"\((reboot|replace)\)")
_MARKER_RE = re.compile(r"^gpucluster: rebooted (i-[0-9a-f]+) for: (.*)$")
HISTORY_MAX = 500  # finished repairs kept for status (oldest dropped first)
FILE = "quarantine.json"

Record = dict[str, Any]  # {node, group, instance, action, asked, verdict, since, phase, drained_at[, ended, outcome]}


def drain_action(reason: str | None) -> str | None:
    """The action a drain reason asks for: ``reboot`` or ``replace``; None for a drain that is not the
    health program's (no ``gpucluster:`` prefix, the agent's own reboot marker or rolling update). The last action
    named in parentheses wins; none named means replace."""
    text = (reason or "").strip()
    if not text.startswith(PREFIX) or text.startswith(REBOOTED) or text in NOT_FAULTS:
        return None
    found = _ACTION_RE.findall(text)
    return str(found[-1]) if found else "replace"


def share_limit(repair: Repair, running: int) -> int:
    """How many nodes of a group with ``running`` nodes (an instance each) may be in repair: the share, at least one."""
    return max(1, running * repair.max_share_percent // 100)


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

    def in_flight(self, group: str, since: float) -> int:
        """Repairs of ``group`` under way, and replacements that ended after ``since``."""
        under_way = sum(1 for r in self.active.values() if r.get("group") == group)
        return under_way + sum(
            1
            for r in self.history
            if r.get("group") == group and r.get("action") == "replace" and float(r.get("ended") or 0) > since
        )

    def drained_at(self, group: str) -> dict[str, float]:
        """Nodes of ``group`` with a repair record -> when their drain was first seen (the brake counts them)."""
        out: dict[str, float] = {}
        for r in [*self.history, *self.active.values()]:
            if r.get("group") == group and r.get("node"):
                t = float(r.get("drained_at") or r.get("since") or 0)
                out[str(r["node"])] = max(out.get(str(r["node"]), 0.0), t)
        return out

    def clamp(self, now: float) -> None:
        """Times ahead of ``now`` (the clock was stepped back) become now, so settling never waits longer."""
        for r in [*self.active.values(), *self.history]:
            for key in ("since", "drained_at", "ended"):
                if float(r.get(key) or 0) > now:
                    r[key] = now


class Quarantine:
    """One maintenance pass over drained nodes (see the module docstring)."""

    def __init__(self, cfg: AgentConfig, api: RepairApi, slurm: Slurm, state_dir: str) -> None:
        self.cfg = cfg
        self.api = api
        self.slurm = slurm
        self.state_dir = state_dir
        self.book = Book(state_dir)
        self.changed: set[str] = set()  # nodes this pass changed in Slurm (their entry in ``states`` is stale)

    def run(self, inv: Inventory, states: dict[str, NodeState] | None, now: float) -> None:
        if states is None:
            return  # scontrol failed: no view of drains this pass
        self.book.clamp(now)
        brake = Brake(self.cfg, self.state_dir, now)
        health = [n for n, st in states.items() if st.has("DRAIN") and drain_action(st.reason) is not None]
        brake.observe(health, keep=self.book.active)
        running = {g.name: {i.node for i in inv.all() if i.live and i.node and g.owns(i.node)} for g in self.cfg.node_groups}
        for g in self.cfg.node_groups:
            brake.update(g.name, running[g.name], self.book.drained_at(g.name))
        # ``states`` predates this pass: a node whose state a repair step changed is not looked at again
        self.changed = {node for node in sorted(self.book.active) if self._progress(node, inv, states, now)}
        for node, st in sorted(states.items(), key=lambda kv: hostlist.order_key(kv[0])):
            if node not in self.book.active and node not in self.changed:
                self._consider(node, st, inv, now, brake, running)
        self._notes(states, brake)
        self.book.save()
        brake.save()

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
        if rec.get("phase") in ("starting", "rebooted") and self._unfinished(node, rec, st, group, live_ids, now):
            return True
        if rec.get("action") == "reboot":
            return self._progress_reboot(node, rec, st, now)
        if group.static:
            if rec.get("instance") in live_ids:
                return False  # the Auto Scaling group has not taken the old instance away yet
            if live_ids and st.has("DRAIN") and strip_note(st.reason) == rec.get("verdict"):
                log.info("decision quarantine node=%s has a new instance %s: state=resume", node, ",".join(sorted(live_ids)))
                self.slurm.resume([node])
            self.book.finish(node, "replaced", now)
            return True
        if st.powered_down or rec.get("instance") not in live_ids:
            self.book.finish(node, "replaced", now)
            return True
        if st.has("DRAIN") and not st.has("POWERING_DOWN") and strip_note(st.reason) == rec.get("verdict"):
            log.info("decision quarantine node=%s still drained, power_down_force again", node)
            self.slurm.power_down_force([node])
        return True

    def _unfinished(self, node: str, rec: Record, st: NodeState, group: NodeGroup, live: set[str], now: float) -> bool:
        """A record a pass wrote before its effects and did not see through (a crash, a failed drain):
        finish it. True when this changed the node in Slurm; False to go on with the usual progress."""
        iid = rec.get("instance")
        if rec.get("action") == "reboot" and (st.reason or "").startswith(f"{REBOOTED} {iid}"):
            rec["phase"] = "acted"  # RebootInstances and the drain marker both happened
            return False
        if not st.has("DRAIN") or drain_action(st.reason) is None or (iid is not None and iid not in live):
            rec["phase"] = "acted"  # undrained by someone else, or the instance is gone: nothing left to do
            return False
        if rec.get("action") == "reboot" and rec.get("phase") == "rebooted":
            rec["phase"] = self._mark_rebooted(node, str(iid), str(rec.get("verdict") or ""))
            return True
        log.warning(
            "decision quarantine-finish node=%s action=%s: the pass that started it did not finish", node, rec.get("action")
        )
        phase = self._act(node, group, str(rec.get("action")), iid, str(rec.get("verdict") or ""))
        if phase is not None:
            rec.update(phase=phase, since=now)
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
    def _consider(self, node: str, st: NodeState, inv: Inventory, now: float, brake: Brake, running: dict[str, set[str]]) -> None:
        group = self.cfg.group_of_node(node)
        if not st.has("DRAIN") or group is None or brake.on(group.name):
            return  # braked: no repair starts, the node stays drained (brake.py)
        if (st.reason or "").startswith(REBOOTED):
            self._recheck(node, group, st, inv, now)
            return
        action = drain_action(st.reason)
        if action is None:
            return
        live = inv.live_of_node(node)
        if not group.static and st.powered_down and not live:
            # drained while powered down: there is no hardware to replace, the next resume gets new one
            log.info("decision quarantine node=%s drained while powered down (%r): state=resume", node, st.reason)
            self.slurm.resume([node])
            self.changed.add(node)
            return
        if st.has("POWERING_DOWN") or st.has("POWERING_UP") or (group.static and not live):
            return  # in transition, or a static node without an instance (static_groups handles it)
        if _busy(st):
            log.info("quarantine: node %s drained (%r), waiting for its jobs to end", node, st.reason)
            return
        inst = best_instance(live) if live else None
        window_start = now - self.cfg.repair.reboot_window_seconds
        todo = (
            "reboot"
            if action == "reboot" and inst is not None and not self.book.rebooted_since(node, window_start)
            else "replace"
        )
        n_running = len(running.get(group.name, set()))
        limit = share_limit(self.cfg.repair, n_running)
        busy = self.book.in_flight(group.name, now - self.cfg.repair.share_window_seconds)
        if busy >= limit:
            log.info(
                "decision quarantine-defer node=%s action=%s: %d of group %s in repair (limit %d of %d running)",
                node, todo, busy, group.name, limit, n_running,
            )  # fmt: skip
            return
        iid = inst.id if inst is not None else None
        verdict = strip_note(st.reason)
        rec: Record = {
            "node": node, "group": group.name, "instance": iid, "action": todo, "asked": action,
            "verdict": verdict, "since": now, "phase": "starting", "drained_at": brake.drained_at(node),
        }  # fmt: skip
        self.book.active[node] = rec
        self.book.save()  # on disk (fsync) before any effect: a crash from here on leaves a record to finish
        phase = self._act(node, group, todo, iid, verdict)
        if phase is None:
            del self.book.active[node]
        else:
            rec["phase"] = phase
            self.changed.add(node)

    def _recheck(self, node: str, group: NodeGroup, st: NodeState, inv: Inventory, now: float) -> None:
        """The agent's own ``rebooted`` drain with no record (lost state): settle it like any reboot."""
        m = _MARKER_RE.match(st.reason or "")
        live = inv.live_of_node(node)
        iid = m.group(1) if m else (best_instance(live).id if live else None)
        verdict = f"{PREFIX} {m.group(2)}" if m else str(st.reason)
        log.warning(
            "decision quarantine-recheck node=%s: %r has no repair record; it settles and is handed back if it responds",
            node,
            st.reason,
        )
        self.book.active[node] = {
            "node": node, "group": group.name, "instance": iid, "action": "reboot", "asked": "reboot",
            "verdict": verdict, "since": now, "phase": "acted", "drained_at": now, "adopted": True,
        }  # fmt: skip

    def _act(self, node: str, group: NodeGroup, todo: str, iid: str | None, verdict: str) -> str | None:
        """Take the repair's action; its phase (``acted``, or ``rebooted`` if the drain marker failed), None on failure."""
        log.info(
            "decision quarantine node=%s group=%s mode=%s action=%s instance=%s verdict=%r",
            node, group.name, group.mode, todo, iid or "-", verdict,
        )  # fmt: skip
        if todo == "reboot":
            if iid is None:
                raise ValueError("a reboot needs the instance id")
            if not self.api.reboot(iid):
                return None
            return self._mark_rebooted(node, iid, verdict)
        if group.static:
            return "acted" if iid is not None and self.api.set_unhealthy(iid) else None
        return "acted" if self.slurm.power_down_force([node]) else None

    def _mark_rebooted(self, node: str, iid: str, verdict: str) -> str:
        # keep it drained under our own reason: a reason the health program replaces means a recurrence
        ok = self.slurm.drain([node], f"{REBOOTED} {iid} for: {verdict[len(PREFIX) :].strip()}")
        return "acted" if ok else "rebooted"

    # ------------------------------------------------------------------ brake notes
    def _notes(self, states: dict[str, NodeState], brake: Brake) -> None:
        """Health drains of a braked group carry the brake's note; once it is released the note goes."""
        by_reason: dict[str, list[str]] = {}
        for node, st in sorted(states.items()):
            group = self.cfg.group_of_node(node)
            if group is None or node in self.book.active or node in self.changed or not st.has("DRAIN"):
                continue
            reason, text = st.reason or "", brake.note_of(group.name)
            if drain_action(reason) is None or (reason.endswith(text) if text else "(brake:" not in reason):
                continue  # not a health drain, or its note is as it should be: the reason stays the health program's
            base = strip_note(reason)
            want = clean_reason(f"{base[: REASON_MAX - len(text) - 1]} {text}" if text else base)
            by_reason.setdefault(want, []).append(node)
        for reason, nodes in sorted(by_reason.items()):
            log.info("decision brake-note nodes=%s reason=%r", ",".join(nodes), reason)
            self.slurm.drain(nodes, reason)


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
