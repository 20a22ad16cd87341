# pyright: strict
"""What the agent does for each Slurm call: the thin subcommands (resume, suspend, resume-fail,
maintain, topology) over their collaborators. Every subcommand holds the state_dir lock while it
reads and changes instances, and starts with a sweep, so a crash of any earlier call is repaired
by the next one.

Who does what: ``inventory`` (the cluster's instances and which node group a node is in),
``lifecycle`` (nodes whose instance AWS took away, instances of removed or shrunk groups),
``sweep`` (repair at the start of every call), ``launcher`` (CreateFleet batches, termination),
``holds`` (backing off after failures), ``static_groups`` (naming Auto Scaling group instances).

Never leaking an instance, in three layers:
1. Tags at launch. CreateFleet tags every instance with the cluster, node group and a fresh launch
   token (also the ClientToken). The batch's node names then go to one S3 node map and
   ``names.json`` (``power/names.py``; ``maintain`` tags them later), or without ``node_map`` to a
   CreateTags per instance.
2. A launch journal. ``journal/<token>.json`` is written before CreateFleet and gets the
   instance -> node assignment right after it; it is removed once all instances carry their node
   name. A journal entry seen by a process holding the lock is therefore a launch that crashed
   between CreateFleet and the end of tagging. The sweep then *adopts* each assigned instance
   if its node may be running on it (the node is being resumed by this call, or Slurm shows it up in
   any state but powered down, powering down or held DOWN by the agent, and it has no other
   instance): it tags it and sets the node address. Otherwise the instance is terminated, but never
   while Slurm's node states cannot be read. Instances of a crashed launch with no assignment yet
   go to the entry's nodes still waiting for their boot (by launch token); those nodes left without
   one are powered down at once. The entry is kept for ``orphan_grace_seconds`` to catch instances
   that EC2's eventually consistent DescribeInstances shows late, then dropped (``power/sweep.py``).
3. A catch-all. Any instance with the cluster tag, no node name (tag, ``names.json``, or its launch's
   node map), no journal entry and first seen by the agent more than ``orphan_grace_seconds`` ago is
   terminated. So is any second instance of one node, any stopped instance, and any instance whose
   node Slurm shows powered down (a suspend that failed).

Idempotency: resume reuses the pending/running instance already tagged with a node's name and
only launches for nodes without one; CreateFleet's ClientToken guards botocore's own retries.

Static node groups (``mode: static``) belong to an Auto Scaling group: the agent never launches or
terminates their instances. Every call names each new instance of such a group after the lowest
free node (the instance waits for that tag before it starts slurmd), sets nodes without an
instance DOWN and hands them back once an instance carries their name (``power/static_groups.py``).

Failures: nodes that got no instance are set DOWN with a reason naming the EC2 error code, so
Slurm requeues the job and can run it in another partition; a node that got one is never set DOWN
(not by an error later in the call either: topology is best effort). After insufficient capacity the
whole node group is held: its later batches in the call, its idle powered-down nodes and resumes
during the hold fail fast without calling EC2. A DOWN Slurm did not get is sent again (``holds``). Holds end after ``insufficient_capacity_hold_seconds``
(``failure_hold_seconds`` for other errors): the next agent call (a timer running ``maintain``
every minute makes this prompt) hands the nodes back to Slurm (``state=resume``, or
``state=power_down_force`` if Slurm still waits for them to boot).
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from .contract import AgentConfig, NodeGroup, hostlist
from .power.baseline import make as make_rebaseline
from .power.baseline import status_lines as baseline_status
from .power.ec2 import Ec2, Instance
from .power.error_codes import ICE_CODES
from .power.holds import Holds, fail_nodes, mark_applied, release_holds, resume_timeout_reason
from .power.holds import status_lines as holds_status
from .power.inventory import Inventory, best_instance, fmt_nodes, is_dynamic, split_by_group
from .power.launcher import launch, terminate
from .power.lifecycle import handle_strays, return_vanished, split_strays
from .power.lifecycle import status_lines as vanished_status
from .power.names import NameBook, recover_from_maps, tag_lazily
from .power.nodemap import NodeMapPublisher
from .power.roll import Roll
from .power.roll import status_lines as roll_status
from .power.slurm import NodeState, Slurm
from .power.spot import watch
from .power.state import FileLock, StateDir
from .power.static_groups import STATIC_NO_INSTANCE, reconcile_static
from .power.sweep import status_lines as sweep_status
from .power.sweep import sweep
from .power.topology_pass import refresh_topology
from .repair.api import RepairApi
from .repair.brake import Brake
from .repair.brake import status_lines as brake_status
from .repair.protect import Protection, protect_pass
from .repair.protect import status_lines as protect_status
from .repair.quarantine import Quarantine
from .repair.quarantine import status_lines as quarantine_status

log = logging.getLogger("gpucluster_agents")


class Agent:
    """One agent call's collaborators (config, EC2, Slurm, state_dir, clock) and the subcommands."""

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
        self.state = state if state is not None else StateDir(cfg.state_dir, clock)
        self.clock = clock
        self.strays: list[Instance] = []  # instances of removed or shrunk groups, set by _prologue
        self.listed: list[Instance] = []  # the instances as EC2 lists them (tags unchanged), set by _prologue
        self.unread: frozenset[str] = frozenset()  # instances whose node map S3 could not read, set by _prologue
        self.book = NameBook(self.state.path)  # names from node maps EC2 does not carry as tags yet (power/names.py)
        self.maps = NodeMapPublisher(cfg, cfg.node_map) if cfg.node_map is not None else None
        self.placed: set[str] = set()  # nodes this resume found or launched an instance for (never set DOWN)

    # ================================================================== helpers
    def expand(self, expr: str) -> list[str]:
        return self.slurm.expand(expr) if expr.strip() else []

    def unplaced(self, nodes: list[str]) -> list[str]:
        """The nodes of ``nodes`` this call gave no instance: the only ones an error may set DOWN."""
        return [n for n in nodes if n not in self.placed]

    def _lock(self) -> FileLock:
        return self.state.lock(self.cfg.lock_timeout_seconds)

    # ================================================================== common start
    def _prologue(
        self, wanted: set[str], apply_addresses: bool = True, handled: frozenset[str] = frozenset()
    ) -> tuple[Inventory, dict[str, NodeState] | None, Holds, list[tuple[str, str]]]:
        """Every subcommand starts here (holding the lock): list the cluster's instances, read Slurm's
        node states, sweep, end expired holds. Returns the adopted nodes' addresses if not applied."""
        self.listed = self.ec2.list_cluster_instances()
        self.book = NameBook(self.state.path, repair=True)
        named = self.book.apply(self.listed, self.clock(), self.cfg.orphan_grace_seconds)
        self.unread = recover_from_maps(self.cfg, self.book, self.maps, named, self.state.journal_assigned(), self.clock())
        named = self.book.apply(self.listed, self.clock(), self.cfg.orphan_grace_seconds, prune=False)
        mine, self.strays = split_strays(self.cfg, named)
        inv = Inventory(mine)
        states = self.slurm.show_nodes()
        addresses = sweep(self.cfg, self.ec2, self.slurm, self.state, inv, states, wanted, self.clock(), handled, self.unread)
        if addresses and apply_addresses:
            self.slurm.set_addresses(addresses)
            addresses = []
        holds = self.state.load_holds()
        protect_pass(self.cfg, self.slurm, self.state.path, inv, states, holds, self.clock())
        release_holds(self.cfg, self.slurm, holds, states, self.clock(), lambda n: bool(inv.live_of_node(n)))
        reconcile_static(self.cfg, self.ec2, self.slurm, inv, states)
        return inv, states, holds, addresses

    # ================================================================== resume
    def resume(self, nodes: list[str]) -> None:
        by_group, unknown = split_by_group(self.cfg, nodes)
        if unknown:
            log.error("decision down nodes=%s: not in any node group of the agent config", fmt_nodes(unknown))
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
                if group is None:
                    raise ValueError("the node names a node group of the config")
                gnodes = by_group[gname]
                if group.static:
                    # Slurm wants a static node: its instance, if the Auto Scaling group runs one, is
                    # already named (reconcile_static); nothing is launched for it.
                    for n in gnodes:
                        live = inv.live_of_node(n)
                        if live:
                            keep = best_instance(live)
                            log.info("decision static node=%s instance=%s state=%s", n, keep.id, keep.state)
                            self.placed.add(n)
                            if keep.private_ip and (n, keep.private_ip) not in addresses:
                                addresses.append((n, keep.private_ip))
                        else:
                            static_down.append(n)
                    continue
                got = self._resume_dynamic(group, gnodes, inv, holds, now, addresses, failures)
                launched_or_reused = launched_or_reused or got
            if addresses:
                self.slurm.set_addresses(addresses)
            if failures:
                fail_nodes(self.cfg, self.slurm, failures, holds, states, self.clock())
            if static_down:
                reason = f"{STATIC_NO_INSTANCE} in the Auto Scaling group of this static node"
                log.info("decision down nodes=%s reason=%r", fmt_nodes(static_down), reason)
                self.slurm.set_down(static_down, reason)
            self.state.save_holds(holds)
        if launched_or_reused:
            self.refresh_topology_best_effort()

    def _resume_dynamic(
        self,
        group: NodeGroup,
        gnodes: list[str],
        inv: Inventory,
        holds: Holds,
        now: float,
        addresses: list[tuple[str, str]],
        failures: dict[str, tuple[str, str]],
    ) -> bool:
        """Reuse or launch instances for a dynamic group's nodes; True if any node has one now. A group on
        hold, or one that answered insufficient capacity earlier in this call, fails its nodes without EC2."""
        gh = holds["groups"].get(group.name)
        if gh and now < float(gh.get("until", 0)):
            log.info(
                "decision skip-launch group=%s nodes=%s: group held until %.0f (%s)",
                group.name,
                fmt_nodes(gnodes),
                float(gh["until"]),
                gh.get("code"),
            )
            for n in gnodes:
                failures[n] = (str(gh.get("code") or "InsufficientInstanceCapacity"), "node group on hold")
            return False
        any_up = False
        missing: list[str] = []
        for n in gnodes:
            live = inv.live_of_node(n)
            if live:
                keep = best_instance(live)
                log.info("decision reuse node=%s instance=%s state=%s", n, keep.id, keep.state)
                self.placed.add(n)
                any_up = True
                if keep.private_ip and (n, keep.private_ip) not in addresses:
                    addresses.append((n, keep.private_ip))
            else:
                missing.append(n)
        batch_size = self.cfg.max_instances_per_fleet
        for i in range(0, len(missing), batch_size):
            batch = missing[i : i + batch_size]
            ice = next((failures[n] for n in missing[:i] if n in failures and failures[n][0] in ICE_CODES), None)
            if ice is not None:
                # the pool is dry: another CreateFleet in the same call would only fail again (or take capacity
                # piecemeal); the group is held once the call ends (fail_nodes)
                left = missing[i:]
                log.info(
                    "decision skip-launch group=%s nodes=%s: insufficient capacity earlier in this call",
                    group.name,
                    fmt_nodes(left),
                )
                for n in left:
                    failures[n] = (ice[0], f"insufficient capacity earlier in this call: {ice[1]}")
                break
            naming = (self.maps, self.book, self.clock()) if self.maps is not None else None
            got = launch(self.ec2, self.state, group, batch, inv, addresses, failures, naming)
            for n in batch:
                if n not in failures:
                    self.placed.add(n)
                    holds["nodes"].pop(n, None)  # it has an instance: an older hold of the node is over
            any_up = any_up or got > 0
        return any_up

    # ================================================================== suspend
    def suspend(self, nodes: list[str]) -> None:
        by_group, unknown = split_by_group(self.cfg, nodes)
        if unknown:
            log.warning("suspend: nodes=%s are not in any node group; ignoring them", fmt_nodes(unknown))
        with self._lock():
            inv, _states, holds, _ = self._prologue(set(), handled=frozenset(n for ns in by_group.values() for n in ns))
            self.state.save_holds(holds)
            wanted = {n for gname, ns in by_group.items() if is_dynamic(self.cfg, gname) for n in ns}
            static = sorted(
                {n for gname, ns in by_group.items() if not is_dynamic(self.cfg, gname) for n in ns}, key=hostlist.order_key
            )
            if static:
                log.warning(
                    "suspend: nodes=%s are static (their Auto Scaling group owns the instances); not terminating",
                    fmt_nodes(static),
                )
            ids: list[str] = []
            for node in sorted(wanted, key=hostlist.order_key):
                insts = inv.of_node(node)
                log.info("decision suspend node=%s instances=%s", node, ",".join(i.id for i in insts) or "-")
                ids.extend(i.id for i in insts)
            failed = terminate(self.ec2, inv, ids, "suspend")
            if failed:
                log.error("suspend: could not terminate %s; the next agent call retries", ",".join(failed))

    # ================================================================== resume-fail
    def resume_fail(self, nodes: list[str]) -> None:
        by_group, unknown = split_by_group(self.cfg, nodes)
        known = sorted({n for ns in by_group.values() for n in ns}, key=hostlist.order_key)
        with self._lock():
            inv, _states, holds, _ = self._prologue(set(), handled=frozenset(known))
            now = self.clock()
            ids: list[str] = []
            by_reason: dict[str, list[str]] = {}
            boot_failures: dict[str, list[str]] = {}
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
                if insts and group is not None:  # launched but never registered: a boot failure
                    boot_failures.setdefault(group.name, []).append(node)
                reason = resume_timeout_reason(self.cfg, holds, node, ",".join(i.id for i in insts) or "no instance", now)
                by_reason.setdefault(reason, []).append(node)
                log.info("decision resume-fail node=%s instances=%s", node, ",".join(i.id for i in insts) or "-")
            terminate(self.ec2, inv, ids, "resume-fail")
            for reason, ns in sorted(by_reason.items()):
                log.info("decision down nodes=%s reason=%r", fmt_nodes(ns), reason)
                mark_applied(holds, ns, self.slurm.set_down(ns, reason))
            if unknown:
                self.slurm.set_down(unknown, "gpucluster: node not in agent config")
            protect_pass(self.cfg, self.slurm, self.state.path, inv, _states, holds, now, boot_failures)
            self.state.save_holds(holds)

    # ================================================================== maintenance
    def maintain(self) -> None:
        """Sweep, end expired holds, clean up after lost instances and removed groups (``lifecycle``), repair
        drained nodes (``quarantine``), refresh topology: for a timer (e.g. every 60 s)."""
        with self._lock():
            inv, states, holds, _ = self._prologue(set())
            self.state.save_holds(holds)
            handle_strays(self.cfg, self.ec2, self.slurm, self.state, self.strays, states, self.clock())
            stray_nodes = frozenset(i.node for i in self.strays if i.live and i.node)
            unsure = frozenset(str(i.group) for i in self.listed if i.id in self.unread)
            return_vanished(self.cfg, self.slurm, inv, states, self.state, self.clock(), skip=stray_nodes, unsure=unsure)
            api = RepairApi(self.cfg, self.ec2.client)
            quarantine = Quarantine(self.cfg, api, self.slurm, self.state.path)
            quarantine.run(inv, states, self.clock())
            rebaseline = make_rebaseline(self.cfg, self.slurm, self.state.path)  # the new image's figures gate the roll
            roll = Roll(self.cfg, self.slurm, self.state.path, api.set_unhealthy, rebaseline)  # onto a new image (roll.py)
            roll.run(self.ec2.client, inv, states, self.clock(), frozenset(quarantine.changed) | stray_nodes)
            tag_lazily(self.ec2, self.book, [i for i in self.listed if i.id in inv.by_id])
        self.refresh_topology()

    def spot_watch(self, once: bool = False) -> None:
        """The ``spot-watch`` service: act on spot interruption, rebalance and capacity block warnings (``power/spot.py``)."""
        from .power.ec2 import make_client

        watch(self.cfg, make_client(self.cfg, "sqs"), self.ec2.client, self.slurm, once=once)

    def clear_protect(self, groups: list[str]) -> None:
        """The operator's ``clear-protect <group>``: the group launches again; its nodes are handed back."""
        with self._lock():
            p = Protection(self.cfg, self.state.path)
            for g in groups:
                p.clear(g)
            p.save()
            _inv, _states, holds, _ = self._prologue(set())
            self.state.save_holds(holds)

    def release_brake(self, groups: list[str]) -> list[str]:
        """The operator's ``release-brake <group>``: repairs of the group resume with the next ``maintain``."""
        with self._lock():
            brake = Brake(self.cfg, self.state.path, self.clock())
            out = [f"group {g}: {'released' if brake.release(g) else 'no brake was on'}" for g in groups if self.cfg.group(g)]
            brake.save()
        return out + [f"{g}: no such node group" for g in groups if self.cfg.group(g) is None]

    def status(self) -> list[str]:
        """``status``: protected groups, repair brakes, holds, node repairs (the verdicts Slurm forgot on power-down),
        crashed launches and orphans waiting, vanished nodes (waiting for a second listing, or stopped by the cap)."""
        now, path = self.clock(), self.state.path
        brakes = brake_status(self.cfg, path, now)
        own = sweep_status(self.state, now) + vanished_status(path) + roll_status(path) + baseline_status(path)
        return (
            protect_status(self.cfg, path) + brakes + holds_status(self.state.load_holds(), now) + quarantine_status(path) + own
        )

    def topology(self) -> None:
        """The ``topology`` subcommand: sweep (like every call), then rewrite topology.conf."""
        with self._lock():
            _inv, _states, holds, _ = self._prologue(set())
            self.state.save_holds(holds)
        self.refresh_topology()

    def refresh_topology_best_effort(self) -> bool:
        """After a launch: a topology error is logged, never raised (the launched nodes are fine without
        it; the next ``maintain`` or resume writes topology.conf)."""
        try:
            return self.refresh_topology()
        except Exception as exc:  # best effort by design: the launch already succeeded
            log.error("topology: refresh failed after the launch (%s: %s); keeping topology.conf", type(exc).__name__, exc)
            return False

    def refresh_topology(self) -> bool:
        """Rewrite topology.conf from DescribeInstanceTopology; ``scontrol reconfigure`` if it changed."""
        return refresh_topology(self.cfg, self.state, self.ec2, self.slurm, self.clock())
