"""What a change costs: the estimates of two JSON plans side by side, before → after and the delta.

``compare(old_plan, new_plan)`` reads each plan's estimate (its ``outputs.estimate``, or for a program of your own
the one worked out from its resources: :mod:`~gpucluster.tools.plan.show.program_estimate`; and ``outputs.storageSizing`` for
the file system's size) and matches node groups by name and fixed items by their stable key, so a group
added or removed shows as such and a file system that grew stays one row. Every row carries, before and
after, $/h and $/month (730 h) now and at maximum size and kW now and at maximum; the delta is after −
before (an added row counts from 0, a removed one to 0; unknown where either side is unknown).

Plans written before the estimate had monthly figures or item keys still compare: a month is then 730 ×
the hourly figure and an item's key comes from its name. The output is data (:func:`to_json`), text lines
(:func:`text_lines`) and a Markdown table (:func:`markdown`) for a pull-request comment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpucluster.tools.plan.show.estimate import HOURS_PER_MONTH, kw, money, monthly
from gpucluster.tools.plan.show.program_estimate import plan_estimate

FIGURES = ("usdPerHour", "usdPerHourAtMax", "usdPerMonth", "usdPerMonthAtMax", "kw", "kwAtMax")
"""The figures of every row, in the order the table shows them."""
LABELS = {
    "usdPerHour": "$/h now",
    "usdPerHourAtMax": "$/h at max",
    "usdPerMonth": "$/month now",
    "usdPerMonthAtMax": "$/month at max",
    "kw": "kW now",
    "kwAtMax": "kW at max",
}
# Keys of the fixed items (gpucluster.resolve.cost.estimate) by the start of their names, for plans without keys.
_KEYS_BY_NAME = (
    (r"\d+ NAT gateway", "nat-gateways"),
    (r"\d+ interface endpoint", "interface-endpoints"),
    (r"FSx for Lustre", "fsx-lustre"),
    (r"Slurm head node", "slurm-head-node"),
    (r"EKS control plane", "eks-control-plane"),
    (r"EKS system nodes", "eks-system-nodes"),
)


@dataclass(frozen=True)
class Row:
    """One node group, fixed item or the total, before and after (``None``: not in that plan)."""

    kind: str  # "nodeGroup" | "fixed" | "total"
    key: str
    label_before: str | None
    label_after: str | None
    before: dict[str, float | None] | None
    after: dict[str, float | None] | None

    @property
    def status(self) -> str:
        if self.before is None:
            return "added"
        if self.after is None:
            return "removed"
        return "changed" if self.before != self.after or self.label_before != self.label_after else "same"

    @property
    def label(self) -> str:
        return self.label_after or self.label_before or self.key

    def delta(self, figure: str) -> float | None:
        old = 0.0 if self.before is None else self.before.get(figure)
        new = 0.0 if self.after is None else self.after.get(figure)
        if old is None or new is None:
            return None
        return round(new - old, 2)


@dataclass(frozen=True)
class CostDelta:
    rows: tuple[Row, ...]
    storage: dict[str, Any]
    """The shared file system's sized capacity before and after (``{}`` where neither plan sized one)."""

    @property
    def total(self) -> Row:
        return self.rows[-1]

    @property
    def changed(self) -> bool:
        return any(r.status != "same" for r in self.rows) or self.storage.get("before") != self.storage.get("after")


def _fixed_key(item: dict[str, Any]) -> str:
    if item.get("key"):
        return str(item["key"])
    name = str(item.get("name", ""))
    for pattern, key in _KEYS_BY_NAME:
        if re.match(pattern, name):
            return key
    return name


def _figures(item: dict[str, Any], *, fixed: bool = False, hours: float = HOURS_PER_MONTH) -> dict[str, float | None]:
    """The six figures of a row; a fixed item draws its kW at both sizes and costs the same at both unless it says
    otherwise (monitoring follows the node groups; an older plan has no figure at max)."""
    if fixed:
        hourly, month, power = item.get("usdPerHour"), monthly(item, "usdPerMonth", "usdPerHour", hours), item.get("kw")
        return {
            "usdPerHour": hourly,
            "usdPerHourAtMax": item.get("usdPerHourAtMax", hourly),
            "usdPerMonth": month,
            "usdPerMonthAtMax": monthly(item, "usdPerMonthAtMax", "usdPerHourAtMax", hours)
            if "usdPerHourAtMax" in item
            else month,
            "kw": power,
            "kwAtMax": power,
        }
    return {
        "usdPerHour": item.get("usdPerHour"),
        "usdPerHourAtMax": item.get("usdPerHourAtMax"),
        "usdPerMonth": monthly(item, "usdPerMonth", "usdPerHour", hours),
        "usdPerMonthAtMax": monthly(item, "usdPerMonthAtMax", "usdPerHourAtMax", hours),
        "kw": item.get("kw"),
        "kwAtMax": item.get("kwAtMax"),
    }


def _group_label(g: dict[str, Any]) -> str:
    reserved = f", {g['reserved']} reserved" if g.get("reserved") else ""
    return (
        f"{g.get('desired', 0)}–{g.get('max', 0)} × {g.get('instanceType', '?')} {g.get('capacityType') or ''}{reserved}".strip()
    )


def _outputs(plan: dict[str, Any]) -> dict[str, Any]:
    return plan.get("outputs") or {}


def compare(old_plan: dict[str, Any], new_plan: dict[str, Any]) -> CostDelta:
    """The cost and power of ``new_plan`` against ``old_plan`` (two ``gpucluster plan --json`` documents)."""
    old, new = plan_estimate(old_plan), plan_estimate(new_plan)
    old_hours, new_hours = old.get("hoursPerMonth") or HOURS_PER_MONTH, new.get("hoursPerMonth") or HOURS_PER_MONTH
    rows: list[Row] = []
    before = {g["nodeGroup"]: g for g in old.get("nodeGroups") or []}
    after = {g["nodeGroup"]: g for g in new.get("nodeGroups") or []}
    for name in [*after, *(n for n in before if n not in after)]:
        b, a = before.get(name), after.get(name)
        rows.append(
            Row(
                "nodeGroup",
                name,
                None if b is None else _group_label(b),
                None if a is None else _group_label(a),
                None if b is None else _figures(b, hours=old_hours),
                None if a is None else _figures(a, hours=new_hours),
            )
        )
    fixed_before = {_fixed_key(i): i for i in old.get("fixed") or []}
    fixed_after = {_fixed_key(i): i for i in new.get("fixed") or []}
    for key in [*fixed_after, *(k for k in fixed_before if k not in fixed_after)]:
        b, a = fixed_before.get(key), fixed_after.get(key)
        rows.append(
            Row(
                "fixed",
                key,
                None if b is None else str(b.get("name", key)),
                None if a is None else str(a.get("name", key)),
                None if b is None else _figures(b, fixed=True, hours=old_hours),
                None if a is None else _figures(a, fixed=True, hours=new_hours),
            )
        )
    rows.append(
        Row(
            "total",
            "total",
            "total" if old else None,
            "total" if new else None,
            _figures(old, hours=old_hours) if old else None,
            _figures(new, hours=new_hours) if new else None,
        )
    )
    return CostDelta(tuple(rows), _storage(_outputs(old_plan).get("storageSizing"), _outputs(new_plan).get("storageSizing")))


def _storage(old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    if not old and not new:
        return {}

    def pick(s: dict[str, Any] | None) -> dict[str, Any] | None:
        if not s:
            return None
        return {k: s.get(k) for k in ("capacityGiB", "dataGiB", "deliveredMBps", "usdPerMonth")}

    return {"before": pick(old), "after": pick(new)}


def to_json(delta: CostDelta) -> dict[str, Any]:
    """The delta as data: per row the figures before and after and the delta of each."""
    return {
        "hoursPerMonth": HOURS_PER_MONTH,
        "changed": delta.changed,
        "rows": [
            {
                "kind": r.kind,
                "key": r.key,
                "status": r.status,
                "before": None if r.before is None else {"label": r.label_before, **r.before},
                "after": None if r.after is None else {"label": r.label_after, **r.after},
                "delta": {f: r.delta(f) for f in FIGURES},
            }
            for r in delta.rows
        ],
        "storage": delta.storage,
    }


def _fmt(figure: str, value: float | None) -> str:
    if figure.startswith("kw"):
        return kw(value)
    return money(value)


def _signed(figure: str, value: float | None) -> str:
    if value is None:
        return "unknown"
    text = _fmt(figure, abs(value))
    return ("+" if value >= 0 else "−") + text


def _change(r: Row, figure: str) -> str:
    """``$880.64 → $1,320.96 (+$440.32)``; one value where nothing changed."""
    old = None if r.before is None else r.before.get(figure)
    new = None if r.after is None else r.after.get(figure)
    if r.before is not None and r.after is not None and old == new:
        return _fmt(figure, new)
    left = "—" if r.before is None else _fmt(figure, old)
    right = "—" if r.after is None else _fmt(figure, new)
    return f"{left} → {right} ({_signed(figure, r.delta(figure))})"


def _title(r: Row) -> str:
    if r.kind == "total":
        return "total"
    what = "node group " + r.key if r.kind == "nodeGroup" else r.label
    if r.status in ("added", "removed"):
        return f"{what} ({r.status})"
    if r.kind == "nodeGroup" and r.label_before != r.label_after:
        return f"{what}: {r.label_before} → {r.label_after}"
    if r.kind == "fixed" and r.label_before != r.label_after:
        return f"{r.label_before} → {r.label_after}"
    return what


def _storage_line(storage: dict[str, Any]) -> str | None:
    b, a = storage.get("before") or {}, storage.get("after") or {}
    if not storage or b.get("capacityGiB") == a.get("capacityGiB"):
        return None

    def cap(s: dict[str, Any]) -> str:
        return "none" if not s else f"{s.get('capacityGiB') or 0:,} GiB"

    return f"shared file system sized {cap(b)} → {cap(a)} ({money(b.get('usdPerMonth'))} → {money(a.get('usdPerMonth'))}/month)"


def text_lines(delta: CostDelta) -> list[str]:
    """The delta for the text diff: each changed row with its $/h, $/month and kW now and at max; then the total."""
    lines = [f"Cost and power (before → after, delta; a month is {HOURS_PER_MONTH} h)"]
    shown = [r for r in delta.rows if r.status != "same" or r.kind == "total"]
    for r in shown:
        lines.append(f"  {_title(r)}")
        for unit, now, at_max in (
            ("$/h", "usdPerHour", "usdPerHourAtMax"),
            ("$/month", "usdPerMonth", "usdPerMonthAtMax"),
            ("kW", "kw", "kwAtMax"),
        ):
            lines.append(f"    {unit:<8} now {_change(r, now)};  at max {_change(r, at_max)}")
    storage = _storage_line(delta.storage)
    if storage:
        lines.append(f"  {storage}")
    if not delta.changed:
        lines.append("  no change")
    return lines


def markdown(delta: CostDelta) -> str:
    """A Markdown table of the changed rows and the total, one column per figure."""
    head = "| | " + " | ".join(LABELS[f] for f in FIGURES) + " |"
    rule = "|---|" + "---:|" * len(FIGURES)
    body = []
    for r in delta.rows:
        if r.status == "same" and r.kind != "total":
            continue
        title = f"**{_title(r)}**" if r.kind == "total" else _title(r)
        body.append(f"| {title.replace('|', '∣')} | " + " | ".join(_change(r, f) for f in FIGURES) + " |")
    text = [f"**Cost and power** (before → after, delta; a month is {HOURS_PER_MONTH} h)", "", head, rule, *body]
    storage = _storage_line(delta.storage)
    if storage:
        text += ["", storage[0].upper() + storage[1:] + "."]
    return "\n".join(text) + "\n"
