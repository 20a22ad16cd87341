# pyright: strict
"""Metric families and the Prometheus text format (version 0.0.4) they are served in.

Label values come from places a user may influence (a GPU's model name, a Slurm pending reason, a Lustre
file system name): every value is escaped as the format asks (backslash, double quote, newline), and a
metric or label *name* is checked against the format's grammar, never escaped: a name that fails it is a
bug of this program, so it raises.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
TYPES = ("gauge", "counter", "untyped")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


@dataclass
class Family:
    """One metric name: its type, help text and samples (labels, value)."""

    name: str
    kind: str
    help: str
    samples: list[tuple[tuple[tuple[str, str], ...], float]] = field(default_factory=lambda: [])

    def __post_init__(self) -> None:
        if not _NAME.match(self.name) or self.kind not in TYPES:
            raise ValueError(f"metric {self.name!r} of type {self.kind!r}: not a valid Prometheus metric")

    def add(self, value: float, labels: Mapping[str, str] | None = None) -> None:
        items = tuple((labels or {}).items())
        for key, _ in items:
            if not _LABEL.match(key) or key.startswith("__"):
                raise ValueError(f"label name {key!r} of {self.name}: not a valid Prometheus label name")
        self.samples.append((items, float(value)))


class Registry:
    """Families by name, in the order first asked for; a family with no sample is not written."""

    def __init__(self) -> None:
        self.families: dict[str, Family] = {}

    def family(self, name: str, kind: str, help_text: str) -> Family:
        fam = self.families.get(name)
        if fam is None:
            fam = self.families[name] = Family(name, kind, help_text)
        elif fam.kind != kind:
            raise ValueError(f"metric {name} declared as {fam.kind} and as {kind}")
        return fam

    def add(self, name: str, kind: str, help_text: str, value: float, labels: Mapping[str, str] | None = None) -> None:
        self.family(name, kind, help_text).add(value, labels)

    def series(self) -> int:
        return sum(len(f.samples) for f in self.families.values())

    def render(self) -> str:
        return render(self.families.values())


def render(families: Iterable[Family]) -> str:
    out: list[str] = []
    for fam in families:
        if not fam.samples:
            continue
        out.append(f"# HELP {fam.name} {escape_help(fam.help)}")
        out.append(f"# TYPE {fam.name} {fam.kind}")
        for labels, value in fam.samples:
            text = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels)
            out.append(f"{fam.name}{{{text}}} {format_value(value)}" if text else f"{fam.name} {format_value(value)}")
    return "\n".join(out) + "\n" if out else ""
