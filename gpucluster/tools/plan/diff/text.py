"""``gpucluster plan diff`` as text: counts first, then what loses data, what is replaced (and by which
property), what disrupts running work, then every change with its inputs, and user data and rendered
files as unified line diffs of their decoded content. The steps come from
:mod:`~gpucluster.tools.plan.diff.changes`; markdown is :mod:`~gpucluster.tools.plan.diff.markdown`."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from gpucluster.tools.plan.diff.changes import compare
from gpucluster.tools.plan.diff.step import ABSENT, USER_DATA_KEYS, Comparison, FileChange, Step
from gpucluster.tools.plan.diff.teams import team_lines

SIGN = {"create": "+", "update": "~", "replace": "±", "delete": "-"}
FILE_BACKED = (*USER_DATA_KEYS, "contentBase64")
"""Inputs shown decoded as files (the file section has their line diff), never as one long value."""
MAX_VALUE = 160


def short_type(token: str) -> str:
    """``aws:ec2/launchTemplate:LaunchTemplate`` → ``aws:ec2:LaunchTemplate``."""
    parts = token.split(":")
    if len(parts) == 3 and "/" in parts[1]:
        return f"{parts[0]}:{parts[1].split('/')[0]}:{parts[2]}"
    return token


def counts_line(c: Comparison) -> str:
    n = c.counts()
    return f"{n['create']} to create, {n['update']} to update, {n['replace']} to replace, {n['delete']} to delete"


def _value(v: Any) -> str:
    text = repr(v) if v != ABSENT else ABSENT
    return text if len(text) <= MAX_VALUE else f"{text[: MAX_VALUE - 1]}…' ({len(text):,} characters)"


def warning_lines(c: Comparison) -> list[str]:
    """Data loss, replacements and disruption, one line each: what a reviewer must see first."""
    out: list[str] = []
    if c.data_loss:
        out.append("DATA LOSS")
        out += [f"  ! {s.data_loss}" for s in c.data_loss]
    blocked = [s for s in c.steps if s.blocked and not s.data_loss]
    replaced = [s for s in c.steps if s.op == "replace"]
    if replaced:
        out.append("Replacements")
        for s in replaced:
            guard = "; protected: `pulumi up` stops here" if s.blocked else ""
            verb = "forces" if len(s.replace_reasons) == 1 else "force"
            out.append(f"  ± {short_type(s.type)} {s.name}: {s.because()} {verb} a new one{guard}")
    for s in blocked:
        if s.op == "delete":
            out.append(f"  ! deleting {s.name}: it is protected, so `pulumi up` stops before touching it")
    kept = [(s, p) for s in c.steps for p in s.ignored]
    if kept:
        out.append("Ignored (ignore_changes: `pulumi up` keeps the existing value, nothing is replaced)")
        out += [
            f"  = {short_type(s.type)} {s.name}: {p}: {_value(s.value('old', p))} → {_value(s.value('new', p))}" for s, p in kept
        ]
    disrupted = [(s, d) for s in c.steps for d in s.disruption]
    if disrupted:
        out.append("Disruption")
        out += [f"  ! {d}" for _, d in disrupted]
    return out


def file_diff(change: FileChange, indent: str = "    ") -> list[str]:
    """A unified line diff of one rendered file (the whole file for an added or removed one)."""
    before = (change.old or "").splitlines()
    after = (change.new or "").splitlines()
    lines = difflib.unified_diff(before, after, f"old/{change.path}", f"new/{change.path}", n=2, lineterm="")
    return [f"{indent}{line}" for line in lines]


def step_lines(s: Step) -> list[str]:
    """One change: its sign, type and name, then each changed input (file-backed ones point at their file)."""
    why = f"  (replace: {s.because()})" if s.replace_reasons else ""
    marks = "  [protected]" if s.protect else ""
    out = [f"{SIGN[s.op]} {short_type(s.type)} {s.name}{why}{marks}"]
    shown: set[str] = set()
    for path in s.changed:
        top = path.split(".", 1)[0].split("[", 1)[0]
        if top in FILE_BACKED:
            if top not in shown:
                shown.add(top)
                out.append(f"    {top}: changed (decoded line diff under {s.name}/… in Files below)")
            continue
        before, after = s.value("old", path), s.value("new", path)
        if before == after:  # a new launch template version: the mock engine's number does not move
            out.append(f"    {path}: a new version")
            continue
        out.append(f"    {path}: {_value(before)} → {_value(after)}")
    for path, names in sorted(s.carried.items()):
        are = "is" if len(names) == 1 else "are"
        if path in FILE_BACKED:
            also = "also " if path in shown else ""
            out.append(f"    {path}: {also}holds values of {', '.join(names)}, which {are} replaced")
        elif path not in s.changed:
            out.append(f"    {path}: {_value(s.value('new', path))} comes from {', '.join(names)}, which {are} replaced")
    out += [f"    {n}" for n in s.notes]
    return out


def render(
    c: Comparison,
    *,
    cost_lines: Sequence[str] = (),
    summary_lines: Sequence[str] = (),
) -> str:
    """The whole text diff. ``cost_lines``/``summary_lines`` (cost delta, plan summary) are shown when given."""
    stacks = c.new_stack if c.old_stack == c.new_stack else f"{c.old_stack} → {c.new_stack}"
    out = [f"gpucluster plan diff — stack {stacks} (project {c.project})", counts_line(c)]
    if not c.changed:
        return "\n".join([*out, "no changes"]) + "\n"
    out.append("")
    warnings = warning_lines(c)
    if warnings:
        out += [*warnings, ""]
    teams = team_lines(c)
    if teams:
        out += [
            "Teams (Slurm accounts; the head node reconciles them within minutes, without a restart)",
            *(f"  {t}" for t in teams),
            "",
        ]
    if c.images:
        out += ["Image locks edited by hand", *(f"  {t}" for t in c.images), ""]
    if cost_lines:
        out += ["Cost", *cost_lines, ""]
    if summary_lines:
        out += ["Summary", *summary_lines, ""]
    if c.changes:
        out.append("Changes")
        for s in c.changes:
            out += step_lines(s)
        out.append("")
    if c.files:
        out.append("Files")
        for f in c.files:
            out.append(f"{SIGN[f.op]} file {f.path}")
            out += file_diff(f)
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The text diff of two plan JSONs, as lines (the form the tests and scripts read)."""
    return render(compare(old, new)).splitlines()
