# pyright: strict
"""The ``updates`` section of the agent config: how the maintenance pass rolls nodes onto a new image or
launch template version (``power/roll.py``). Part of the node contract, in its own module like ``repair``.
Every key is optional and the renderer writes none while it holds its default.

- ``max_drained_percent`` 10: at most this share of a node group's nodes (its partition, ``max_nodes``) is
  drained for the roll at once, counting the nodes the roll drained earlier and is still waiting on; at
  least one node. 0 turns the roll off. 10 % is the share the repair pass may take (``repair.py``), and the
  two never act on the same node.
- ``maintenance_window`` none: when set, the roll drains nodes only inside it (nodes it drained earlier are
  still replaced once idle). Written ``HH:MM-HH:MM`` in UTC, optionally after days (``Sat,Sun 02:00-06:00``);
  a window whose end is before its start runs past midnight (its days are the days it starts on).
- ``stop_after_boot_failures`` 2: consecutive boot failures of a group (``repair/protect.py`` counts them: a
  launched instance that never registered) since its roll began stop the roll; one failure can be the
  hardware, two in a row on a new image is the image.
- ``baseline`` none: re-baseline each group's performance on a new image before the roll goes past its first
  nodes (``baseline.py``); a regression stops the roll.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, cast

from .baseline import Baseline, parse_baseline
from .jsonread import Reader

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_WINDOW_RE = re.compile(r"^(?:(?P<days>[A-Za-z]{3}(?:,[A-Za-z]{3})*) )?(?P<start>\d\d:\d\d)-(?P<end>\d\d:\d\d)$")
WINDOW_HINT = "write HH:MM-HH:MM in UTC, optionally after days: 'Sat,Sun 02:00-06:00'"


@dataclass(frozen=True)
class Window:
    days: tuple[int, ...]  # 0 = Monday; every day when empty
    start: int  # minutes after midnight, UTC
    end: int

    def contains(self, weekday: int, minute: int) -> bool:
        """Whether ``minute`` (0..1439) of ``weekday`` (0 = Monday) lies inside the window."""
        if self.start <= self.end:
            return (not self.days or weekday in self.days) and self.start <= minute < self.end
        if minute >= self.start:  # the evening part: on one of its days
            return not self.days or weekday in self.days
        return minute < self.end and (not self.days or (weekday - 1) % 7 in self.days)  # the morning after


def parse_window(text: str) -> Window:
    """``Sat,Sun 02:00-06:00`` -> :class:`Window`; ValueError naming what is wrong."""
    m = _WINDOW_RE.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not a maintenance window; {WINDOW_HINT}")
    days: list[int] = []
    for day in (m.group("days") or "").split(",") if m.group("days") else []:
        name = day.capitalize()
        if name not in DAYS:
            raise ValueError(f"{day!r} in {text!r} is not a day; use {', '.join(DAYS)}")
        days.append(DAYS.index(name))
    minutes: list[int] = []
    for part in (m.group("start"), m.group("end")):
        hh, mm = int(part[:2]), int(part[3:])
        if hh > 23 or mm > 59:
            raise ValueError(f"{part!r} in {text!r} is not a time of day (00:00..23:59)")
        minutes.append(hh * 60 + mm)
    if minutes[0] == minutes[1]:
        raise ValueError(f"{text!r} is an empty window: its start and end are equal")
    return Window(tuple(sorted(set(days))), minutes[0], minutes[1])


@dataclass(frozen=True)
class Updates:
    max_drained_percent: int = 10
    maintenance_window: str | None = None
    stop_after_boot_failures: int = 2
    baseline: Baseline | None = None  # re-baseline a group's figures on a new image (baseline.py); None: off

    @property
    def window(self) -> Window | None:
        return parse_window(self.maintenance_window) if self.maintenance_window else None


UPDATES_KEYS = frozenset(("max_drained_percent", "maintenance_window", "stop_after_boot_failures", "baseline"))


def parse_updates(r: Reader, raw: Any, path: str) -> Updates:
    """Read the ``updates`` object (absent: every default); problems go to ``r`` with their key path."""
    if raw is None:
        return Updates()
    if not isinstance(raw, dict):
        r.err(path, f"must be an object, got {raw!r}")
        return Updates()
    obj = cast("dict[str, Any]", raw)
    r.unknown(obj, UPDATES_KEYS, path)
    window = r.string(obj, "maintenance_window", path, nullable=True)
    if window is not None:
        try:
            parse_window(window)
        except ValueError as exc:
            r.err(f"{path}.maintenance_window", str(exc))
            window = None
    return Updates(
        max_drained_percent=r.integer(obj, "max_drained_percent", path, default=10, minimum=0, maximum=100),
        maintenance_window=window,
        stop_after_boot_failures=r.integer(obj, "stop_after_boot_failures", path, default=2, minimum=1, maximum=1000),
        baseline=parse_baseline(r, obj.get("baseline"), f"{path}.baseline"),
    )
