# pyright: strict
"""What the agent does for each Slurm call. Every subcommand holds the state_dir lock while it
reads and changes instances, and starts with a sweep, so a crash of any earlier call is repaired
by the next one.

Never leaking an instance, in three layers:
1. Tags at launch. CreateFleet tags every instance with the cluster, node group and a fresh launch
   token (also the ClientToken). A separate CreateTags then names the instance's node.
2. A launch journal. ``journal/<token>.json`` is written before CreateFleet and gets the
   instance -> node assignment right after it; it is removed once all instances carry their node
   name. A journal entry seen by a process holding the lock is therefore a launch that crashed
   between CreateFleet and the end of tagging. The sweep then *adopts* each assigned instance
   if its node still wants one (the node is being resumed by this call, or Slurm still shows it
   POWERING_UP and not DOWN, and it has no other instance): it tags it and sets the node address.
   Otherwise the instance is terminated. Instances of a crashed launch with no assignment yet are
   terminated. The entry is kept for ``orphan_grace_seconds`` to catch instances that EC2's
   eventually consistent DescribeInstances shows late, then dropped.
3. A catch-all. Any instance with the cluster tag, no node-name tag, no journal entry and older
   than ``orphan_grace_seconds`` is terminated. So is any second instance of one node, any stopped
   instance, and any instance whose node Slurm shows powered down (a suspend that failed).

Idempotency: resume reuses the pending/running instance already tagged with a node's name and
only launches for nodes without one; CreateFleet's ClientToken guards botocore's own retries.

Static node groups (``mode: static``) belong to an Auto Scaling group: the agent never launches or
terminates their instances. Every call names each new instance of such a group after the lowest
free node (the instance waits for that tag before it starts slurmd), sets nodes without an
instance DOWN and hands them back once an instance carries their name (:meth:`Agent.reconcile_static`).

Failures: nodes that got no instance are set DOWN with a reason naming the EC2 error code, so
Slurm requeues the job and can run it in another partition. After insufficient capacity the
whole node group is held: its idle powered-down nodes are set DOWN too, and resumes during the
hold fail fast without calling EC2. Holds end after ``insufficient_capacity_hold_seconds``
(``failure_hold_seconds`` for other errors): the next agent call (a timer running ``maintain``
every minute makes this prompt) hands the nodes back to Slurm (``state=resume``, or
``state=power_down_force`` if Slurm still waits for them to boot).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from typing import Any, Callable

from . import hostlist
from .contract import TAG_NODE_NAME, AgentConfig, NodeGroup
from .ec2 import AWS_ERRORS, ICE_CODES, Ec2, Instance
from .slurm import NodeState, Slurm
from .state import FileLock, StateDir
from .topology import render_topology, write_if_changed

log = logging.getLogger("gpucluster_agents")

# The reason the agent gives static nodes that no instance of their Auto Scaling group carries.
STATIC_NO_INSTANCE = "gpucluster: no instance"

Holds = dict[str, dict[str, dict[str, Any]]]


def _short(msg: str, limit: int = 80) -> str:
    msg = " ".join(msg.split())
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


def _fmt(nodes: Iterable[str]) -> str:
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
            self.put(Instance(inst.id, inst.state, inst.launch_time, inst.private_ip, inst.instance_type, tags))


def best_instance(instances: list[Instance]) -> Instance:
    """The instance to keep when a node has several: running before pending, then the oldest."""
    return sorted(instances, key=lambda i: (i.state != "running", i.launch_time, i.id))[0]


class Agent:
    def __init__(
        self,
        cfg: AgentConfig,
        ec2: Ec2 | None = None,
        slurm: Slurm | None = None,
        state: StateDir | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cfg = cfg
        self.ec2 = ec2 if ec2 is not None else Ec2(cfg)
        self.slurm = slurm if slurm is not None else Slurm(cfg.scontrol)
        self.state = state if state is not None else StateDir(cfg.state_dir)
        self.clock = clock

    # ================================================================== helpers
    def expand(self, expr: str) -> list[str]:
        return self.slurm.expand(expr) if expr.strip() else []

    def split_by_group(self, nodes: Iterable[str]) -> tuple[dict[str, list[str]], list[str]]:
        by_group: dict[str, list[str]] = {}
        unknown: list[str] = []
        for n in nodes:
            g = self.cfg.group_of_node(n)
            if g is None:
                unknown.append(n)
            else:
                by_group.setdefault(g.name, [])
                if n not in by_group[g.name]:
                    by_group[g.name].append(n)
        for names in by_group.values():
            names.sort(key=hostlist.order_key)
        return by_group, unknown

    def _dynamic(self, group_name: str | None) -> bool:
        """True for instances of a dynamic node group of the config (the agent launches and terminates those)."""
        g = self.cfg.group(group_name) if group_name else None
        return g is not None and not g.static

    def _lock(self) -> FileLock:
        return self.state.lock(self.cfg.lock_timeout_seconds)

    def _terminate(self, inv: Inventory, ids: list[str], why: str) -> list[str]:
        if not ids:
            return []
        failed = self.ec2.terminate(ids, why)
        inv.drop(i for i in ids if i not in failed)
        return failed

    # ================================================================== sweep
    def sweep(
        self,
        inv: Inventory,
        states: dict[str, NodeState] | None,
        wanted: set[str],
        handled: frozenset[str] = frozenset(),
    ) -> list[tuple[str, str]]:
        """Repair what earlier calls left behind; returns (node, address) pairs of adopted instances.

        ``wanted``: nodes this call is resuming (they want an instance whatever Slurm shows).
        ``handled``: nodes whose instances this call deals with itself (suspend, resume-fail)."""
        now = self.clock()
        grace = self.cfg.orphan_grace_seconds
        addresses: list[tuple[str, str]] = []
        to_kill: dict[str, str] = {}

        def node_wants(node: str) -> bool:
            g = self.cfg.group_of_node(node)
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
        for entry in self.state.journal_entries():
            token = str(entry["token"])
            journaled.add(token)
            raw_assign: dict[str, Any] = entry.get("assignments") or {}
            assignments: dict[str, str] = {str(k): str(v) for k, v in raw_assign.items()}
            started = float(entry.get("started") or 0.0)
            untagged = [i for i in inv.all() if i.token == token and i.node is None]
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
                    failed = self.ec2.tag_nodes({inst.id: node})
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
                self.state.journal_end(token)

        # 2. untagged instances nobody accounts for (static groups' instances are named, not swept)
        for inst in inv.all():
            if not self._dynamic(inst.group):
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
            if inst.node is not None and inst.id not in to_kill and self._dynamic(inst.group):
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
                log.warning(
                    "sweep: instance(s) %s tagged with node %s that Slurm does not know", ",".join(i.id for i in live), node
                )

        for iid, why in sorted(to_kill.items()):
            log.info("decision terminate instance=%s: %s", iid, why)
        if to_kill:
            self._terminate(inv, sorted(to_kill), "sweep")
        return addresses

    # ================================================================== holds
    def release_holds(self, holds: Holds, states: dict[str, NodeState] | None) -> None:
        """Hand nodes held DOWN by the agent back to Slurm once their hold time is over."""
        now = self.clock()
        for name, h in list(holds["groups"].items()):
            if now >= float(h.get("until", 0)):
                log.info("decision hold-end group=%s (%s)", name, h.get("code"))
                del holds["groups"][name]
        if states is None:
            return
        # A node DOWN for one of our reasons but missing from holds.json (file lost): hold it anew.
        for node, st in states.items():
            group = self.cfg.group_of_node(node)
            if (
                st.has("DOWN")
                and (st.reason or "").startswith("gpucluster")
                and node not in holds["nodes"]
                and group is not None
                and not group.static
            ):
                holds["nodes"][node] = {
                    "since": now,
                    "until": now + self.cfg.failure_hold_seconds,
                    "code": "unknown",
                    "reason": st.reason,
                }
        power_down: list[str] = []
        resume: list[str] = []
        for node, h in sorted(holds["nodes"].items()):
            if now < float(h.get("until", 0)):
                continue
            del holds["nodes"][node]
            st = states.get(node)
            if st is None or not st.has("DOWN") or not (st.reason or "").startswith("gpucluster"):
                log.info("decision hold-end node=%s: no longer DOWN by the agent, nothing to do", node)
                continue
            (power_down if st.has("POWERING_UP") else resume).append(node)
        if power_down:
            log.info("decision hold-end nodes=%s: power_down_force (Slurm still waited for boot)", _fmt(power_down))
            self.slurm.power_down_force(power_down)
        if resume:
            log.info("decision hold-end nodes=%s: state=resume", _fmt(resume))
            self.slurm.resume(resume)

    def fail_nodes(
        self,
        failures: dict[str, tuple[str, str]],
        holds: Holds,
        states: dict[str, NodeState] | None,
    ) -> None:
        """Set nodes DOWN with a reason naming the error; hold ICE node groups."""
        if not failures:
            return
        now = self.clock()
        by_reason: dict[str, list[str]] = {}
        ice_groups: dict[str, tuple[str, str]] = {}
        for node, (code, msg) in failures.items():
            g = self.cfg.group_of_node(node)
            itype = f" {g.instance_type}" if g else ""
            reason = f"gpucluster: {code}{itype}" + (f": {_short(msg)}" if msg else "")
            by_reason.setdefault(reason, []).append(node)
            ice = code in ICE_CODES
            hold = self.cfg.insufficient_capacity_hold_seconds if ice else self.cfg.failure_hold_seconds
            holds["nodes"][node] = {"since": now, "until": now + hold, "code": code, "reason": reason}
            if ice and g is not None and hold > 0:
                ice_groups.setdefault(g.name, (code, reason))
        for reason, nodes in sorted(by_reason.items()):
            log.info("decision down nodes=%s reason=%r", _fmt(nodes), reason)
            self.slurm.set_down(nodes, reason)
        for gname, (code, _reason) in sorted(ice_groups.items()):
            g = self.cfg.group(gname)
            assert g is not None
            hold = self.cfg.insufficient_capacity_hold_seconds
            reason = f"gpucluster: {code} {g.instance_type}: node group {gname} held {hold}s"
            holds["groups"][gname] = {"since": now, "until": now + hold, "code": code, "reason": reason}
            idle: list[str] = []
            if states is not None:
                for node in g.node_names():
                    st = states.get(node)
                    if (
                        node not in failures
                        and st is not None
                        and st.powered_down
                        and not st.has("DOWN")
                        and not st.has("POWERING_DOWN")
                    ):
                        idle.append(node)
            log.info("decision hold group=%s for %ss (%s); also down idle nodes=%s", gname, hold, code, _fmt(idle))
            if idle:
                self.slurm.set_down(idle, reason)
                for node in idle:
                    holds["nodes"][node] = {"since": now, "until": now + hold, "code": code, "reason": reason}

    # ================================================================== common start
    def _prologue(
        self, wanted: set[str], apply_addresses: bool = True, handled: frozenset[str] = frozenset()
    ) -> tuple[Inventory, dict[str, NodeState] | None, Holds, list[tuple[str, str]]]:
        """Every subcommand starts here (holding the lock): list the cluster's instances, read Slurm's
        node states, sweep, end expired holds. Returns the adopted nodes' addresses if not applied."""
        inv = Inventory(self.ec2.list_cluster_instances())
        states = self.slurm.show_nodes()
        addresses = self.sweep(inv, states, wanted, handled)
        if addresses and apply_addresses:
            self.slurm.set_addresses(addresses)
            addresses = []
        holds = self.state.load_holds()
        self.release_holds(holds, states)
        self.reconcile_static(inv, states)
        return inv, states, holds, addresses

    # ================================================================== static groups
    def reconcile_static(self, inv: Inventory, states: dict[str, NodeState] | None) -> None:
        """Name the instances of static node groups and keep Slurm's view of those nodes true.

        Each live instance of a static group without a node name of that group gets the lowest free
        one (oldest instance first); names without an instance are set DOWN so jobs go elsewhere, and
        come back (``state=resume``) once an instance carries them. Nothing is launched or terminated:
        the Auto Scaling group owns these instances."""
        for g in self.cfg.node_groups:
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
                    " ".join(
                        f"{iid}={node}" for iid, node in sorted(assignments.items(), key=lambda kv: hostlist.order_key(kv[1]))
                    ),
                )
                failed = self.ec2.tag_nodes(assignments)
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
                    self.slurm.set_addresses(pairs)
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
                log.info("decision down nodes=%s reason=%r", _fmt(down), reason)
                self.slurm.set_down(down, reason)
            if back:
                log.info("decision static nodes=%s have instances again: state=resume", _fmt(back))
                self.slurm.resume(back)

    # ================================================================== resume
    def resume(self, nodes: list[str]) -> None:
        by_group, unknown = self.split_by_group(nodes)
        if unknown:
            log.error("decision down nodes=%s: not in any node group of the agent config", _fmt(unknown))
            self.slurm.set_down(unknown, "gpucluster: node not in agent config")
        if not by_group:
            return
        launched_or_reused = False
        with self._lock():
            wanted = {n for ns in by_group.values() for n in ns}
            inv, states, holds, addresses = self._prologue(wanted, apply_addresses=False)
            failures: dict[str, tuple[str, str]] = {}
            static_down: list[str] = []
            now = self.clock()
            for gname in sorted(by_group):
                group = self.cfg.group(gname)
                assert group is not None
                gnodes = by_group[gname]
                if group.static:
                    # Slurm wants a static node: its instance, if the Auto Scaling group runs one, is
                    # already named (reconcile_static); nothing is launched for it.
                    for n in gnodes:
                        live = inv.live_of_node(n)
                        if live:
                            keep = best_instance(live)
                            log.info("decision static node=%s instance=%s state=%s", n, keep.id, keep.state)
                            if keep.private_ip and (n, keep.private_ip) not in addresses:
                                addresses.append((n, keep.private_ip))
                        else:
                            static_down.append(n)
                    continue
                gh = holds["groups"].get(gname)
                if gh and now < float(gh.get("until", 0)):
                    log.info(
                        "decision skip-launch group=%s nodes=%s: group held until %.0f (%s)",
                        gname,
                        _fmt(gnodes),
                        float(gh["until"]),
                        gh.get("code"),
                    )
                    for n in gnodes:
                        failures[n] = (str(gh.get("code") or "InsufficientInstanceCapacity"), "node group on hold")
                    continue
                missing: list[str] = []
                for n in gnodes:
                    live = inv.live_of_node(n)
                    if live:
                        keep = best_instance(live)
                        log.info("decision reuse node=%s instance=%s state=%s", n, keep.id, keep.state)
                        launched_or_reused = True
                        if keep.private_ip and (n, keep.private_ip) not in addresses:
                            addresses.append((n, keep.private_ip))
                    else:
                        missing.append(n)
                batch_size = self.cfg.max_instances_per_fleet
                for i in range(0, len(missing), batch_size):
                    batch = missing[i : i + batch_size]
                    got = self._launch(group, batch, inv, addresses, failures)
                    launched_or_reused = launched_or_reused or got > 0
            if addresses:
                self.slurm.set_addresses(addresses)
            self.fail_nodes(failures, holds, states)
            if static_down:
                reason = f"{STATIC_NO_INSTANCE} in the Auto Scaling group of this static node"
                log.info("decision down nodes=%s reason=%r", _fmt(static_down), reason)
                self.slurm.set_down(static_down, reason)
            self.state.save_holds(holds)
        if launched_or_reused:
            self.refresh_topology()

    def _launch(
        self,
        group: NodeGroup,
        batch: list[str],
        inv: Inventory,
        addresses: list[tuple[str, str]],
        failures: dict[str, tuple[str, str]],
    ) -> int:
        token = uuid.uuid4().hex
        log.info("decision launch group=%s token=%s count=%d nodes=%s", group.name, token, len(batch), _fmt(batch))
        self.state.journal_begin(token, group.name, batch)
        result = self.ec2.create_fleet(group, len(batch), token, batch)
        ids = result.instance_ids[: len(batch)]
        extra = result.instance_ids[len(batch) :]
        assignments = dict(zip(ids, batch))
        self.state.journal_assign(token, assignments)
        # A lost answer may hide launched instances: keep the journal so the next call's sweep finds
        # and terminates them (they carry this launch token) instead of waiting out the grace period.
        clean = not result.uncertain
        if extra:
            log.error("CreateFleet returned %d more instances than asked; terminating %s", len(extra), ",".join(extra))
            clean = not self.ec2.terminate(extra, "surplus") and clean
        tag_failed = self.ec2.tag_nodes(assignments) if assignments else {}
        if tag_failed:
            bad = sorted(tag_failed)
            for iid in bad:
                failures[assignments[iid]] = (f"CreateTags.{tag_failed[iid]}", f"instance {iid} terminated")
            log.info("decision terminate instances=%s: could not tag them with their node", ",".join(bad))
            clean = not self.ec2.terminate(bad, "untaggable") and clean
        tagged = {iid: node for iid, node in assignments.items() if iid not in tag_failed}
        described: dict[str, Instance] = {}
        if tagged:
            try:
                described = self.ec2.describe_launch(token, list(tagged))
            except AWS_ERRORS as exc:
                log.error("api DescribeInstances launch-token=%s failed: %s; node addresses left to slurmd", token, exc)
        for iid, node in tagged.items():
            inst = described.get(iid)
            if inst is None:
                log.warning("instance %s of node %s not visible yet; node address left to slurmd registration", iid, node)
                continue
            inv.put(inst)
            inv.tag_node(iid, node)
            if inst.private_ip:
                addresses.append((node, inst.private_ip))
        if len(ids) < len(batch):
            ice = [e for e in result.errors if e[0] in ICE_CODES]
            code, msg = (ice or result.errors or [("NoInstanceReturned", "CreateFleet returned fewer instances")])[0]
            for node in batch[len(ids) :]:
                failures[node] = (code, msg)
        if clean:
            self.state.journal_end(token)
        return len(tagged)

    # ================================================================== suspend
    def suspend(self, nodes: list[str]) -> None:
        by_group, unknown = self.split_by_group(nodes)
        if unknown:
            log.warning("suspend: nodes=%s are not in any node group; ignoring them", _fmt(unknown))
        with self._lock():
            inv, _states, holds, _ = self._prologue(set(), handled=frozenset(n for ns in by_group.values() for n in ns))
            self.state.save_holds(holds)
            wanted = {n for gname, ns in by_group.items() if self._dynamic(gname) for n in ns}
            static = sorted({n for gname, ns in by_group.items() if not self._dynamic(gname) for n in ns}, key=hostlist.order_key)
            if static:
                log.warning(
                    "suspend: nodes=%s are static (their Auto Scaling group owns the instances); not terminating", _fmt(static)
                )
            ids: list[str] = []
            for node in sorted(wanted, key=hostlist.order_key):
                insts = inv.of_node(node)
                log.info("decision suspend node=%s instances=%s", node, ",".join(i.id for i in insts) or "-")
                ids.extend(i.id for i in insts)
            failed = self._terminate(inv, ids, "suspend")
            if failed:
                log.error("suspend: could not terminate %s; the next agent call retries", ",".join(failed))

    # ================================================================== resume-fail
    def resume_fail(self, nodes: list[str]) -> None:
        by_group, unknown = self.split_by_group(nodes)
        known = sorted({n for ns in by_group.values() for n in ns}, key=hostlist.order_key)
        with self._lock():
            inv, _states, holds, _ = self._prologue(set(), handled=frozenset(known))
            now = self.clock()
            ids: list[str] = []
            by_reason: dict[str, list[str]] = {}
            for node in known:
                insts = inv.of_node(node)
                group = self.cfg.group_of_node(node)
                if group is not None and group.static:
                    by_reason.setdefault(
                        f"gpucluster: ResumeTimeout, static node did not register ({','.join(i.id for i in insts) or 'no instance'})",
                        [],
                    ).append(node)
                    log.info(
                        "decision resume-fail static node=%s instances=%s (left to the Auto Scaling group)",
                        node,
                        ",".join(i.id for i in insts) or "-",
                    )
                    continue
                ids.extend(i.id for i in insts)
                h = holds["nodes"].get(node)
                if h and now < float(h.get("until", 0)) and h.get("reason"):
                    reason = str(h["reason"])
                else:
                    what = ",".join(i.id for i in insts) or "no instance"
                    reason = f"gpucluster: ResumeTimeout, node did not register ({what})"
                    holds["nodes"][node] = {
                        "since": now,
                        "until": now + self.cfg.failure_hold_seconds,
                        "code": "ResumeTimeout",
                        "reason": reason,
                    }
                by_reason.setdefault(reason, []).append(node)
                log.info("decision resume-fail node=%s instances=%s", node, ",".join(i.id for i in insts) or "-")
            self._terminate(inv, ids, "resume-fail")
            for reason, ns in sorted(by_reason.items()):
                log.info("decision down nodes=%s reason=%r", _fmt(ns), reason)
                self.slurm.set_down(ns, reason)
            if unknown:
                self.slurm.set_down(unknown, "gpucluster: node not in agent config")
            self.state.save_holds(holds)

    # ================================================================== maintenance
    def maintain(self) -> None:
        """Sweep, end expired holds, refresh topology: for a timer (e.g. every 60 s)."""
        with self._lock():
            _inv, _states, holds, _ = self._prologue(set())
            self.state.save_holds(holds)
        self.refresh_topology()

    def topology(self) -> None:
        """The ``topology`` subcommand: sweep (like every call), then rewrite topology.conf."""
        with self._lock():
            _inv, _states, holds, _ = self._prologue(set())
            self.state.save_holds(holds)
        self.refresh_topology()

    def refresh_topology(self) -> bool:
        """Rewrite topology.conf from DescribeInstanceTopology; ``scontrol reconfigure`` if it changed."""
        path = self.cfg.topology_conf
        if not path:
            return False
        with self.state.lock(self.cfg.lock_timeout_seconds, name="topology"):
            inv = Inventory(self.ec2.list_cluster_instances())
            by_id: dict[str, str] = {}
            for inst in inv.all():
                if inst.state == "running" and inst.node and self.cfg.group_of_node(inst.node):
                    by_id[inst.id] = inst.node
            try:
                topo = self.ec2.instance_topology(sorted(by_id)) if by_id else {}
            except Exception as exc:
                log.error("topology: DescribeInstanceTopology failed (%s); keeping %s", exc, path)
                return False
            placements = {by_id[iid]: nodes for iid, nodes in topo.items() if iid in by_id}
            lines = render_topology(placements, [(g.name, g.node_names()) for g in self.cfg.node_groups])
            changed = write_if_changed(path, lines)
            log.info(
                "decision topology %s placed=%d switches=%d",
                "rewritten" if changed else "unchanged",
                len(placements),
                len(lines) - 2,
            )
            if changed:
                self.slurm.reconfigure()
            return changed
