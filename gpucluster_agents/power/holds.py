# pyright: strict
"""How the agent backs off: nodes (and whole node groups) it set DOWN, with when, why and until when,
kept in ``state_dir/holds.json``. A failed launch holds its node for ``failure_hold_seconds``;
insufficient capacity holds the whole node group for ``insufficient_capacity_hold_seconds`` and sets
its idle powered-down nodes DOWN too, so queued jobs go to other partitions at once and resumes
during the hold fail fast without calling EC2. When a hold ends, the next call hands the nodes back
to Slurm. Only nodes DOWN for a ``gpucluster`` reason are ever handed back: an operator's DOWN stays.

Holds that reach Slurm: every hold records whether its ``scontrol update state=down`` worked
(``applied``). One that did not (slurmctld away or restarting) is sent again by every later call
until it does, so a node Slurm still waits for (POWERING_UP, its job queued on it) fails over within
one ``maintain`` pass of slurmctld's return instead of after ResumeTimeout. A node with a live instance
is never set DOWN by this (a job may run on it). A hold Slurm did get and that someone undid since (an
operator's ``state=resume``) is dropped, not forced again; only a node Slurm still waits to boot while
its group is held is set DOWN again (slurmctld lost the DOWN in a restart).

Time: a hold is a length (``seconds``) started at ``since``, both written to holds.json because every
agent call is a new process. A process's monotonic clock does not survive it, but the kernel's boot clock
does: every hold is anchored to it (``state.anchor_holds``), and every call moves the hold's wall times by
however far the wall clock stepped since (``state.follow_boot_clock``), so a hold ends its own length after
it began, whether the clock was stepped back (clamping alone would start it again at the step: a 10-minute
hold stepped back 11 minutes after 9 would last 19) or forward. Holds without a usable anchor (set before a reboot, or by an older agent) are
*clamped* on the wall clock instead: a hold whose end lies further ahead than its own length (e.g. a head node
an hour fast corrected by NTP) ends at most its length from now, and a ``since`` in the future is moved to
now; a clock stepped forward ends those early, which only hands nodes back sooner (never strands one)."""

from __future__ import annotations

import logging
from typing import Any, Callable

from ..contract import AgentConfig
from .error_codes import ICE_CODES
from .inventory import fmt_nodes
from .slurm import NodeState, Slurm

log = logging.getLogger("gpucluster_agents")

# {"groups": {group: hold}, "nodes": {node: hold}}, a hold being
# {"since", "until", "seconds", "code", "reason", "applied"}.
Holds = dict[str, dict[str, dict[str, Any]]]

PROTECTED_CODE = "ProtectedMode"  # holds repair/protect.py renews and re-applies itself in every call


def _short(msg: str, limit: int = 80) -> str:
    msg = " ".join(msg.split())
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


def new_hold(now: float, seconds: float, code: str, reason: str | None, applied: bool = True) -> dict[str, Any]:
    return {"since": now, "until": now + seconds, "seconds": seconds, "code": code, "reason": reason, "applied": applied}


def clamp_hold(h: dict[str, Any], now: float, longest: float) -> bool:
    """Keep a hold within its own length of ``now`` (``longest`` for a hold written without one); True if changed."""
    length = h.get("seconds")
    seconds = float(length) if isinstance(length, (int, float)) else longest
    changed = False
    if float(h.get("since") or 0) > now:
        h["since"] = now
        changed = True
    if float(h.get("until") or 0) - now > seconds:
        h["until"] = now + seconds
        changed = True
    return changed


def mark_applied(holds: Holds, nodes: list[str], ok: bool) -> None:
    """Record whether the DOWN of ``nodes`` reached Slurm (a failed one is sent again next call)."""
    for node in nodes:
        if node in holds["nodes"]:
            holds["nodes"][node]["applied"] = ok


def _ours(st: NodeState) -> bool:
    return (st.reason or "").startswith("gpucluster")


def _set_down(slurm: Slurm, holds: Holds, by_reason: dict[str, list[str]], what: str) -> None:
    for reason, nodes in sorted(by_reason.items()):
        log.info("decision %s nodes=%s reason=%r", what, fmt_nodes(nodes), reason)
        mark_applied(holds, nodes, slurm.set_down(nodes, reason))


def release_holds(
    cfg: AgentConfig,
    slurm: Slurm,
    holds: Holds,
    states: dict[str, NodeState] | None,
    now: float,
    live: Callable[[str], bool] = lambda _node: False,
) -> None:
    """Clamp every hold, re-apply the ones Slurm did not get, and hand nodes held DOWN by the agent back
    to Slurm once their hold time is over. ``live(node)``: the node has a pending or running instance."""
    longest = max(cfg.insufficient_capacity_hold_seconds, cfg.failure_hold_seconds, 60)
    for kind in ("groups", "nodes"):
        for key, h in holds[kind].items():
            if clamp_hold(h, now, longest):
                log.warning(
                    "decision hold-clamp %s=%s until %.0f: it lay beyond its length (clock stepped back)",
                    kind[:-1],
                    key,
                    h["until"],
                )
    for name, h in list(holds["groups"].items()):
        if now >= float(h.get("until", 0)):
            log.info("decision hold-end group=%s (%s)", name, h.get("code"))
            del holds["groups"][name]
    if states is None:
        return
    # A node DOWN for one of our reasons but missing from holds.json (file lost): hold it anew.
    for node, st in states.items():
        group = cfg.group_of_node(node)
        if st.has("DOWN") and _ours(st) and node not in holds["nodes"] and group is not None and not group.static:
            holds["nodes"][node] = new_hold(now, cfg.failure_hold_seconds, "unknown", st.reason)
    reapply_holds(cfg, slurm, holds, states, now, live)
    _hand_back(slurm, holds, states, now, live)


def reapply_holds(
    cfg: AgentConfig, slurm: Slurm, holds: Holds, states: dict[str, NodeState], now: float, live: Callable[[str], bool]
) -> None:
    """Send again the DOWNs of running holds that Slurm does not show (see the module docstring)."""
    by_reason: dict[str, list[str]] = {}
    for gname, gh in sorted(holds["groups"].items()):
        group = cfg.group(gname)
        if group is None or gh.get("applied", True) or gh.get("code") == PROTECTED_CODE:
            continue
        gh["applied"] = True  # the idle nodes below get node holds that record their own outcome
        for node in group.node_names():
            st = states.get(node)
            if node in holds["nodes"] or st is None or live(node) or not st.powered_down:
                continue
            if not st.has("DOWN") and not st.has("POWERING_DOWN"):
                holds["nodes"][node] = new_hold(now, float(gh["until"]) - now, str(gh.get("code")), gh.get("reason"), False)
    for node, h in sorted(holds["nodes"].items()):
        st = states.get(node)
        if now >= float(h.get("until", 0)) or st is None or h.get("code") == PROTECTED_CODE:
            continue
        if st.has("DOWN"):
            h["applied"] = True
            continue
        if live(node):
            continue  # it has an instance now: never DOWN it (a job may run there)
        group = cfg.group_of_node(node)
        group_held = group is not None and group.name in holds["groups"]
        if h.get("applied") is False or (st.has("POWERING_UP") and group_held):
            by_reason.setdefault(str(h.get("reason") or "gpucluster: held by the agent"), []).append(node)
        else:
            log.info("decision hold-drop node=%s: no longer DOWN (someone resumed it), not forcing it again", node)
            del holds["nodes"][node]
    _set_down(slurm, holds, by_reason, "hold-reapply")


def _hand_back(slurm: Slurm, holds: Holds, states: dict[str, NodeState], now: float, live: Callable[[str], bool]) -> None:
    """Nodes whose hold ended: ``state=resume``, or ``power_down_force`` where Slurm still waits for a boot.
    A hold stays (and is tried again next call) while its scontrol call fails."""
    power_down: list[str] = []
    resume: list[str] = []
    for node, h in sorted(holds["nodes"].items()):
        if now < float(h.get("until", 0)):
            continue
        st = states.get(node)
        if st is not None and st.has("DOWN") and _ours(st):
            (power_down if st.has("POWERING_UP") else resume).append(node)
        elif st is not None and h.get("applied") is False and st.has("POWERING_UP") and not live(node):
            power_down.append(node)  # Slurm never got the DOWN and still waits for a boot that cannot come
        else:
            log.info("decision hold-end node=%s: no longer DOWN by the agent, nothing to do", node)
            del holds["nodes"][node]
    if power_down:
        log.info("decision hold-end nodes=%s: power_down_force (Slurm still waited for boot)", fmt_nodes(power_down))
        if slurm.power_down_force(power_down):
            for node in power_down:
                del holds["nodes"][node]
    if resume:
        log.info("decision hold-end nodes=%s: state=resume", fmt_nodes(resume))
        if slurm.resume(resume):
            for node in resume:
                del holds["nodes"][node]


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
        holds["nodes"][node] = new_hold(now, hold, code, reason)
        if ice and g is not None and hold > 0:
            ice_groups.setdefault(g.name, (code, reason))
    _set_down(slurm, holds, by_reason, "down")
    for gname, (code, _reason) in sorted(ice_groups.items()):
        g = cfg.group(gname)
        if g is None:
            raise ValueError("the hold names a node group of the config")
        hold = cfg.insufficient_capacity_hold_seconds
        reason = f"gpucluster: {code} {g.instance_type}: node group {gname} held {hold}s"
        holds["groups"][gname] = new_hold(now, hold, code, reason, applied=states is not None)
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
        for node in idle:
            holds["nodes"][node] = new_hold(now, hold, code, reason)
        if idle:
            mark_applied(holds, idle, slurm.set_down(idle, reason))


def resume_timeout_reason(cfg: AgentConfig, holds: Holds, node: str, what: str, now: float) -> str:
    """The DOWN reason for a dynamic node Slurm gave up on (``what``: its instances, or "no instance").

    While the agent's own hold on the node lasts, its reason stands (the capacity error is what the
    user needs to see); otherwise the node is held for ``failure_hold_seconds`` as a ResumeTimeout.
    The caller sets the node DOWN and records the outcome (:func:`mark_applied`)."""
    h = holds["nodes"].get(node)
    if h and now < float(h.get("until", 0)) and h.get("reason"):
        return str(h["reason"])
    reason = f"gpucluster: ResumeTimeout, node did not register ({what})"
    holds["nodes"][node] = new_hold(now, cfg.failure_hold_seconds, "ResumeTimeout", reason)
    return reason


def status_lines(holds: Holds, now: float) -> list[str]:
    """Human lines for ``status``: held node groups, then held nodes (and whether Slurm has the DOWN yet)."""
    out: list[str] = []
    for gname, h in sorted(holds["groups"].items()):
        left = max(0, int(float(h.get("until", 0)) - now))
        out.append(f"group {gname}: held {left}s more ({h.get('code')}): {h.get('reason')}")
    pending = sorted(n for n, h in holds["nodes"].items() if h.get("applied") is False)
    if holds["nodes"]:
        out.append(f"nodes held DOWN: {fmt_nodes(sorted(holds['nodes']))}")
    if pending:
        out.append(f"  not in Slurm yet (scontrol failed; sent again every call): {fmt_nodes(pending)}")
    return out or ["no capacity or failure holds"]
