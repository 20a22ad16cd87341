"""One resource's step in a comparison of two plans, and the comparison: the data the diff's text,
markdown and JSON renderers read (built by :mod:`~gpucluster.tools.plan.diff.changes`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

OPS = ("create", "update", "replace", "delete")
USER_DATA_KEYS = ("userData", "userDataBase64")
ABSENT = "<absent>"


@dataclass
class Step:
    """What ``pulumi up`` would do to one resource."""

    op: str
    key: str
    type: str
    name: str
    urn: str
    custom: bool
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    changed: list[str] = field(default_factory=list)
    """Every changed input leaf path (``a.b[0].c``), sorted."""
    diff_reasons: list[str] = field(default_factory=list)
    replace_reasons: list[str] = field(default_factory=list)
    data_loss: str | None = None
    disruption: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    """Changed input paths the new program ignores (``ignore_changes``): ``pulumi up`` leaves them as they are."""
    carried: dict[str, list[str]] = field(default_factory=dict)
    """Input paths whose value comes from a resource that is replaced (its id, ARN, address…), with the names of
    the replaced resources (:mod:`~gpucluster.tools.plan.diff.carry`): the value is only known once they are."""

    @property
    def protect(self) -> bool:
        return bool((self.old or {}).get("protect") or (self.new or {}).get("protect"))

    @property
    def blocked(self) -> bool:
        """``pulumi up`` refuses to replace or delete a protected resource."""
        return self.op in ("replace", "delete") and bool((self.old or {}).get("protect"))

    def carried_from(self, reason: str) -> list[str]:
        """The replaced resources whose values reach the inputs at or under ``reason``."""
        under = (reason + ".", reason + "[")
        return sorted({n for path, names in self.carried.items() if path == reason or path.startswith(under) for n in names})

    def because(self) -> str:
        """The replace reasons, each carried one with where it comes from:
        ``networkInterfaces (slurm-p5-slurm-head-eni is replaced)``."""
        out = []
        for reason in self.replace_reasons:
            names = self.carried_from(reason)
            out.append(f"{reason} ({', '.join(names)} {'is' if len(names) == 1 else 'are'} replaced)" if names else reason)
        return ", ".join(out)

    def value(self, side: str, path: str) -> Any:
        doc = self.old if side == "old" else self.new
        return flatten((doc or {}).get("inputs", {})).get(path, ABSENT)


@dataclass
class FileChange:
    path: str
    """The file's key in the new plan (the old one's for a removed file), cluster prefix kept."""
    op: str
    old: str | None
    new: str | None


@dataclass
class Comparison:
    old_stack: str
    new_stack: str
    project: str
    steps: list[Step]
    files: list[FileChange]
    images: list[str] = field(default_factory=list)
    """Locked images changed without a new ``lockedAt`` (:mod:`.images`)."""

    @property
    def changes(self) -> list[Step]:
        return [s for s in self.steps if s.op != "same"]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = dict.fromkeys((*OPS, "same"), 0)
        for s in self.steps:
            out[s.op] += 1
        return out

    @property
    def data_loss(self) -> list[Step]:
        return [s for s in self.steps if s.data_loss]

    @property
    def changed(self) -> bool:
        return bool(self.changes or self.files)


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """Leaf paths of a JSON value, Pulumi's ``detailedDiff`` style (``a.b[0].c``)."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{path}.{k}" if path else str(k)))
        return out or {path: {}}
    if isinstance(value, list):
        out = {}
        for n, v in enumerate(value):
            out.update(flatten(v, f"{path}[{n}]"))
        return out or {path: []}
    return {path: value}
