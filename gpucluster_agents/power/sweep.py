# pyright: strict
"""The sweep every call starts with: repair what earlier calls left behind, so a crash of any
earlier call is undone by the next one. Three layers, in order (the module docstring of
``agent.py`` says why each exists): launches that crashed between CreateFleet and the end of
tagging (from the launch journal: adopt or terminate), untagged instances nobody accounts for, and
a node's second, stopped or powered-down instance. Only dynamic node groups' instances are ever
terminated here; static groups belong to their Auto Scaling group.

Never killing work: an instance of a crashed launch is *adopted* by its node whenever that node may be
running on it, i.e. Slurm shows the node up in any state but powered down, powering down or held DOWN by
the agent itself (it may have booted from its node map and be running a job) and no other live instance
has that node. When Slurm's
node states cannot be read, nothing from the journal is terminated and the entries stay until they can.
A crashed launch whose instances never got their assignment (killed right after CreateFleet answered)
is recovered from its launch token and the entry's node list; nodes that still wait for that launch's
boot and got no instance are powered down at once (``INTERRUPTED_REASON``), so Slurm requeues their jobs
now rather than after ResumeTimeout."""

from __future__ import annotations

import glob
import logging
import os
import time
from collections.abc import Iterable
from typing import Any, Callable, cast

from ..contract import AgentConfig
from .ec2 import AWS_ERRORS, NOT_TERMINATED_STATES, Ec2, Instance
from .inventory import Inventory, best_instance, fmt_nodes, is_dynamic
from .launcher import terminate
from .slurm import NodeState, Slurm
from .state import FirstSeen, StateDir, read_json

log = logging.getLogger("gpucluster_agents")

INTERRUPTED_REASON = "gpucluster: launch interrupted (the agent stopped before recording its instances), powered down"


def sweep(
    cfg: AgentConfig,
    ec2: Ec2,
    slurm: Slurm,
    state: StateDir,
    inv: Inventory,
    states: dict[str, NodeState] | None,
    wanted: set[str],
    now: float,
    handled: frozenset[str] = frozenset(),
    keep: frozenset[str] = frozenset(),
) -> list[tuple[str, str]]:
    """Repair what earlier calls left behind; returns (node, address) pairs of adopted instances.

    ``wanted``: nodes this call is resuming (they want an instance whatever Slurm shows).
    ``handled``: nodes whose instances this call deals with itself (suspend, resume-fail).
    ``keep``: instances that must not be taken for orphans (their node map could not be read)."""
    entries = state.journal_entries()
    s = _Sweep(cfg, ec2, state, inv, states, wanted, now, handled, entries)
    for entry in entries:
        s.journal_entry(entry)
    s.orphans(keep)
    s.duplicates()
    for iid, why in sorted(s.to_kill.items()):
        log.info("decision terminate instance=%s: %s", iid, why)
    if s.to_kill:
        terminate(ec2, inv, sorted(s.to_kill), "sweep")
    # after every entry had its turn: a node another entry's instance went to is not left waiting
    interrupted = sorted(n for n in s.interrupted if s.waits(n) and s.free(n))
    if interrupted:
        log.info("decision power_down_force nodes=%s reason=%r", fmt_nodes(interrupted), INTERRUPTED_REASON)
        slurm.power_down_force(interrupted, INTERRUPTED_REASON)
    return s.addresses


class _Sweep:
    """One sweep's view and decisions (the three layers share them)."""

    def __init__(
        self,
        cfg: AgentConfig,
        ec2: Ec2,
        state: StateDir,
        inv: Inventory,
        states: dict[str, NodeState] | None,
        wanted: set[str],
        now: float,
        handled: frozenset[str],
        entries: list[dict[str, Any]],
    ) -> None:
        self.cfg, self.ec2, self.state, self.inv, self.states = cfg, ec2, state, inv, states
        self.wanted, self.now, self.handled = wanted, now, handled
        self.addresses: list[tuple[str, str]] = []
        self.to_kill: dict[str, str] = {}
        self.interrupted: set[str] = set()  # nodes of crashed launches that may be left waiting for a boot
        self.journaled: set[str] = set()
        self.taken = {str(v) for e in entries for v in dict(e.get("assignments") or {}).values()}

    # ------------------------------------------------------------------ what a node wants
    def _state(self, node: str) -> NodeState | None:
        return self.states.get(node) if self.states is not None else None

    def free(self, node: str) -> bool:
        """A dynamic node of the config without a live instance."""
        g = self.cfg.group_of_node(node)
        return g is not None and not g.static and not self.inv.live_of_node(node)

    def waits(self, node: str) -> bool:
        """Slurm waits for this node's boot (POWERING_UP, not DOWN)."""
        st = self._state(node)
        return bool(st and st.has("POWERING_UP") and not st.has("DOWN"))

    def up(self, node: str) -> bool:
        """Slurm counts the node up (it may run a job): any state but powered down, powering down, or DOWN with
        the agent's own reason (the agent gave up on the node: a failed launch's hold, ``holds.py``)."""
        st = self._state(node)
        if st is None or st.powered_down or st.has("POWERING_DOWN") or node in self.handled:
            return False
        held = st.has("DOWN") and (st.reason or "").startswith("gpucluster") and not st.has("NOT_RESPONDING")
        return not held

    def adopts(self, node: str) -> bool:
        """The node takes the instance its crashed launch assigned it."""
        return self.free(node) and (node in self.wanted or self.up(node))

    def adopts_unassigned(self, node: str) -> bool:
        """The node takes an instance of its launch that never got an assignment: no such instance can have
        booted under a name (no map, no tag), so only a node still waiting for its boot takes one."""
        return self.free(node) and (node in self.wanted or self.waits(node))

    # ------------------------------------------------------------------ 1. the launch journal
    def journal_entry(self, entry: dict[str, Any]) -> None:
        token = str(entry["token"])
        self.journaled.add(token)
        assignments: dict[str, str] = {str(k): str(v) for k, v in dict(entry.get("assignments") or {}).items()}
        nodes = [str(n) for n in list(entry.get("nodes") or [])]
        untagged = [i for i in self.inv.all() if i.token == token and i.node is None]
        needy = [n for n in dict.fromkeys(nodes + list(assignments.values())) if self.adopts_unassigned(n)]
        listed_all = True
        if len([i for i in untagged if i.live]) < len(needy):
            listed_all, untagged = self._by_token(token, untagged)
        if not assignments:
            candidates = nodes or None  # a recovered (torn) entry names no nodes: any of the group's
            assignments = recover_assignments(self.cfg, untagged, self.adopts_unassigned, self.taken, candidates)
        log.info(
            "decision sweep journal token=%s group=%s assigned=%d untagged=%s",
            token,
            entry.get("group"),
            len(assignments),
            ",".join(i.id for i in untagged) or "-",
        )
        for inst in untagged:
            self._adopt_or_kill(inst, assignments.get(inst.id), token)
        self._addresses_of_tagged(assignments)
        if self.states is None:
            log.warning("sweep: journal %s kept: Slurm's node states are unavailable, terminating nothing of it", token)
            return
        if listed_all:  # nodes still waiting for this launch, decided once every entry is done
            self.interrupted.update(n for n in nodes if n not in self.wanted)
        if self.state.journal_age(entry, self.now) > self.cfg.orphan_grace_seconds:
            log.info("decision sweep journal token=%s older than %ss, dropping it", token, self.cfg.orphan_grace_seconds)
            self.state.journal_end(token)

    def _by_token(self, token: str, untagged: list[Instance]) -> tuple[bool, list[Instance]]:
        """Fewer instances listed than nodes waiting for them: ask EC2 for the launch's instances by its token
        (a second read, for instances the cluster listing did not show yet). (read ok, untagged instances)."""
        try:
            found = self.ec2.describe_launch(token, [])
        except AWS_ERRORS as exc:
            log.error("api DescribeInstances launch-token=%s failed: %s; deciding on the listing alone", token, exc)
            return False, untagged
        out = {i.id: i for i in untagged}
        for inst in found.values():
            if inst.id not in self.inv.by_id and inst.state in NOT_TERMINATED_STATES and inst.node is None:
                self.inv.put(inst)
                out[inst.id] = inst
        return True, sorted(out.values(), key=lambda i: i.id)

    def _adopt_or_kill(self, inst: Instance, node: str | None, token: str) -> None:
        if node and inst.live and self.adopts(node):
            failed = self.ec2.tag_nodes({inst.id: node})
            if not failed:
                self.inv.tag_node(inst.id, node)
                log.info("decision adopt instance=%s node=%s token=%s", inst.id, node, token)
                if inst.private_ip:
                    self.addresses.append((node, inst.private_ip))
                return
        if self.states is None:
            return  # Slurm's view unknown: the node may be running on it; the entry stays for the next call
        self.to_kill[inst.id] = f"orphan of crashed launch {token}"

    def _addresses_of_tagged(self, assignments: dict[str, str]) -> None:
        """Instances tagged before the crash whose node never got its address."""
        for iid, node in assignments.items():
            inst = self.inv.by_id.get(iid)
            if inst and inst.node == node and inst.live and inst.private_ip:
                if (node in self.wanted or self.waits(node)) and (node, inst.private_ip) not in self.addresses:
                    self.addresses.append((node, inst.private_ip))

    # ------------------------------------------------------------------ 2. orphans
    def orphans(self, keep: frozenset[str]) -> None:
        """Untagged instances nobody accounts for, aged from the agent's first sight of them (``orphans.json``):
        EC2's LaunchTime is on EC2's clock, and a head node clock behind it would keep an orphan forever."""
        candidates = [
            inst
            for inst in self.inv.all()
            if is_dynamic(self.cfg, inst.group)
            and inst.node is None
            and inst.id not in self.to_kill
            and not (inst.token and inst.token in self.journaled)
            and inst.id not in keep
        ]
        ages = FirstSeen(self.state.path, "orphans.json").update((i.id for i in candidates), self.now)
        for inst in candidates:
            age = ages[inst.id]
            if age >= self.cfg.orphan_grace_seconds:
                self.to_kill[inst.id] = f"orphan without node-name tag, seen for {age:.0f}s"
            else:
                log.info("decision sweep instance=%s untagged, first seen %.0fs ago, leaving it", inst.id, age)

    # ------------------------------------------------------------------ 3. duplicates and the rest
    def duplicates(self) -> None:
        """A node's second instance, stopped instances, instances of nodes Slurm shows powered down."""
        by_node: dict[str, list[Instance]] = {}
        for inst in self.inv.all():
            if inst.node is not None and inst.id not in self.to_kill and is_dynamic(self.cfg, inst.group):
                by_node.setdefault(inst.node, []).append(inst)
        for node, insts in sorted(by_node.items()):
            live = [i for i in insts if i.live]
            for i in insts:
                if not i.live:
                    self.to_kill[i.id] = f"node {node} instance is {i.state}"
            if len(live) > 1:
                keep = best_instance(live)
                for i in live:
                    if i.id != keep.id:
                        self.to_kill[i.id] = f"second instance of node {node} (keeping {keep.id})"
            st = self._state(node)
            if live and st is not None and st.powered_down and node not in self.wanted and node not in self.handled:
                for i in live:
                    self.to_kill[i.id] = f"node {node} is powered down in Slurm"
            elif st is None and self.states is not None and live:
                ids = ",".join(i.id for i in live)
                log.warning("sweep: instance(s) %s tagged with node %s that Slurm does not know", ids, node)


def recover_assignments(
    cfg: AgentConfig,
    untagged: list[Instance],
    wants: Callable[[str], bool],
    taken: set[str],
    nodes: Iterable[str] | None = None,
) -> dict[str, str]:
    """Instance -> node for a launch whose journal entry has no assignment: killed right after CreateFleet
    answered (``nodes``: the entry's node list), or unreadable and quarantined (``nodes`` None: any node of the
    instance's group). Its instances still carry the launch token and node-group tags, and every node of one
    group shares the launch template, so a node that still wants an instance can take any of them, lowest
    node first. Nodes another journal entry assigns are left to it."""
    out: dict[str, str] = {}
    used = set(taken)
    allowed = set(nodes) if nodes is not None else None
    for inst in untagged:
        g = cfg.group(inst.group) if inst.group else None
        if g is None or g.static or not inst.live:
            continue
        names = [n for n in g.node_names() if allowed is None or n in allowed]
        node = next((n for n in names if n not in used and wants(n)), None)
        if node is not None:
            log.info("decision recover instance=%s node=%s: its launch recorded no assignment", inst.id, node)
            out[inst.id] = node
            used.add(node)
    return out


def status_lines(state: StateDir, now: float) -> list[str]:
    """``status``: crashed launches the journal still holds, untagged instances waiting out the orphan grace,
    and ``names.json`` files set aside as unreadable."""
    out: list[str] = []
    for name in sorted(os.listdir(state.journal_dir)):  # read only: status takes no lock, so it moves nothing aside
        if not name.endswith(".json"):
            continue
        raw = read_json(os.path.join(state.journal_dir, name))
        e = cast("dict[str, Any]", raw) if isinstance(raw, dict) else {"token": name, "started": None}
        age = now - float(e.get("started") or now)
        nodes = fmt_nodes(str(n) for n in list(e.get("nodes") or []))
        out.append(f"launch journal: {e['token']} group={e.get('group')} nodes={nodes} {age:.0f}s old (a launch that stopped)")
    waiting = FirstSeen(state.path, "orphans.json").seen
    if waiting:
        out.append(f"orphans: {len(waiting)} untagged instance(s) waiting out the grace: {','.join(sorted(waiting))}")
    for aside in sorted(glob.glob(os.path.join(glob.escape(state.path), "names.json.corrupt-*"))):
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(os.path.getmtime(aside)))
        out.append(f"names: {aside} was unreadable ({when}); set aside and rebuilt from the node maps")
    return out or ["launch journal: empty; no orphan waiting"]
