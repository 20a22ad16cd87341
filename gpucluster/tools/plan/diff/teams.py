"""Team changes in a plan diff, said as such: ``research: 40 → 48 guaranteed GPUs``, a team added or removed, its
fair share, longest job, borrowing and members. Read from the head node's accounts contract
(``…/etc/gpucluster/accounts.json``, :mod:`gpucluster.render.slurm.accounts`) in the two plans' files; the file's line
diff stays in the Files section."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gpucluster.tools.plan.diff.step import Comparison

CONTRACT_SUFFIX = "/etc/gpucluster/accounts.json"


def _accounts(text: str | None) -> dict[str, dict[str, Any]]:
    if not text:
        return {}
    try:
        doc = json.loads(text)
    except ValueError:
        return {}
    accounts = doc.get("accounts") if isinstance(doc, dict) else None
    return {str(a["name"]): a for a in accounts or [] if isinstance(a, dict) and "name" in a}


def _gpus(tres: dict[str, Any]) -> str:
    """``85 guaranteed GPUs``, ``85 guaranteed h100 GPUs`` or ``85 h100 + 2 l40s guaranteed GPUs``."""
    if not tres:
        return "no guaranteed GPUs"
    if len(tres) == 1:
        ((key, n),) = tres.items()
        return f"{n} guaranteed {key.split(':', 1)[1] + ' ' if ':' in key else ''}GPUs"
    parts = [f"{n} {k.split(':', 1)[1]}" if ":" in k else str(n) for k, n in sorted(tres.items())]
    return f"{' + '.join(parts)} guaranteed GPUs"


def _minutes(value: Any) -> str:
    if value is None:
        return "no limit"
    days, rest = divmod(int(value), 1440)
    return f"{days}d" if not rest else f"{int(value) // 60}h" if not int(value) % 60 else f"{value}min"


def _team_changes(name: str, a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    out: list[str] = []
    ta, tb = a.get("grp_tres") or {}, b.get("grp_tres") or {}
    if ta != tb:
        if set(ta) == set(tb) and len(ta) == 1:
            (key,) = ta
            model = f" {key.split(':', 1)[1]}" if ":" in key else ""
            out.append(f"{name}: {ta[key]} → {tb[key]} guaranteed{model} GPUs")
        else:
            out.append(f"{name}: {_gpus(ta)} → {_gpus(tb)}")
    if a.get("fairshare") != b.get("fairshare"):
        out.append(f"{name}: fair share {a.get('fairshare')} → {b.get('fairshare')}")
    if a.get("max_wall_minutes") != b.get("max_wall_minutes"):
        out.append(f"{name}: longest job {_minutes(a.get('max_wall_minutes'))} → {_minutes(b.get('max_wall_minutes'))}")
    borrow_a, borrow_b = "borrow" in (a.get("qos") or []), "borrow" in (b.get("qos") or [])
    if borrow_a != borrow_b:
        out.append(f"{name}: {'may now borrow' if borrow_b else 'may no longer borrow'} idle GPUs beyond its guarantee")
    for field, what in (("users", "members"), ("groups", "directory groups")):
        before, after = list(a.get(field) or []), list(b.get(field) or [])
        added, removed = [u for u in after if u not in before], [u for u in before if u not in after]
        if added or removed:
            out.append(f"{name}: {what} " + " ".join([*(f"+{u}" for u in added), *(f"-{u}" for u in removed)]))
    return out


def team_lines(c: Comparison) -> list[str]:
    """One line per team change between the two plans' accounts contracts (none when neither has teams)."""
    out: list[str] = []
    for f in c.files:
        if not f.path.endswith(CONTRACT_SUFFIX):
            continue
        before, after = _accounts(f.old), _accounts(f.new)
        for name, b in after.items():
            if name not in before:
                out.append(f"{name}: added — {_gpus(b.get('grp_tres') or {})}, fair share {b.get('fairshare')}")
            else:
                out += _team_changes(name, before[name], b)
        for name in before:
            if name not in after:
                out.append(f"{name}: removed — its accounts are kept while it has jobs")
    return out


def summary_row(files: Mapping[str, str]) -> tuple[str, str] | None:
    """The plan summary's ``teams`` row of a Slurm cluster (from the head node's accounts contract), or None."""
    text = next((t for k, t in files.items() if k.endswith(CONTRACT_SUFFIX)), None)
    accounts = _accounts(text)
    if not accounts:
        return None
    parts = [
        f"{name}: {_gpus(a.get('grp_tres') or {})}{', may borrow' if 'borrow' in (a.get('qos') or []) else ''}"
        for name, a in accounts.items()
    ]
    return "teams", "; ".join(parts) + " (Slurm accounts; docs/teams.md)"
