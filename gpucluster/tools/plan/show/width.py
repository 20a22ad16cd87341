"""The text plan at the width it is printed for: the terminal's columns when standard output is a terminal,
else :data:`DEFAULT_WIDTH` (a log, a pipe, a file), or ``--width N``.

Two tools, used by the parts of the plan that know their content: :func:`elide` keeps what fits of a list on one
line and counts the rest (``… and 3 more``), for the default view, whose line budget
(:data:`~gpucluster.tools.plan.show.report.SCREENS`) wrapping alone would break; :func:`wrap` folds a line that
must stay whole (a finding, a summary row, the detail view's every line) onto rows indented under its item. The
width is presentation only: the JSON plan never depends on it."""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from typing import TextIO

DEFAULT_WIDTH = 120
"""The width when standard output is not a terminal: the plan in a CI log, a pull request or a file."""

MIN_WIDTH = 60
"""The narrowest ``--width`` taken: the tree's labels and the summary's keys need about half of it."""

_LEAD = re.compile(r"^[ │├└─]*")
_VALUE = re.compile(r"^\S+(?: \S+)*? {2,}")
"""The first column gap after an item's label (``users      alice…``): continuation rows align under the value."""

_BREAKS = (" · ", " | ", "; ", ", ", " ")
"""Where a row may end, best first: between the parts of a description, then between words."""


def output_width(stream: TextIO, width: int | None = None) -> int:
    """``width`` when given, else the terminal's columns where ``stream`` is one, else :data:`DEFAULT_WIDTH`."""
    if width is not None:
        return width
    isatty = getattr(stream, "isatty", None)
    if isatty and isatty():
        return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    return DEFAULT_WIDTH


def hanging(line: str) -> str:
    """The prefix of ``line``'s continuation rows: the tree's rails carried down, and two columns past the item's
    value column (or, where that is far, four columns in) as the indent: deeper than the next
    item's value, so a wrapped row never reads as a row of its own."""
    lead = _LEAD.match(line)
    head = lead.group(0) if lead else ""
    rails = head.replace("├─", "│ ").replace("└─", "  ").replace("─", " ")
    rest = line[len(head) :]
    gap = _VALUE.match(rest)
    indent = len(gap.group(0)) + 2 if gap and len(gap.group(0)) <= 24 else 4
    return rails + " " * indent


def wrap(line: str, width: int) -> list[str]:
    """``line`` as rows of at most ``width`` columns, broken at a part or word boundary, continuation rows indented
    under the item (:func:`hanging`); a word longer than a row is cut."""
    if len(line) <= width:
        return [line]
    prefix = hanging(line)
    if len(prefix) > width // 2:  # a deep tree at a narrow width: keep the rails, drop the indent
        prefix = prefix[: width // 2]
    rows: list[str] = []
    rest = line
    while len(rest) > width:
        cut = _cut(rest, width, len(prefix) if rows else len(_LEAD.match(rest).group(0)))  # type: ignore[union-attr]
        rows.append(rest[:cut].rstrip())
        rest = prefix + rest[cut:].lstrip(" ·|;")
        if len(rest) <= len(prefix):
            break
    if len(rest) > len(prefix) or not rows:
        rows.append(rest)
    return rows


def _cut(text: str, width: int, floor: int) -> int:
    """Where to end a row of ``text`` no wider than ``width``: after the best kind of separator in the row's last
    third, else after the last separator past ``floor`` + a quarter, else at ``width``."""
    found = {sep: text.rfind(sep, floor + (width - floor) // 4, width - len(sep.rstrip()) + 1) for sep in _BREAKS}
    late = floor + 2 * (width - floor) // 3
    best = next((sep for sep in _BREAKS if found[sep] >= late), None)
    if best is None:
        best = max(_BREAKS, key=lambda sep: found[sep])
    return found[best] + len(best.rstrip()) if found[best] > 0 else width


def wrap_all(lines: Sequence[str], width: int) -> list[str]:
    return [row for line in lines for row in wrap(line, width)]


def more(hidden: Sequence[str]) -> str:
    return f"… and {len(hidden)} more"


def elide(head: str, parts: Sequence[str], width: int, sep: str = " · ", *, first: bool = False, count: bool = True) -> str:
    """``head`` and the ``parts`` (joined by ``sep``) up to the first that does not fit in ``width`` columns, then
    the count of the others (``… and 2 more``; without ``count``, the parts of one description, as much of the
    first left out as fits, then ``…``). A part with a warning mark ``(!)`` is never left out, nor the first part
    where ``first``; the text is then cut to the width."""
    whole = head + sep.join(parts)
    if len(whole) <= width or not parts:
        return whole if len(whole) <= width else shorten(whole, width)
    reserve = len(sep + more(parts)) if count else 2
    kept: list[str] = []
    hidden: list[str] = []
    used = len(head)
    marked = sum(len(p) + len(sep) for p in parts if "(!)" in p)  # room kept for the warnings still to come
    for part in parts:
        cost = len(part) + (len(sep) if kept else 0)
        if "(!)" in part:
            marked -= len(part) + len(sep)
        if "(!)" in part or (first and not kept and not hidden) or (not hidden and used + cost + marked <= width - reserve):
            kept.append(part)
            used += cost
        else:
            hidden.append(part)
    if not kept:  # not even the first part fits: as much of it as does
        return shorten(whole, width)
    if not count and hidden:  # a description: the first part left out, as much of it as fits
        room = width - used - len(sep) - 2
        piece = shorten(hidden[0], room) if room >= 16 else ""
        more_hidden = len(hidden) > 1 or not piece.endswith(" …")
        text = head + sep.join(kept) + (sep + piece if piece else "") + (" …" if more_hidden and piece[-1:] != "…" else "")
        return text if len(text) <= width else shorten(text, width)
    text = head + sep.join(kept) + (sep + more(hidden) if hidden else "")
    return text if len(text) <= width else shorten(text, width)


def shorten(text: str, width: int) -> str:
    """``text`` cut at a part or word boundary to fit ``width`` columns, ending in ``…``."""
    if len(text) <= width:
        return text
    cut = _cut(text, width - 2, len(_LEAD.match(text).group(0)))  # type: ignore[union-attr]
    return text[:cut].rstrip(" ·|;,") + " …"
