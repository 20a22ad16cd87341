"""Which stacks a pull request can change, from the two checkouts' files alone (no git history needed).

A change to a stack file plans that stack; a change to anything the program reads (the package, components,
templates, ``__main__.py``, ``Pulumi.yaml``, requirements) plans every stack, because any of them can change
what every stack creates. Files no plan reads (documentation, tests, benchmarks, examples, the CI workflow)
plan nothing. Stacks added or removed by the change are planned on the side where they exist.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path

STACK_PREFIX = "stacks/Pulumi."
# Paths no stack program reads: a change confined to them plans nothing. Prefixes, or whole names.
NOT_READ_BY_PLANS = ("docs/", "tests/", "bench/", "examples/", ".github/", ".ci/")
NOT_READ_SUFFIXES = (".md",)


@dataclass(frozen=True)
class Scope:
    stacks: tuple[str, ...]
    """Every stack to plan on both sides (a stack missing on one side is planned as empty there)."""
    code_changed: bool
    """A file the program reads differs: the base must be planned with the base's own code."""
    changed_files: tuple[str, ...]


def _tracked(checkout: Path) -> dict[str, str]:
    """``{path: sha256}`` of the checkout's tracked files (``git ls-files``), or of every file if it is no git
    work tree (a downloaded archive)."""
    try:
        names = subprocess.run(
            ["git", "-C", str(checkout), "ls-files", "-z"], check=True, capture_output=True, text=True
        ).stdout.split("\0")
    except (OSError, subprocess.CalledProcessError):
        names = [str(p.relative_to(checkout)) for p in checkout.rglob("*") if p.is_file() and ".git" not in p.parts]
    out: dict[str, str] = {}
    for name in filter(None, names):
        path = checkout / name
        if path.is_file() and not path.is_symlink():
            out[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        elif path.is_symlink():
            out[name] = "link:" + str(path.readlink())
    return out


def stack_of(path: str) -> str | None:
    """``stacks/Pulumi.slurm-p5.yaml`` → ``slurm-p5``; anything else → ``None``."""
    if path.startswith(STACK_PREFIX) and path.endswith(".yaml") and path.count("/") == 1:
        return path[len(STACK_PREFIX) : -len(".yaml")]
    return None


def _read_by_plans(path: str) -> bool:
    return not (path.startswith(NOT_READ_BY_PLANS) or path.endswith(NOT_READ_SUFFIXES))


def scope(base: Path, head: Path) -> Scope:
    """What to plan for the change from ``base`` to ``head`` (two checkouts of the same repository)."""
    old, new = _tracked(base), _tracked(head)
    changed = sorted(p for p in old.keys() | new.keys() if old.get(p) != new.get(p))
    code_changed = any(stack_of(p) is None and _read_by_plans(p) for p in changed)
    all_stacks = {s for p in old.keys() | new.keys() if (s := stack_of(p))}
    stacks = all_stacks if code_changed else {s for p in changed if (s := stack_of(p))}
    return Scope(tuple(sorted(stacks)), code_changed, tuple(changed))
