# pyright: strict, reportMissingTypeStubs=false
"""Spot and capacity warnings: the ``spot-watch`` service reads the queue an EventBridge rule fills (the components'
``_spot_events``) and acts before the instance goes, so jobs are requeued instead of dying with the node.

Why a service of its own and not the maintenance pass: a spot instance gets two minutes' warning, and the timer runs
``maintain`` every minute at best, after the sweep and the repairs. The service long-polls the queue (20 s, the SQS
maximum), so an event is acted on within seconds of its arrival; it takes no lock (it only reads instances and
updates node states) and one bad message never stops it.

What each event does (the rule's detail-types, :data:`gpucluster_agents.contract.spot.DETAIL_TYPES`):
- ``EC2 Spot Instance Interruption Warning``: a dynamic node is powered down at once (``power_down_force`` with
  :data:`SPOT_REASON`): Slurm requeues its batch jobs (``JobRequeue=1``, Slurm's default: jobs submitted with
  ``--no-requeue`` end instead), its SuspendProgram terminates the instance two minutes before AWS would, and the
  node is back in service (``idle~``) for the next launch. Not ``state=DOWN``: measured with slurmctld 22.05 and
  the rendered ``ReturnToService=2``, a DOWN node whose slurmd still answers re-registers and is IDLE again within a
  second, so the requeued job could land on it again. A static node is set DOWN and drained (the drain survives
  its re-registration); its Auto Scaling group replaces the instance once AWS takes it.
- ``EC2 Instance Rebalance Recommendation`` (an earlier, softer signal): the node is drained with
  :data:`REBALANCE_REASON`; its jobs finish, and the repair pass replaces it once idle like any ``(replace)`` drain.
- ``Capacity Block Reservation Expiration Warning`` (40 minutes before a capacity block ends, its instances are
  terminated from 30 minutes before): every node of the groups launched into that reservation is drained with
  :data:`BLOCK_REASON`, so no new job starts there and running ones can finish or checkpoint; the instances' end then
  goes the same way as a spot interruption's.

Instances are mapped to nodes by one listing of the cluster's instances per batch of messages (by the cluster tag:
events of other instances of the account are not ours and are dropped), read as the rest of the agent reads it
(:func:`warned_nodes`): a warning acts on a node only when it names the node's own instance, never a stray second
instance that carries the node's name while the node's job runs on its real one. A message is deleted once
handled; when Slurm could not be updated it is left in the queue and comes back after its visibility timeout."""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Callable, cast
from urllib.parse import urlsplit

from ..contract import AgentConfig
from ..contract.spot import BLOCK_ENDING, INTERRUPTION, REBALANCE, WAIT_SECONDS
from .ec2 import AWS_ERRORS, Ec2, Instance, error_code, error_message
from .inventory import Inventory, best_instance, fmt_nodes
from .names import NameBook
from .slurm import Slurm

log = logging.getLogger("gpucluster_agents")

SPOT_REASON = "gpucluster: spot interruption"
REBALANCE_REASON = "gpucluster: spot rebalance recommendation (replace)"
BLOCK_REASON = "gpucluster: capacity block ending"


def queue_account(queue_url: str) -> str | None:
    """The account that owns the queue: an SQS queue URL is ``https://sqs.<region>.amazonaws.com/<account>/<name>``."""
    parts = urlsplit(queue_url).path.split("/")
    return parts[1] if len(parts) == 3 and parts[1].isdigit() and len(parts[1]) == 12 else None


def read_event(body: str, account: str | None, region: str) -> tuple[str, str, str] | None:
    """``(detail-type, "instance" | "reservation", id)`` of an EventBridge event of EC2 (``source`` ``aws.ec2``) in
    ``account`` and ``region`` (the cluster's), or None for anything else. The queue takes messages from the
    cluster's rule only (its policy denies every other sender), and EC2's events carry its own account and region:
    a body that claims another source, account or region did not come from that rule."""
    try:
        raw = json.loads(body)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    event = cast("dict[str, Any]", raw)
    if account is None or event.get("source") != "aws.ec2" or event.get("account") != account or event.get("region") != region:
        return None
    kind = str(event.get("detail-type") or event.get("detail_type") or "")
    detail = cast("dict[str, Any]", event.get("detail") if isinstance(event.get("detail"), dict) else {})
    if kind in (INTERRUPTION, REBALANCE) and isinstance(detail.get("instance-id"), str):
        return kind, "instance", str(detail["instance-id"])
    if kind in BLOCK_ENDING and isinstance(detail.get("capacity-reservation-id"), str):
        return kind, "reservation", str(detail["capacity-reservation-id"])
    return None


def warned_nodes(cfg: AgentConfig, listed: list[Instance], ids: list[str], groups: dict[str, str]) -> dict[str, list[str]]:
    """instance id or reservation id -> the nodes a warning about it concerns, from the agent's node -> instance map:
    a node's instance is the one the sweep keeps (``best_instance`` of the live instances named for it, by tag or
    ``names.json``). A warning for another instance carrying a node's name (a stray second instance) concerns no
    node: the node's job runs on its own instance, and the sweep ends the stray. ``groups``: node group -> the
    reservation a warning names."""
    inv = Inventory(i for i in listed if i.live and i.node is not None and cfg.group_of_node(i.node) is not None)
    out: dict[str, list[str]] = {}
    for iid in ids:
        inst = inv.by_id.get(iid)
        if inst is None or inst.node is None:
            continue
        mapped = best_instance(inv.live_of_node(inst.node))
        if mapped.id == iid:
            out[iid] = [inst.node]
        else:
            log.warning(
                "spot-watch: instance %s carries node %s's name, but the node's instance is %s: the node is left alone"
                " (the sweep ends the second instance)",
                iid,
                inst.node,
                mapped.id,
            )
    for inst in inv.all():
        group = cfg.group_of_node(str(inst.node))
        if group is not None and group.name in groups:
            out.setdefault(groups[group.name], []).append(str(inst.node))
    return out


class SpotWatch:
    """One reader of the queue (``sqs`` and ``ec2``: boto3 clients)."""

    def __init__(self, cfg: AgentConfig, sqs: Any, ec2: Any, slurm: Slurm, queue_url: str) -> None:
        self.cfg, self.sqs, self.ec2, self.slurm, self.queue_url = cfg, sqs, ec2, slurm, queue_url
        self.account = queue_account(queue_url)
        if self.account is None:
            log.error("spot-watch: no account in the queue URL %s: every message is refused", queue_url)

    def poll(self, wait: int = WAIT_SECONDS) -> int:
        """Receive up to 10 messages, act on them, delete the handled ones; returns how many were received."""
        resp = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=wait)
        messages = cast("list[dict[str, Any]]", resp.get("Messages") or [])
        if not messages:
            return 0
        events = {str(m["ReceiptHandle"]): read_event(str(m.get("Body") or ""), self.account, self.cfg.region) for m in messages}
        for handle, ev in events.items():
            if ev is None:
                log.warning("spot-watch: message %s is not an event this service acts on; deleting it", handle[:16])
        ids = sorted({ev[2] for ev in events.values() if ev is not None and ev[1] == "instance"})
        reservations = {ev[2] for ev in events.values() if ev is not None and ev[1] == "reservation"}
        nodes = self._nodes(ids, reservations)
        if nodes is None:
            return len(messages)  # EC2 unreadable: the messages come back after their visibility timeout
        done = [h for h, ev in events.items() if ev is None or self._act(ev, nodes)]
        if done:
            entries = [{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(done)]
            self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=entries)
        return len(messages)

    def _nodes(self, ids: list[str], reservations: set[str]) -> dict[str, list[str]] | None:
        """instance id or reservation id -> the cluster's nodes on it, from one listing of the cluster's instances
        (None: it failed)."""
        groups = {g.name: g.capacity.reservation_id for g in self.cfg.node_groups if g.capacity.reservation_id in reservations}
        if not ids and not groups:
            return {}
        try:
            listed = Ec2(self.cfg, self.ec2).list_cluster_instances()
        except AWS_ERRORS as exc:
            log.error("spot-watch: api DescribeInstances failed: %s: %s", error_code(exc), error_message(exc))
            return None
        named = NameBook(self.cfg.state_dir).apply(listed, time.time(), self.cfg.orphan_grace_seconds, prune=False)
        return warned_nodes(self.cfg, named, ids, groups)

    def _act(self, ev: tuple[str, str, str], nodes: dict[str, list[str]]) -> bool:
        """Act on one event; True when it is done with (Slurm updated, or not one of the cluster's nodes)."""
        kind, what, ident = ev
        targets = sorted(set(nodes.get(ident, [])))
        if not targets:
            log.info("spot-watch: %s for %s %s: not a node of this cluster", kind, what, ident)
            return True
        states = self.slurm.show_nodes() or {}
        targets = [n for n in targets if not (states.get(n) and states[n].powered_down)]
        if kind == INTERRUPTION:
            static = [n for n in targets if (g := self.cfg.group_of_node(n)) is not None and g.static]
            dynamic = [n for n in targets if n not in static]
            log.info("decision power_down_force nodes=%s reason=%r (%s %s)", fmt_nodes(dynamic), SPOT_REASON, kind, ident)
            ok = self.slurm.power_down_force(dynamic, SPOT_REASON)
            if static:
                log.info("decision down+drain nodes=%s reason=%r (%s %s)", fmt_nodes(static), SPOT_REASON, kind, ident)
                ok = self.slurm.set_down(static, SPOT_REASON) and self.slurm.drain(static, SPOT_REASON) and ok
            return ok
        reason = REBALANCE_REASON if kind == REBALANCE else BLOCK_REASON
        targets = [n for n in targets if not (states.get(n) and (states[n].has("DRAIN") or states[n].has("DOWN")))]
        log.info("decision drain nodes=%s reason=%r (%s %s)", fmt_nodes(targets), reason, kind, ident)
        return self.slurm.drain(targets, reason)


def watch(
    cfg: AgentConfig, sqs: Any, ec2: Any, slurm: Slurm, once: bool = False, sleep: Callable[[float], None] = time.sleep
) -> None:
    """The service's loop (``once``: a single short poll, for tests and an operator's check)."""
    if not cfg.spot_queue_url:
        log.info("spot-watch: the config names no spot_queue_url; nothing to watch")
        return
    w = SpotWatch(cfg, sqs, ec2, slurm, cfg.spot_queue_url)
    while True:
        try:
            w.poll(wait=1 if once else WAIT_SECONDS)
        except AWS_ERRORS as exc:
            log.error("spot-watch: api ReceiveMessage failed: %s: %s; retrying in 10 s", error_code(exc), error_message(exc))
            if not once:
                sleep(10)
        if once:
            return
