# pyright: strict, reportMissingTypeStubs=false
"""Rolling replacement: nodes whose instance runs an older image or launch template version than their group's
launch template names now are drained and replaced, a share of each group at a time, in the maintenance pass.

What "current" is: the group's launch template version as the agent config names it (``$Default``: GpuNodeGroup
makes every new version the default) resolved by one DescribeLaunchTemplateVersions per group and pass, giving
its version number and image. An instance is old when its ImageId (DescribeInstances, the listing every call
already makes: no call per node) is not that image, or its ``aws:ec2launchtemplate:version`` tag (EC2 tags
instances launched from a template) names another version.

Never killing work, never stranding a node (the steps of one pass, per node group):
1. Nodes the roll acted on earlier are followed until their old instance is gone (power-down or the Auto
   Scaling group took it); a drained node of ours that has a current instance, or none (powered down), is
   handed back (``state=resume``).
2. A failed rollout stops the roll: ``updates.stop_after_boot_failures`` consecutive boot failures of the group
   (``repair/protect.py`` counts them) since the roll began, the group in protected mode, or a failed
   re-baseline of the new image (``baseline.py``; until it passed the roll drains only the nodes it needs). The nodes the roll
   drained and had not replaced yet are handed back: they stay in service on the old image, and no more are
   drained. The log says so at ERROR and ``status`` shows it until the group's target changes again.
   The group's repair brake (``repair/brake.py``: health drained too many of its nodes, e.g. the new image's
   first replacements) stops it the same way, until an operator releases the brake: a roll that went on would
   trade more healthy nodes for ones that may fail the same way.
3. Drained nodes of ours that are idle (no job, not completing) are replaced: dynamic ones powered down
   (``power_down_force``: slurmctld's SuspendProgram terminates the instance, the next resume launches the new
   version), static ones marked Unhealthy in their Auto Scaling group (which replaces the instance;
   ``static_groups`` names the new one and hands the node back). A node is only replaced in a pass after the
   one that drained it, once Slurm shows it idle and drained: a job can never start on it in between.
4. Inside the maintenance window (if any), more old nodes are drained with the reason :data:`REASON`, idle ones
   first, while at most ``updates.max_drained_percent`` of the group's nodes (its partition) are drained or
   being replaced by the roll.

Nodes in another state (down, drained by an operator or the health program, powering up or down) are left
alone; the repair pass (``repair/quarantine.py``) ignores drains with :data:`REASON`. State:
``state_dir/roll.json`` = ``{"groups": {group: {target, since, stopped, replaced}}, "acting": {node: {group,
instance, since}}}``; an acting record is written before its action, so a crash repeats the action (both are
idempotent)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from ..contract import AgentConfig, NodeGroup, hostlist
from ..repair.brake import Brake
from ..repair.protect import Protection
from .baseline import GO, Rebaseline
from .ec2 import AWS_ERRORS, Instance, error_code, error_message
from .inventory import Inventory, best_instance, fmt_nodes
from .slurm import NodeState, Slurm
from .state import read_json, write_json_atomic

log = logging.getLogger("gpucluster_agents")

REASON = "gpucluster: image update"
FILE = "roll.json"
VERSION_TAG = "aws:ec2launchtemplate:version"


@dataclass(frozen=True)
class Target:
    """What a group's nodes should run: the launch template version number and its image."""

    version: str
    image_id: str

    @property
    def key(self) -> str:
        return f"{self.version}/{self.image_id or '-'}"

    def outdated(self, inst: Instance) -> bool:
        tagged = inst.tags.get(VERSION_TAG)
        if self.image_id and inst.image_id and inst.image_id != self.image_id:
            return True
        return bool(self.version and tagged and tagged != self.version)


def resolve_targets(client: Any, groups: Iterable[NodeGroup]) -> dict[str, Target]:
    """One DescribeLaunchTemplateVersions per group (its template and version as the config names them; the same answer
    as ``power/images.expected_image``, with the version number too), none for a group whose config names its image; a
    group whose call failed is left out (its roll waits for the next pass)."""
    out: dict[str, Target] = {}
    for g in groups:
        if g.image_id:  # the config names the image (``NodeGroup.image_id``): no call, the image alone decides
            out[g.name] = Target("", g.image_id)
            continue
        try:
            resp = client.describe_launch_template_versions(
                LaunchTemplateId=g.launch_template_id, Versions=[g.launch_template_version]
            )
        except AWS_ERRORS as exc:
            log.error("api DescribeLaunchTemplateVersions group=%s failed: %s: %s", g.name, error_code(exc), error_message(exc))
            continue
        versions = cast("list[dict[str, Any]]", resp.get("LaunchTemplateVersions") or [])
        if not versions:
            log.error("api DescribeLaunchTemplateVersions group=%s: no version %s", g.name, g.launch_template_version)
            continue
        v = versions[0]
        data = cast("dict[str, Any]", v.get("LaunchTemplateData") or {})
        out[g.name] = Target(str(v.get("VersionNumber")), str(data.get("ImageId") or ""))
        log.info(
            "api DescribeLaunchTemplateVersions group=%s version=%s image=%s", g.name, v.get("VersionNumber"), data.get("ImageId")
        )
    return out


def busy(st: NodeState) -> bool:
    """A job may still run on the node: anything but IDLE or DOWN as its base state, or COMPLETING."""
    return st.has("COMPLETING") or not (st.has("IDLE") or st.has("DOWN"))


def ours(st: NodeState | None) -> bool:
    return st is not None and st.has("DRAIN") and (st.reason or "").strip() == REASON


def share(cfg: AgentConfig, group: NodeGroup) -> int:
    """How many of the group's nodes the roll may hold drained or replacing at once: the share, at least one."""
    return max(1, group.max_nodes * cfg.updates.max_drained_percent // 100)


def in_window(cfg: AgentConfig, now: float) -> bool:
    window = cfg.updates.window
    if window is None:
        return True
    t = time.gmtime(now)
    return window.contains(t.tm_wday, t.tm_hour * 60 + t.tm_min)


class Roll:
    """``state_dir/roll.json`` and one pass over every group (see the module docstring)."""

    def __init__(
        self, cfg: AgentConfig, slurm: Slurm, state_dir: str, set_unhealthy: Any, baseline: Rebaseline | None = None
    ) -> None:
        self.cfg, self.slurm = cfg, slurm
        self.baseline = baseline  # re-baselining the new image gates the roll (baseline.py); None: off
        self.path = os.path.join(state_dir, FILE)
        self.state_dir = state_dir
        self.set_unhealthy = set_unhealthy  # (instance id) -> bool: RepairApi.set_unhealthy
        raw = read_json(self.path)
        doc = cast("dict[str, Any]", raw) if isinstance(raw, dict) else {}
        self.groups: dict[str, dict[str, Any]] = {
            str(k): cast("dict[str, Any]", v)
            for k, v in cast("dict[Any, Any]", doc.get("groups") or {}).items()
            if isinstance(v, dict)
        }
        self.acting: dict[str, dict[str, Any]] = {
            str(k): cast("dict[str, Any]", v)
            for k, v in cast("dict[Any, Any]", doc.get("acting") or {}).items()
            if isinstance(v, dict)
        }

    def save(self) -> None:
        write_json_atomic(self.path, {"groups": self.groups, "acting": self.acting})

    def run(self, client: Any, inv: Inventory, states: dict[str, NodeState] | None, now: float, skip: frozenset[str]) -> None:
        """The pass. ``skip``: nodes another part of this call changed in Slurm (their entry in ``states`` is stale)."""
        if self.cfg.updates.max_drained_percent == 0 or states is None:
            return
        groups = [g for g in self.cfg.node_groups if any(i.live and i.group == g.name for i in inv.all())]
        targets = resolve_targets(client, groups) if groups else {}
        brake = Brake(self.cfg, self.state_dir, now)  # as this pass's repairs left it (read only)
        for g in groups:
            if g.name in targets:
                self._group(g, targets[g.name], inv, states, now, skip, brake.note_of(g.name))
        self.save()

    # ------------------------------------------------------------------ one group
    def _group(
        self,
        g: NodeGroup,
        target: Target,
        inv: Inventory,
        states: dict[str, NodeState],
        now: float,
        skip: frozenset[str],
        braked: str | None,
    ) -> None:
        """``braked``: the note of the group's repair brake while it is on, else None."""
        rec = self.groups.get(g.name)
        if rec is None or rec.get("target") != target.key:
            rec = cast("dict[str, Any]", {"target": target.key, "since": now, "stopped": None, "replaced": 0})
            self.groups[g.name] = rec
            log.info("decision roll-target group=%s version=%s image=%s", g.name, target.version, target.image_id or "-")
        stopped = cast("dict[str, Any] | None", rec.get("stopped"))
        if stopped and stopped.get("brake") and braked is None:
            log.info("decision roll-go-on group=%s: the repair brake is off again", g.name)
            rec["stopped"] = None
        nodes = [n for n in g.node_names() if n in states and n not in skip]
        live = {n: best_instance(inv.live_of_node(n)) for n in nodes if inv.live_of_node(n)}
        old = {n for n, inst in live.items() if target.outdated(inst)}
        back = self._follow(g, nodes, live, old, states, rec, now)
        mine = [n for n in nodes if ours(states[n]) and n not in self.acting and n not in back]
        holding = len([n for n in mine if n in old]) + sum(1 for a in self.acting.values() if a.get("group") == g.name)
        gate = self.baseline.step(g, target.image_id, nodes, live, holding, states, now) if self.baseline else GO
        why = self._failed(g, rec) or (gate.why if gate.status == "failed" else None)
        brake = why is None and braked is not None
        if brake:
            why = f"the group's repair brake is on {braked}"
        if why and not rec.get("stopped"):
            rec["stopped"] = {"since": now, "why": why, **({"brake": True} if brake else {})}
            log.error(
                "decision roll-stop group=%s: %s; %s stay in service on the old image, no more are drained",
                g.name,
                why,
                fmt_nodes(mine),
            )
            self._resume(mine, "roll stopped")
        if rec.get("stopped"):
            return
        idle = [n for n in mine if n in old and not busy(states[n])]
        self._replace(g, idle, live, now)
        held = len([n for n in mine if n in old]) + sum(1 for a in self.acting.values() if a.get("group") == g.name)
        room = share(self.cfg, g) - held
        if gate.status == "wait":  # the new image is not proven yet: only the nodes its re-baseline needs
            room = min(room, gate.room)
            if old and room <= 0:
                log.info("decision roll-wait group=%s: %d old node(s); %s", g.name, len(old), gate.why)
        waiting = sorted(old - set(mine) - set(self.acting), key=lambda n: (busy(states[n]), hostlist.order_key(n)))
        fresh = [n for n in waiting if _drainable(states[n])][: max(0, room)]
        if fresh and not in_window(self.cfg, now):
            log.info("decision roll-wait group=%s: %d old node(s), outside the maintenance window", g.name, len(waiting))
        elif fresh:
            log.info(
                "decision roll-drain group=%s nodes=%s (%d old, %d held by the roll, share %d)",
                g.name, fmt_nodes(fresh), len(old), held, share(self.cfg, g),
            )  # fmt: skip
            self.slurm.drain(fresh, REASON)

    def _follow(
        self,
        g: NodeGroup,
        nodes: list[str],
        live: dict[str, Instance],
        old: set[str],
        states: dict[str, NodeState],
        rec: dict[str, Any],
        now: float,
    ) -> set[str]:
        """Step 1: finish the replacements under way; hand back our drained nodes that need no replacement."""
        back: list[str] = []
        for n in nodes:
            act = self.acting.get(n)
            st = states[n]
            if act is not None:
                gone = act.get("instance") not in {i.id for i in ([live[n]] if n in live else [])}
                if gone or st.powered_down:
                    del self.acting[n]
                    rec["replaced"] = int(rec.get("replaced") or 0) + 1
                    log.info("decision roll-replaced node=%s instance=%s", n, act.get("instance"))
                    if ours(st) and (n not in live or n not in old):
                        back.append(n)
                elif not g.static and ours(st) and not st.has("POWERING_DOWN"):
                    log.info("decision roll node=%s still drained with its old instance: power_down_force again", n)
                    self.slurm.power_down_force([n])
                continue
            if ours(st) and (n not in live or n not in old) and not (st.has("POWERING_DOWN") or st.has("POWERING_UP")):
                back.append(n)
        self._resume(back, "no old instance")
        return set(back)

    def _replace(self, g: NodeGroup, idle: list[str], live: dict[str, Instance], now: float) -> None:
        """Step 3: replace idle drained old nodes (the record is saved before the action)."""
        if not idle:
            return
        for n in idle:
            self.acting[n] = {"group": g.name, "instance": live[n].id, "since": now}
        self.save()
        log.info("decision roll-replace group=%s mode=%s nodes=%s", g.name, g.mode, fmt_nodes(idle))
        if g.static:
            for n in idle:
                if not self.set_unhealthy(live[n].id):
                    del self.acting[n]
        elif not self.slurm.power_down_force(idle):
            for n in idle:
                del self.acting[n]

    def _failed(self, g: NodeGroup, rec: dict[str, Any]) -> str | None:
        """Step 2: why the group's rollout failed, or None."""
        p = Protection(self.cfg, self.state_dir)
        if p.protected(g.name):
            return "the group is in protected mode after boot failures"
        info = p.groups.get(g.name, {})
        failures = int(info.get("failures") or 0)
        if failures >= self.cfg.updates.stop_after_boot_failures and float(info.get("last_failure") or 0) >= float(rec["since"]):
            return f"{failures} consecutive boot failures since the roll began"
        return None

    def _resume(self, nodes: list[str], why: str) -> None:
        if nodes:
            log.info("decision roll-resume nodes=%s: %s", fmt_nodes(nodes), why)
            self.slurm.resume(nodes)


def _drainable(st: NodeState) -> bool:
    """A node in service that the roll may drain: not down, drained, powering or powered down."""
    return not any(st.has(f) for f in ("DOWN", "DRAIN", "POWERING_UP", "POWERING_DOWN", "POWERED_DOWN", "NOT_RESPONDING", "FAIL"))


def status_lines(state_dir: str) -> list[str]:
    """``status``: each group's roll (target, replaced so far, stopped and why) and the replacements under way."""
    raw = read_json(os.path.join(state_dir, FILE))
    doc = cast("dict[str, Any]", raw) if isinstance(raw, dict) else {}
    out: list[str] = []
    for name, rec in sorted(cast("dict[str, Any]", doc.get("groups") or {}).items()):
        r = cast("dict[str, Any]", rec)
        stopped = cast("dict[str, Any] | None", r.get("stopped"))
        state = f"STOPPED: {stopped.get('why')}" if stopped else "rolling"
        out.append(f"roll group {name}: target {r.get('target')} {state}, {r.get('replaced', 0)} replaced")
    acting = cast("dict[str, Any]", doc.get("acting") or {})
    if acting:
        out.append(f"roll: replacing {fmt_nodes(sorted(acting, key=hostlist.order_key))}")
    return out or ["roll: nothing to roll yet"]
