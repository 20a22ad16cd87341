# pyright: strict
"""The head node's metrics: Slurm's (from ``sinfo``/``squeue``) and the agent's (from its state files).

Slurm: nodes by state (``%T`` as sinfo prints it, flags included: ``idle~`` is powered down, ``down*`` not
responding), drained/down nodes by the kind of reason (the health program's ``gpucluster: <check> …``
drains by check and action, anything else ``other``: reasons are free text, never a label), jobs by state
and pending jobs by Slurm's reason code, and the GPUs Slurm has allocated on each GPU node (sinfo's
``GresUsed``: one series per node, labelled ``node`` with its Slurm name, so the idle-allocated alert can
name the node). No per-job or per-user label: the series count stays bounded by the number of states and
reason codes, and by the cluster's configured node names.

The agent: read from ``state_dir`` (gpucluster_agents/README.md), never by instrumenting its calls: launches in flight
(``journal/*.json``), holds by kind (``holds.json``: insufficient capacity, a failed launch, protected
mode), protected node groups and their boot failures (``protect.json``), repairs under way and the
recent ones by outcome (``quarantine.json``, its last 500), tripped repair brakes (``brake.json``).
They are gauges: the files hold the present (and a bounded history), not counts since some start.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, cast

from ..contract.metrics import (
    BOOT_FAILS,
    BRAKE,
    DRAINS,
    HOLDS,
    JOBS,
    LAUNCHES,
    NODE_GPUS,
    NODES,
    PENDING,
    PROTECTED,
    REPAIRED,
    REPAIRS,
)
from ..power.error_codes import ICE_CODES  # stdlib only: the agent's own insufficient-capacity set
from ..usage.run import run_slurm
from .exposition import Registry

TIMEOUT = 10.0
MAX_LABELS = 50  # distinct states or reasons kept per metric; the rest count as "other"
_STATE = re.compile(r"[A-Za-z_+~#%*!$@^-]{1,40}\Z")
_WORD = re.compile(r"[A-Za-z0-9_]{1,40}\Z")
_CHECK = re.compile(r"gpucluster:\s*([a-z_]{1,32})\b")
_ACTION = re.compile(r"\((reboot|replace)\)")
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
# One GRES entry of sinfo's GresUsed: name[:type]:count[(IDX:…)]; the index list may hold commas ("IDX:0,2-3").
_GPU_USED = re.compile(r"(?:^|,)gpu(?::[^:,()]+)?:(\d{1,6})(?=\(|,|\Z)")
MAX_NODES = 10000  # the per-node series kept (a cluster's configured node names bound them long before this)


def _bounded(counts: dict[tuple[str, ...], int], key: tuple[str, ...], other: tuple[str, ...]) -> None:
    if key not in counts and len(counts) >= MAX_LABELS:
        key = other
    counts[key] = counts.get(key, 0) + 1


def drain_kind(reason: str) -> tuple[str, str]:
    """(check, action) of a drain reason: the health program's check and action, else ("other", "")."""
    m = _CHECK.match(reason.strip())
    if not m:
        return "other", ""
    actions = _ACTION.findall(reason)
    return m.group(1), str(actions[-1]) if actions else ""


def parse_sinfo(text: str) -> tuple[dict[tuple[str, ...], int], dict[tuple[str, ...], int]]:
    """``sinfo -h -N -o %n|%T|%E`` → (nodes by state, unavailable nodes by (check, action)); a node listed
    once per partition counts once."""
    nodes: dict[tuple[str, ...], int] = {}
    drains: dict[tuple[str, ...], int] = {}
    seen: set[str] = set()
    for line in text.splitlines():
        name, _, rest = line.partition("|")
        state, _, reason = rest.partition("|")
        if not name or name in seen:
            continue
        seen.add(name)
        state = state.strip()
        _bounded(nodes, (state if _STATE.match(state) else "other",), ("other",))
        if any(word in state.upper() for word in ("DOWN", "DRAIN", "FAIL")):
            _bounded(drains, drain_kind(reason), ("other", ""))
    return nodes, drains


def parse_gres_used(text: str) -> dict[str, int]:
    """``sinfo -h -N -O NodeHost:|,GresUsed:|`` (Slurm prints ``p5-1|gpu:h100:3(IDX:0-2)|``) → allocated GPUs
    per node: the counts of every ``gpu`` entry (typed or not) summed; a node with no ``gpu`` GRES (``(null)``)
    is left out, one listed once per partition counts once, a name that is not a plain host name is dropped."""
    used: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.strip().partition("|")
        gres = rest.rstrip("|").strip()
        if name in used or not _NODE.match(name) or len(used) >= MAX_NODES:
            continue
        counts = _GPU_USED.findall(gres)
        if counts:
            used[name] = sum(int(c) for c in counts)
    return used


def parse_squeue(text: str) -> tuple[dict[tuple[str, ...], int], dict[tuple[str, ...], int]]:
    """``squeue -h -a -o %T|%r`` → (jobs by state, pending jobs by reason code)."""
    jobs: dict[tuple[str, ...], int] = {}
    pending: dict[tuple[str, ...], int] = {}
    for line in text.splitlines():
        state, _, reason = line.partition("|")
        state, reason = state.strip(), reason.strip()
        if not state:
            continue
        _bounded(jobs, (state if _WORD.match(state) else "other",), ("other",))
        if state == "PENDING":
            _bounded(pending, (reason if _WORD.match(reason) else "other",), ("other",))
    return jobs, pending


def collect_slurm(reg: Registry, bin_dir: str) -> None:
    sinfo, squeue = os.path.join(bin_dir, "sinfo"), os.path.join(bin_dir, "squeue")
    nodes, drains = parse_sinfo(run_slurm([sinfo, "-h", "-N", "-o", "%n|%T|%E"], timeout=TIMEOUT))
    gpus = parse_gres_used(run_slurm([sinfo, "-h", "-N", "-O", "NodeHost:|,GresUsed:|"], timeout=TIMEOUT))
    jobs, pending = parse_squeue(run_slurm([squeue, "-h", "-a", "-o", "%T|%r"], timeout=TIMEOUT))
    for (state,), n in sorted(nodes.items()):
        reg.add(*NODES, n, {"state": state})
    for (check, action), n in sorted(drains.items()):
        reg.add(*DRAINS, n, {"check": check, "action": action})
    for node, n in sorted(gpus.items()):
        reg.add(*NODE_GPUS, n, {"node": node})
    for (state,), n in sorted(jobs.items()):
        reg.add(*JOBS, n, {"state": state})
    for (reason,), n in sorted(pending.items()):
        reg.add(*PENDING, n, {"reason": reason})


def _json(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return {}
    return cast("dict[str, Any]", doc) if isinstance(doc, dict) else {}


def _dicts(value: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(value, dict):
        return {}
    return {str(k): cast("dict[str, Any]", v) for k, v in cast("dict[Any, Any]", value).items() if isinstance(v, dict)}


def hold_kind(hold: dict[str, Any]) -> str:
    code = str(hold.get("code") or "")
    if code == "ProtectedMode":
        return "protected_mode"
    return "insufficient_capacity" if code in ICE_CODES else "launch_failure"


def collect_agent(reg: Registry, state_dir: str) -> None:
    journal = os.path.join(state_dir, "journal")
    launches: dict[str, int] = {}
    for name in sorted(os.listdir(journal)) if os.path.isdir(journal) else []:
        if name.endswith(".json"):
            group = str(_json(os.path.join(journal, name)).get("group") or "unknown")
            launches[group] = launches.get(group, 0) + 1
    for group, n in sorted(launches.items()):
        reg.add(*LAUNCHES, n, {"group": group})
    holds = _json(os.path.join(state_dir, "holds.json"))
    counts: dict[tuple[str, str], int] = {}
    for scope in ("groups", "nodes"):
        for hold in _dicts(holds.get(scope)).values():
            key = (scope.rstrip("s"), hold_kind(hold))
            counts[key] = counts.get(key, 0) + 1
    for (scope, kind), n in sorted(counts.items()):
        reg.add(*HOLDS, n, {"scope": scope, "kind": kind})
    for group, g in sorted(_dicts(_json(os.path.join(state_dir, "protect.json"))).items()):
        reg.add(*PROTECTED, 1 if g.get("protected_since") is not None else 0, {"group": group})
        reg.add(*BOOT_FAILS, int(g.get("failures") or 0), {"group": group})
    _repairs(reg, _json(os.path.join(state_dir, "quarantine.json")))
    for group in sorted(_dicts(_json(os.path.join(state_dir, "brake.json")).get("tripped"))):
        reg.add(*BRAKE, 1, {"group": group})


def _repairs(reg: Registry, book: dict[str, Any]) -> None:
    active: dict[str, int] = {}
    for rec in _dicts(book.get("active")).values():
        action = str(rec.get("action") or "unknown")
        active[action] = active.get(action, 0) + 1
    for action, n in sorted(active.items()):
        reg.add(*REPAIRS, n, {"action": action})
    done: dict[tuple[str, str], int] = {}
    history = book.get("history")
    for rec in cast("list[Any]", history) if isinstance(history, list) else []:
        if isinstance(rec, dict):
            r = cast("dict[str, Any]", rec)
            key = (str(r.get("action") or "unknown"), str(r.get("outcome") or "unknown"))
            done[key] = done.get(key, 0) + 1
    for (action, outcome), n in sorted(done.items()):
        reg.add(*REPAIRED, n, {"action": action, "outcome": outcome})
