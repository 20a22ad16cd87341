# pyright: strict
"""The repair circuit breaker: a node group whose nodes the health program drains in numbers stops being
repaired, because a cause that hits a fifth of a group at once (a driver or image, a bad health check, a
forged XID line any job can print) is not fixed by replacing hardware, and replacing the whole group
would only trade every running node for a new one that fails the same way.

The rule (``repair.brake_percent`` X, ``repair.brake_window_seconds`` Y, ``contract/repair.py`` says why
20 % and one hour): the brake of a group trips when more than X % of its nodes, and at least two, were
drained by the health program within the last Y seconds. "Drained by health" counts each node once from
the moment a ``maintain`` pass first saw its health drain, and keeps counting it after its repair took it
out of Slurm's sight (a replaced node is powered down: its drain is gone, its repair record keeps the
time); "its nodes" are the group's running nodes (an instance) together with the ones counted.

While the brake is on: no repair of the group starts (no reboot, no power-down, no Unhealthy mark, no
hand-back of a drained powered-down node); repairs already under way finish; every health-drained node
of the group stays drained with `` (brake: N of M drained in Y min)`` appended to its reason; the log says
so at ERROR when it trips and at WARNING on every pass while it lasts (a line to alert on), and
``gpucluster-agent status`` shows it. It never releases itself: an operator looks, fixes the cause (and
undrains the nodes that were drained wrongly, ``scontrol update nodename=… state=resume``), then runs
``gpucluster-agent release-brake <group>``. The drains seen before the release no longer count, so the
group does not trip again on them; the next ``maintain`` pass takes the notes off the reasons and repairs
the nodes still drained at the usual share.

State: ``state_dir/brake.json`` = ``{"tripped": {group: {since, drained, of, minutes}}, "released":
{group: time}, "seen": {node: time first seen drained}}``. Times are the wall clock, clamped to now when
they lie ahead of it (a clock stepped back), like the holds (``power/holds.py``).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from typing import Any, cast

from ..contract import AgentConfig
from ..power.state import read_json, write_json_atomic

log = logging.getLogger("gpucluster_agents")

FILE = "brake.json"
_NOTE_RE = re.compile(r"\s*\(brake: [^()]*\)")


def trips(drained: int, of: int, percent: int) -> bool:
    """More than ``percent`` % of ``of`` nodes, and at least two (one bad node is never a fleet-wide cause)."""
    return percent > 0 and drained >= 2 and drained * 100 > percent * of


def strip_note(reason: str | None) -> str:
    """A reason without the brake's note: what the health program wrote."""
    return _NOTE_RE.sub("", reason or "").strip()


def note(rec: dict[str, Any]) -> str:
    return f"(brake: {rec.get('drained')} of {rec.get('of')} drained in {rec.get('minutes')} min)"


def _clamped(doc: Any, now: float) -> dict[str, float]:
    part = cast("dict[Any, Any]", doc) if isinstance(doc, dict) else {}
    return {str(k): min(float(v), now) for k, v in part.items() if isinstance(v, (int, float))}


class Brake:
    """The group brakes of one ``maintain`` pass (see the module docstring)."""

    def __init__(self, cfg: AgentConfig, state_dir: str, now: float) -> None:
        self.cfg = cfg
        self.now = now
        self.path = os.path.join(state_dir, FILE)
        raw = read_json(self.path)
        doc = cast("dict[str, Any]", raw) if isinstance(raw, dict) else {}
        tripped = doc.get("tripped")
        self.tripped: dict[str, dict[str, Any]] = (
            {str(k): cast("dict[str, Any]", v) for k, v in cast("dict[Any, Any]", tripped).items() if isinstance(v, dict)}
            if isinstance(tripped, dict)
            else {}
        )
        self.released = _clamped(doc.get("released"), now)
        self.seen = _clamped(doc.get("seen"), now)

    def save(self) -> None:
        write_json_atomic(self.path, {"tripped": self.tripped, "released": self.released, "seen": self.seen})

    def on(self, group: str) -> bool:
        return group in self.tripped

    def note_of(self, group: str) -> str | None:
        rec = self.tripped.get(group)
        return note(rec) if rec is not None else None

    def drained_at(self, node: str) -> float:
        return self.seen.get(node, self.now)

    def observe(self, health_drained: Iterable[str], keep: Iterable[str]) -> None:
        """Note when each health drain was first seen; forget nodes neither drained nor in ``keep`` (repairs)."""
        drained = set(health_drained)
        for node in sorted(drained):
            self.seen.setdefault(node, self.now)
        keep_set = set(keep)
        for node in [n for n in self.seen if n not in drained and n not in keep_set]:
            del self.seen[node]

    def update(self, group: str, running: set[str], repaired: dict[str, float]) -> bool:
        """Trip the group's brake if its drains cross the line; True while it is on. ``running``: nodes with
        an instance; ``repaired``: nodes of the group with a repair record -> when their drain was seen."""
        if self.cfg.repair.brake_percent == 0 and group in self.tripped:
            log.info("decision brake-release group=%s: the brake is off in the config (repair.brake_percent 0)", group)
            del self.tripped[group]
        if group in self.tripped:
            rec = self.tripped[group]
            log.warning(
                "brake group=%s on since %.0f %s: no repairs until: gpucluster-agent release-brake %s",
                group,
                float(rec.get("since") or 0),
                note(rec),
                group,
            )
            return True
        r = self.cfg.repair
        start = max(self.now - r.brake_window_seconds, self.released.get(group, 0.0))
        g = self.cfg.group(group)
        counted = {n for n, t in self.seen.items() if t >= start and g is not None and g.owns(n)}
        counted |= {n for n, t in repaired.items() if t >= start}
        of = len(running | counted)
        if not trips(len(counted), of, r.brake_percent):
            return False
        minutes = r.brake_window_seconds // 60
        self.tripped[group] = {"since": self.now, "drained": len(counted), "of": of, "minutes": minutes}
        log.error(
            "decision brake group=%s: %d of %d nodes drained by health in %d min (more than %d %%); repairs of the"
            " group stopped, its nodes stay drained; after fixing the cause: gpucluster-agent release-brake %s",
            group,
            len(counted),
            of,
            minutes,
            r.brake_percent,
            group,
        )
        return True

    def release(self, group: str) -> bool:
        """The operator's ``release-brake <group>``: repairs resume; drains seen until now no longer count."""
        was = self.tripped.pop(group, None)
        self.released[group] = self.now
        log.info("decision brake-release group=%s (was on: %s)", group, note(was) if was else "no")
        return was is not None


def status_lines(cfg: AgentConfig, state_dir: str, now: float) -> list[str]:
    b = Brake(cfg, state_dir, now)
    out: list[str] = []
    for group, rec in sorted(b.tripped.items()):
        out.append(
            f"group {group}: BRAKE on: {rec.get('drained')} of {rec.get('of')} drained in {rec.get('minutes')} min"
            f" (since {float(rec.get('since') or 0):.0f}); no repairs, nodes kept drained;"
            f" release after fixing the cause: gpucluster-agent release-brake {group}"
        )
    return out or [
        f"no repair brake on (trips above {cfg.repair.brake_percent} % drained in {cfg.repair.brake_window_seconds // 60} min)"
    ]
