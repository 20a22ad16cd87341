# pyright: strict
"""How the agent backs off: nodes (and whole node groups) it set DOWN, with when, why and until when,
kept in ``state_dir/holds.json``. A failed launch holds its node for ``failure_hold_seconds``;
insufficient capacity holds the whole node group for ``insufficient_capacity_hold_seconds`` and sets
its idle powered-down nodes DOWN too, so queued jobs go to other partitions at once and resumes
during the hold fail fast without calling EC2. When a hold ends, the next call hands the nodes back
to Slurm. Only nodes DOWN for a ``gpucluster`` reason are ever handed back: an operator's DOWN stays."""

from __future__ import annotations

import logging
from typing import Any

from .contract import AgentConfig
from .error_codes import ICE_CODES
from .inventory import fmt_nodes
from .slurm import NodeState, Slurm

log = logging.getLogger("gpucluster_agents")

# {"groups": {group: hold}, "nodes": {node: hold}}, a hold being {"since", "until", "code", "reason"}.
Holds = dict[str, dict[str, dict[str, Any]]]


def _short(msg: str, limit: int = 80) -> str:
    msg = " ".join(msg.split())
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


def release_holds(cfg: AgentConfig, slurm: Slurm, holds: Holds, states: dict[str, NodeState] | None, now: float) -> None:
    """Hand nodes held DOWN by the agent back to Slurm once their hold time is over."""
    for name, h in list(holds["groups"].items()):
        if now >= float(h.get("until", 0)):
            log.info("decision hold-end group=%s (%s)", name, h.get("code"))
            del holds["groups"][name]
    if states is None:
        return
    # A node DOWN for one of our reasons but missing from holds.json (file lost): hold it anew.
    for node, st in states.items():
        group = cfg.group_of_node(node)
        if (
            st.has("DOWN")
            and (st.reason or "").startswith("gpucluster")
            and node not in holds["nodes"]
            and group is not None
            and not group.static
        ):
            holds["nodes"][node] = {
                "since": now,
                "until": now + cfg.failure_hold_seconds,
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
        log.info("decision hold-end nodes=%s: power_down_force (Slurm still waited for boot)", fmt_nodes(power_down))
        slurm.power_down_force(power_down)
    if resume:
        log.info("decision hold-end nodes=%s: state=resume", fmt_nodes(resume))
        slurm.resume(resume)


def fail_nodes(
    cfg: AgentConfig,
    slurm: Slurm,
    failures: dict[str, tuple[str, str]],
    holds: Holds,
    states: dict[str, NodeState] | None,
    now: float,
) -> None:
    """Set nodes DOWN with a reason naming the error; hold ICE node groups."""
    if not failures:
        return
    by_reason: dict[str, list[str]] = {}
    ice_groups: dict[str, tuple[str, str]] = {}
    for node, (code, msg) in failures.items():
        g = cfg.group_of_node(node)
        itype = f" {g.instance_type}" if g else ""
        reason = f"gpucluster: {code}{itype}" + (f": {_short(msg)}" if msg else "")
        by_reason.setdefault(reason, []).append(node)
        ice = code in ICE_CODES
        hold = cfg.insufficient_capacity_hold_seconds if ice else cfg.failure_hold_seconds
        holds["nodes"][node] = {"since": now, "until": now + hold, "code": code, "reason": reason}
        if ice and g is not None and hold > 0:
            ice_groups.setdefault(g.name, (code, reason))
    for reason, nodes in sorted(by_reason.items()):
        log.info("decision down nodes=%s reason=%r", fmt_nodes(nodes), reason)
        slurm.set_down(nodes, reason)
    for gname, (code, _reason) in sorted(ice_groups.items()):
        g = cfg.group(gname)
        assert g is not None
        hold = cfg.insufficient_capacity_hold_seconds
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
        log.info("decision hold group=%s for %ss (%s); also down idle nodes=%s", gname, hold, code, fmt_nodes(idle))
        if idle:
            slurm.set_down(idle, reason)
            for node in idle:
                holds["nodes"][node] = {"since": now, "until": now + hold, "code": code, "reason": reason}


def resume_timeout_reason(cfg: AgentConfig, holds: Holds, node: str, what: str, now: float) -> str:
    """The DOWN reason for a dynamic node Slurm gave up on (``what``: its instances, or "no instance").

    While the agent's own hold on the node lasts, its reason stands (the capacity error is what the
    user needs to see); otherwise the node is held for ``failure_hold_seconds`` as a ResumeTimeout."""
    h = holds["nodes"].get(node)
    if h and now < float(h.get("until", 0)) and h.get("reason"):
        return str(h["reason"])
    reason = f"gpucluster: ResumeTimeout, node did not register ({what})"
    holds["nodes"][node] = {
        "since": now,
        "until": now + cfg.failure_hold_seconds,
        "code": "ResumeTimeout",
        "reason": reason,
    }
    return reason
