"""``gpucluster plan diff --format markdown``: the diff as a pull-request comment.

Order is what a reviewer must weigh first: the counts, data loss, replacements (with the property that
forces each), disruption, then the cost and the cluster summary (given by the caller), a Mermaid
picture of the cluster the head plan builds, and the full text diff collapsed in ``<details>``. GitHub
refuses comments over 65,536 characters, so the details are cut to fit, with a note saying how much was
cut and how to see all of it; everything above the details is always kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpucluster.tools.plan.diff.step import Comparison
from gpucluster.tools.plan.diff.teams import team_lines
from gpucluster.tools.plan.diff.text import counts_line, file_diff, short_type, step_lines
from gpucluster.tools.plan.show.mermaid import cluster_mermaid

LIMIT = 65_536
"""GitHub's limit on the body of an issue or pull-request comment, in characters."""


def _fence(lines: list[str]) -> str:
    """A code fence longer than any run of backticks inside the block, so the content cannot close it."""
    ticks = 3
    for line in lines:
        run = 0
        for ch in line:
            run = run + 1 if ch == "`" else 0
            ticks = max(ticks, run + 1)
    return "`" * ticks


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _warnings(c: Comparison) -> list[str]:
    out: list[str] = []
    if c.data_loss:
        out += ["> [!CAUTION]", "> **Data loss.** Merging this and running `pulumi up` would lose data:"]
        out += [f"> - {_cell(s.data_loss or '')}" for s in c.data_loss]
        out.append("")
    replaced = [s for s in c.steps if s.op == "replace"]
    if replaced:
        out += ["### Replacements", "", "| resource | type | forced by | protected |", "|---|---|---|---|"]
        for s in replaced:
            reasons = ", ".join(
                f"`{r}`" + (f" ({', '.join(f'`{n}`' for n in names)} replaced)" if (names := s.carried_from(r)) else "")
                for r in s.replace_reasons
            )
            guard = "yes: `pulumi up` stops here" if s.blocked else "no"
            out.append(f"| `{s.name}` | `{short_type(s.type)}` | {reasons} | {guard} |")
        out.append("")
    deleted = [s for s in c.steps if s.blocked and s.op == "delete" and not s.data_loss]
    disrupted = [d for s in c.steps for d in s.disruption]
    if disrupted or deleted:
        out += ["### Disruption", ""]
        out += [f"- :warning: {_cell(d)}" for d in disrupted]
        out += [f"- :warning: deleting `{s.name}`: it is protected, so `pulumi up` stops before touching it" for s in deleted]
        out.append("")
    return out


def _details(c: Comparison) -> list[str]:
    lines: list[str] = []
    for s in c.changes:
        lines += step_lines(s)
    for f in c.files:
        lines.append(f"{'+' if f.op == 'create' else '-' if f.op == 'delete' else '~'} file {f.path}")
        lines += file_diff(f)
    return lines


def render(
    c: Comparison,
    head_plan: Mapping[str, Any] | None = None,
    *,
    cost_markdown: str = "",
    summary_markdown: str = "",
    limit: int = LIMIT,
) -> str:
    """The comment body. ``head_plan`` (the new plan JSON) draws the cluster picture; ``cost_markdown`` and
    ``summary_markdown`` are shown under their headings when given. Never longer than ``limit``."""
    stacks = f"`{c.new_stack}`" if c.old_stack == c.new_stack else f"`{c.old_stack}` → `{c.new_stack}`"
    n = c.counts()
    head = [f"## gpucluster plan diff: {stacks} ({c.project})", ""]
    head.append(f"**{counts_line(c)}** ({n['same']} unchanged)" if c.changed else "**No changes.**")
    head.append("")
    head += _warnings(c)
    teams = team_lines(c)
    if teams:
        head += ["### Teams", "", *(f"- {t}" for t in teams), ""]
    if c.images:
        head += ["### Image locks edited by hand", "", *(f"- ⚠️ {t}" for t in c.images), ""]
    if cost_markdown:
        head += ["### Cost", "", cost_markdown.rstrip("\n"), ""]
    if summary_markdown:
        head += ["### Summary", "", summary_markdown.rstrip("\n"), ""]
    picture = cluster_mermaid(head_plan) if head_plan else ""
    if picture:
        head += ["### Cluster after this change", "", picture, ""]
    top = "\n".join(head)
    body = _details(c)
    if not body:
        return top.rstrip("\n") + "\n"
    fence = _fence(body)
    opening = f"<details><summary>Details: {len(c.changes)} resource change(s), {len(c.files)} file(s)</summary>\n\n{fence}diff\n"
    closing = f"\n{fence}\n"
    end = "\n</details>\n"
    room = limit - len(top) - len(opening) - len(closing) - len(end) - 400  # 400: the note
    kept: list[str] = []
    used = 0
    for line in body:
        if used + len(line) + 1 > room:
            break
        kept.append(line)
        used += len(line) + 1
    note = ""
    if len(kept) < len(body):
        note = (
            f"\n**Cut:** the last {len(body) - len(kept):,} of {len(body):,} lines of these details, to stay under "
            f"GitHub's {limit:,}-character comment limit. `gpucluster plan diff OLD NEW` prints all of them.\n"
        )
    return top + "\n" + opening + "\n".join(kept) + closing + note + end
