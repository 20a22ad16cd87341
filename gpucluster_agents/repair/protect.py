# pyright: strict
"""Protected mode: a dynamic node group whose nodes keep failing to boot stops launching.

A boot failure is a ResumeFailProgram call for a node that had an instance: it was launched but never
registered with slurmctld (bad image, broken user data; a failing ``boot`` health check registers the node
drained with its ``gpucluster:`` reason instead, for the quarantine pass :mod:`quarantine`). After
``repair.protect_after_failures`` of them in a row (0: never) the group is protected: every later
resume of it fails fast without calling EC2, its idle nodes are set DOWN with the reason
``gpucluster: ProtectedMode <type>: …`` (so jobs go to other partitions), the log says so, and
``status`` lists it. A node of the group that registers with an instance launched after the last
failure is a success: it resets the count and ends protected mode. So does an operator's
``clear-protect <group>``.

How it rides on the capacity holds (``power/holds.py``) instead of adding a second mechanism: while a group
is protected, every call renews a group hold and node holds with code ``ProtectedMode`` before
``release_holds`` runs, so the existing fail-fast path in ``resume`` refuses launches and the nodes are
never handed back; once the group is no longer protected those holds end at once and ``release_holds``
hands the nodes back in the same call. State lives in ``state_dir/protect.json``.
"""

from __future__ import annotations

import logging
import os
from typing import Any, cast

from ..contract import AgentConfig, NodeGroup
from ..power.holds import PROTECTED_CODE, Holds, new_hold
from ..power.inventory import Inventory, fmt_nodes
from ..power.slurm import NodeState, Slurm
from ..power.state import read_json, write_json_atomic

log = logging.getLogger("gpucluster_agents")

CODE = PROTECTED_CODE
FILE = "protect.json"
_DOWN_FLAGS = ("DOWN", "POWERING_UP", "POWERED_DOWN", "POWERING_DOWN", "NOT_RESPONDING", "DRAIN")


def reason(group: NodeGroup, failures: int) -> str:
    return (
        f"gpucluster: {CODE} {group.instance_type}: node group {group.name} stopped launching after"
        f" {failures} boot failures; clear with: gpucluster-agent clear-protect {group.name}"
    )


class Protection:
    """``state_dir/protect.json``: ``{group: {failures, last_failure, protected_since, nodes}}``."""

    def __init__(self, cfg: AgentConfig, state_dir: str) -> None:
        self.cfg = cfg
        self.path = os.path.join(state_dir, FILE)
        raw = read_json(self.path)
        doc = cast("dict[str, Any]", raw) if isinstance(raw, dict) else {}
        self.groups: dict[str, dict[str, Any]] = {
            str(k): cast("dict[str, Any]", v) for k, v in doc.items() if isinstance(v, dict)
        }

    def save(self) -> None:
        write_json_atomic(self.path, self.groups)

    def protected(self, group: str) -> bool:
        return self.groups.get(group, {}).get("protected_since") is not None

    # ------------------------------------------------------------------ counting
    def record_boot_failures(self, failed: dict[str, list[str]], now: float) -> list[str]:
        """Count ``{group: nodes}`` that did not register; returns the groups this made protected."""
        limit = self.cfg.repair.protect_after_failures
        newly: list[str] = []
        for gname, nodes in sorted(failed.items()):
            g = self.groups.setdefault(gname, {"failures": 0, "protected_since": None})
            g["failures"] = int(g.get("failures") or 0) + len(nodes)
            g["last_failure"] = now
            g["nodes"] = sorted(set(cast("list[str]", g.get("nodes") or [])) | set(nodes))[-20:]
            log.info("decision boot-failure group=%s nodes=%s consecutive=%d", gname, fmt_nodes(nodes), g["failures"])
            if limit and g["failures"] >= limit and g.get("protected_since") is None:
                g["protected_since"] = now
                newly.append(gname)
                log.error(
                    "decision protect group=%s: %d consecutive boot failures (limit %d, last nodes %s); no more launches"
                    " until a node registers or an operator runs clear-protect %s",
                    gname,
                    g["failures"],
                    limit,
                    fmt_nodes(nodes),
                    gname,
                )
        return newly

    def note_successes(self, inv: Inventory, states: dict[str, NodeState] | None, now: float) -> None:
        """A node up in Slurm whose instance was launched after the group's last failure resets its count."""
        if states is None:
            return
        for gname, g in sorted(self.groups.items()):
            group = self.cfg.group(gname)
            if group is None or not int(g.get("failures") or 0):
                continue
            last = float(g.get("last_failure") or 0)
            for node in group.node_names():
                st = states.get(node)
                if st is None or any(st.has(f) for f in _DOWN_FLAGS):
                    continue
                if any(i.launch_time.timestamp() > last for i in inv.live_of_node(node)):
                    log.info("decision protect-end group=%s: node %s registered after the last boot failure", gname, node)
                    self.groups[gname] = {"failures": 0, "protected_since": None}
                    break

    def clear(self, gname: str) -> bool:
        was = self.protected(gname)
        self.groups[gname] = {"failures": 0, "protected_since": None}
        log.info("decision protect-clear group=%s (was protected: %s)", gname, was)
        return was

    # ------------------------------------------------------------------ enforcing
    def enforce(self, slurm: Slurm, holds: Holds, states: dict[str, NodeState] | None, now: float) -> None:
        """Renew the holds of protected groups and set their idle nodes DOWN; end the holds of the rest.
        Runs before ``release_holds`` in every call."""
        length = max(self.cfg.failure_hold_seconds, 60)
        for group in self.cfg.node_groups:
            if group.static:
                continue
            if not self.protected(group.name):
                for key, h in [*holds["nodes"].items(), *holds["groups"].items()]:
                    if h.get("code") == CODE and (key == group.name or group.owns(key)):
                        h["until"] = now  # released by release_holds in this same call
                continue
            why = reason(group, int(self.groups[group.name].get("failures") or 0))
            holds["groups"][group.name] = new_hold(now, length, CODE, why)
            if states is None:
                continue
            down: list[str] = []
            for node in group.node_names():
                st = states.get(node)
                if st is None:
                    continue
                ours = (st.reason or "").startswith("gpucluster")
                idle_off = st.powered_down and not st.has("DOWN") and not st.has("POWERING_DOWN")
                if idle_off or (st.has("DOWN") and ours and st.reason != why):
                    down.append(node)
                if idle_off or (st.has("DOWN") and ours):
                    holds["nodes"][node] = new_hold(now, length, CODE, why)
            if down:
                log.info("decision down nodes=%s reason=%r", fmt_nodes(down), why)
                slurm.set_down(down, why)


def status_lines(cfg: AgentConfig, state_dir: str) -> list[str]:
    p = Protection(cfg, state_dir)
    out: list[str] = []
    for gname, g in sorted(p.groups.items()):
        if p.protected(gname):
            out.append(
                f"group {gname}: PROTECTED after {g.get('failures')} boot failures (nodes {','.join(g.get('nodes') or [])})"
            )
        elif int(g.get("failures") or 0):
            out.append(f"group {gname}: {g.get('failures')} consecutive boot failures")
    return out or ["no node group is protected"]


def protect_pass(
    cfg: AgentConfig,
    slurm: Slurm,
    state_dir: str,
    inv: Inventory,
    states: dict[str, NodeState] | None,
    holds: Holds,
    now: float,
    boot_failures: dict[str, list[str]] | None = None,
) -> None:
    """The hook every call runs before ``release_holds`` (``resume-fail`` once more with its failures):
    count failures and successes, then enforce."""
    p = Protection(cfg, state_dir)
    p.note_successes(inv, states, now)
    if boot_failures:
        p.record_boot_failures(boot_failures, now)
    p.enforce(slurm, holds, states, now)
    p.save()
