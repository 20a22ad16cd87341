# pyright: strict
"""Slurm hostlist expressions, in pure Python (the fallback when scontrol is not usable).

Grammar (what Slurm accepts for node names): items separated by commas or whitespace at the top
level; an item is text with any number of bracket groups, each a comma list of ``N`` or ``A-B``,
the last group ending the item;
an item with several bracket groups expands to their cartesian product (``r[1-2]n[1-2]``).
A range keeps the zero padding of its lower bound: ``n[01-10]`` gives ``n01 .. n10``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

MAX_EXPANSION = 1_000_000


class HostlistError(ValueError):
    pass


def _split_top(expr: str) -> list[str]:
    items: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in expr:
        if ch == "[":
            if depth:
                raise HostlistError(f"nested '[' in hostlist {expr!r}")
            depth = 1
        elif ch == "]":
            if not depth:
                raise HostlistError(f"unbalanced ']' in hostlist {expr!r}")
            depth = 0
        if not depth and (ch == "," or ch.isspace()):
            if cur:
                items.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    if depth:
        raise HostlistError(f"unbalanced '[' in hostlist {expr!r}")
    if cur:
        items.append("".join(cur))
    return items


def _expand_ranges(body: str, expr: str) -> list[str]:
    out: list[str] = []
    for part in body.split(","):
        part = part.strip()
        if not part:
            raise HostlistError(f"empty range in hostlist {expr!r}")
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise HostlistError(f"bad range {part!r} in hostlist {expr!r}")
        width = len(lo)
        a = int(lo)
        b = int(hi) if sep else a
        if b < a:
            raise HostlistError(f"descending range {part!r} in hostlist {expr!r}")
        if b - a + 1 > MAX_EXPANSION:
            raise HostlistError(f"range {part!r} in hostlist {expr!r} is too large")
        out.extend(str(n).zfill(width) for n in range(a, b + 1))
    return out


def expand(expr: str) -> list[str]:
    """Expand a hostlist expression into node names, in order, without duplicates."""
    names: list[str] = []
    seen: set[str] = set()
    for item in _split_top(expr.strip()):
        pieces: list[list[str]] = []
        pos = 0
        for m in re.finditer(r"\[([^\]]*)\]", item):
            pieces.append([item[pos : m.start()]])
            pieces.append(_expand_ranges(m.group(1), expr))
            pos = m.end()
        pieces.append([item[pos:]])
        if "[" in item[pos:] or "]" in item[pos:] or (pos and item[pos:]):
            # like Slurm: nothing may follow the last bracket group
            raise HostlistError(f"bad brackets in hostlist {expr!r}")
        total = 1
        for p in pieces:
            total *= len(p)
        if total > MAX_EXPANSION:
            raise HostlistError(f"hostlist {expr!r} expands to too many names")
        for combo in itertools.product(*pieces):
            name = "".join(combo)
            if name and name not in seen:
                seen.add(name)
                names.append(name)
    return names


_NUM_SUFFIX = re.compile(r"^(.*?)(\d+)$")


def _ranges(numbers: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for n in sorted(set(numbers)):
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def compress(names: Iterable[str]) -> str:
    """Inverse of expand for a set of names: ``["p5-1","p5-2","p5-4"]`` -> ``"p5-[1-2,4]"``.

    ``set(expand(compress(x))) == set(x)``; names are grouped by prefix and zero-padding width.
    """
    groups: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    for name in set(names):
        m = _NUM_SUFFIX.match(name)
        if not m or "[" in name or "]" in name or "," in name:
            plain.append(name)
            continue
        prefix, digits = m.group(1), m.group(2)
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
        groups.setdefault((prefix, width), []).append(int(digits))
    parts: list[tuple[tuple[str, int, int], str]] = []
    for (prefix, width), numbers in groups.items():
        rs = _ranges(numbers)

        def fmt(n: int, width: int = width) -> str:
            return str(n).zfill(width) if width else str(n)

        if len(rs) == 1 and rs[0][0] == rs[0][1]:
            text = f"{prefix}{fmt(rs[0][0])}"
        else:
            body = ",".join(fmt(a) if a == b else f"{fmt(a)}-{fmt(b)}" for a, b in rs)
            text = f"{prefix}[{body}]"
        parts.append(((prefix, rs[0][0], width), text))
    for name in plain:
        parts.append(((name, -1, -1), name))
    parts.sort(key=lambda p: p[0])
    return ",".join(text for _, text in parts)


def order_key(name: str) -> tuple[str, int, str]:
    """Sort key that puts p5-2 before p5-10."""
    m = _NUM_SUFFIX.match(name)
    if not m:
        return (name, -1, name)
    return (m.group(1), int(m.group(2)), name)
