"""The estimate of a plan (``outputs.estimate``) as text lines: per node group and fixed item, $/h, $/month
and kW now and at maximum size, then totals, then the prices' sources and dates as numbered notes so
the reader can tell a recorded regional price from a borrowed one without the lines growing wide.

It reads the JSON shape only (:meth:`gpucluster.resolve.cost.estimate.Estimate.as_dict`), so a plan written by an
older version, without monthly figures, prints too: a month is then 730 × the hourly figure.
"""

from __future__ import annotations

from typing import Any

from gpucluster.tools.plan.show.width import shorten

HOURS_PER_MONTH = 730


def money(v: float | None) -> str:
    """Dollars to the cent; a line under a cent to four places (a secret's $0.0006/h is not $0.00)."""
    if v is None:
        return "unpriced"
    return f"${v:,.4f}" if 0 < abs(v) < 0.005 else f"${v:,.2f}"


def kw(v: float | None) -> str:
    return "unknown" if v is None else f"{v:,.1f} kW"


def monthly(item: dict[str, Any], key: str, hourly_key: str, hours: float = HOURS_PER_MONTH) -> float | None:
    """``item[key]``, or 730 × ``item[hourly_key]`` where an older plan has no monthly figure."""
    if key in item:
        return item[key]
    hourly = item.get(hourly_key)
    return None if hourly is None else round(hourly * hours, 2)


def unpriced_text(est: dict[str, Any]) -> str:
    """What the totals leave out: ``"; 1 line unpriced, not in these totals: FSx …"`` (empty when every line has a
    price)."""
    names = est.get("unpriced") or []
    if not names:
        return ""
    return f"; {len(names)} line{'s' if len(names) > 1 else ''} unpriced, not in these totals: {', '.join(names)}"


class _Notes:
    """Numbered price sources, each printed once. A source that is another line's source plus ``; <remark>`` (the head
    node's ``…; its EBS volumes are extra``) shares that line's note, its remark printed beside the reference."""

    def __init__(self, sources: list[str] | None = None) -> None:
        self.items: list[str] = []
        self.whole: set[int] = set()
        """The notes of unpriced lines, by number: they name the fix, so are never cut."""
        self._sources: list[str] = []
        self._known = set(sources or ())

    def _split(self, source: str) -> tuple[str, str]:
        base, sep, remark = source.rpartition("; ")
        return (base, remark) if sep and base in self._known else (source, "")

    def ref(self, source: str | None, date: str | None, *, whole: bool = False) -> str:
        """One note per source; the date shown is the first one given for it; ``whole``: never cut."""
        key, remark = self._split(source or "no source given")
        if key not in self._sources:
            self._sources.append(key)
            self.items.append(key + (f" (recorded {date})" if date else ""))
        elif date and not self.items[self._sources.index(key)].endswith(")"):
            self.items[self._sources.index(key)] += f" (recorded {date})"
        if whole:
            self.whole.add(self._sources.index(key) + 1)
        return f"[{self._sources.index(key) + 1}]" + (f"; {remark}" if remark else "")


def _two_a_row(notes: list[str], width: int, whole: set[int]) -> list[str]:
    """The notes cut to half the width, two to a row (``plan --detail`` has them whole, one to a row); a note in
    ``whole`` (an unpriced line's, which names its fix) stays whole on a row of its own (wrapped by the report)."""
    half = (width - 2) // 2 - 1
    rows: list[str] = []
    pair: list[str] = []
    for n, note in enumerate(notes, 1):
        if n in whole:
            rows.append(f"  {note}")
            continue
        pair.append(shorten(note, half).ljust(half))
        if len(pair) == 2:
            rows.append(f"  {' '.join(pair)}".rstrip())
            pair = []
    return rows + ([f"  {pair[0]}".rstrip()] if pair else [])


def estimate_lines(est: dict[str, Any], width: int | None = None) -> list[str]:
    """The estimate section of the text plan (empty when the plan has no estimate). With a ``width``, a group at its
    maximum size takes one row where it fits, and the price sources are cut to half of it, two to a row
    (``plan --detail`` prints them whole)."""
    if not est:
        return []
    hours = est.get("hoursPerMonth") or HOURS_PER_MONTH
    region = f" in {est['region']}" if est.get("region") else ""
    sources = [g.get("priceSource") for g in est.get("nodeGroups", [])] + [i.get("source") for i in est.get("fixed", [])]
    notes = _Notes([str(x) for x in sources if x])
    lines = [f"Estimate{region} (planning figures, not a bill; a month is {hours} h; prices: gpucluster/facts/data/prices.json)"]
    for g in est.get("nodeGroups", []):
        reserved = f", {g['reserved']} reserved" if g.get("reserved") else ""
        capacity = g.get("capacityType") or "on-demand"
        lines.append(
            f"  {g['nodeGroup']:<12} {g['desired']:>4} × {g['instanceType']:<18} {money(g.get('usdPerNodeHour'))}/node-hour, "
            f"{capacity}{reserved} {notes.ref(g.get('priceSource'), g.get('priceDate'), whole=g.get('usdPerNodeHour') is None)}"
        )
        now = f"{money(g.get('usdPerHour'))}/h, {money(monthly(g, 'usdPerMonth', 'usdPerHour', hours))}/month, {kw(g.get('kw'))}"
        same = f"; {now} (also at max)"
        if width is not None and g["desired"] == g["max"] and len(lines[-1] + same) <= width:  # a static group: one row
            lines[-1] += same
            continue
        lines.append(
            f"  {'':<12} now {now}; at max {g['max']}: {money(g.get('usdPerHourAtMax'))}/h, "
            f"{money(monthly(g, 'usdPerMonthAtMax', 'usdPerHourAtMax', hours))}/month, {kw(g.get('kwAtMax'))}"
        )
    for item in est.get("fixed", []):
        power = f", {kw(item.get('kw'))}" if item.get("kw") else ""
        at_max = ""
        if item.get("usdPerHourAtMax", item.get("usdPerHour")) != item.get("usdPerHour"):
            at_max = (
                f"; at max {money(item.get('usdPerHourAtMax'))}/h, "
                f"{money(monthly(item, 'usdPerMonthAtMax', 'usdPerHourAtMax', hours))}/month"
            )
        lines.append(
            f"  {item['name']:<38} {money(item.get('usdPerHour'))}/h, "
            f"{money(monthly(item, 'usdPerMonth', 'usdPerHour', hours))}/month{at_max}{power} "
            f"{notes.ref(item.get('source'), item.get('priceDate'), whole=item.get('usdPerHour') is None)}"
        )
    lines.append(
        f"  total: {money(est.get('usdPerHour'))}/h, {money(monthly(est, 'usdPerMonth', 'usdPerHour', hours))}/month, "
        f"{kw(est.get('kw'))} now; {money(est.get('usdPerHourAtMax'))}/h, "
        f"{money(monthly(est, 'usdPerMonthAtMax', 'usdPerHourAtMax', hours))}/month, {kw(est.get('kwAtMax'))} at max size"
        + unpriced_text(est)
    )
    notes_text = [f"[{n}] {text}" for n, text in enumerate(notes.items, 1)]
    lines += [f"  {note}" for note in notes_text] if width is None else _two_a_row(notes_text, width, notes.whole)
    lines.append("")
    return lines
