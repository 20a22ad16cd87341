"""One review of a change, as ``gpucluster plan diff`` prints it and the pull-request preview comments it: the
classified comparison (:mod:`~gpucluster.tools.plan.diff.changes`), the cost and power delta
(:mod:`~gpucluster.tools.plan.diff.cost`) and the head plan's summary, rendered as text, markdown or JSON, and
the exit status the flags ask for."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpucluster.tools.plan.diff import cost as costdiff
from gpucluster.tools.plan.diff.changes import compare
from gpucluster.tools.plan.diff.markdown import LIMIT
from gpucluster.tools.plan.diff.step import Comparison

EXIT_OK, EXIT_CHANGES, EXIT_DATA_LOSS = 0, 2, 3
FORMATS = ("text", "markdown", "json")


@dataclass(frozen=True)
class Review:
    comparison: Comparison
    cost: costdiff.CostDelta
    new_plan: Mapping[str, Any]


def review(old: Mapping[str, Any], new: Mapping[str, Any]) -> Review:
    return Review(compare(old, new), costdiff.compare(dict(old), dict(new)), new)


def _summary(plan: Mapping[str, Any]) -> tuple[list[str], str]:
    """The head plan's summary (:mod:`~gpucluster.tools.plan.show.summary`) as text lines and markdown."""
    from gpucluster.tools.plan.show.summary import markdown, summarize, text_lines

    s = summarize(dict(plan))
    return list(text_lines(s)), markdown(s)


def render(r: Review, fmt: str = "text", *, limit: int = LIMIT) -> str:
    """The review in ``fmt`` (text, markdown or json); markdown never exceeds ``limit`` characters."""
    if fmt == "json":
        import json

        from gpucluster.tools.plan.diff.json import to_json

        return json.dumps(to_json(r.comparison, cost=costdiff.to_json(r.cost)), indent=2, sort_keys=True) + "\n"
    summary_lines, summary_md = _summary(r.new_plan) if r.comparison.changed else ([], "")
    if fmt == "markdown":
        from gpucluster.tools.plan.diff.markdown import render as markdown

        return markdown(
            r.comparison, r.new_plan, cost_markdown=costdiff.markdown(r.cost), summary_markdown=summary_md, limit=limit
        )
    from gpucluster.tools.plan.diff.text import render as text

    return text(r.comparison, cost_lines=costdiff.text_lines(r.cost), summary_lines=summary_lines)


def exit_status(c: Comparison, *, exit_code: bool, allow_data_loss: bool, expect_no_changes: bool) -> tuple[int, str | None]:
    """(status, message for stderr). 0 without flags; ``expect_no_changes``: 2 on any change; ``exit_code``: 0 no
    change, 2 changes, 3 data loss (2 with ``allow_data_loss``)."""
    from gpucluster.tools.plan.diff.text import counts_line

    if not c.changed:
        return EXIT_OK, None
    what = counts_line(c) + (f", {len(c.files)} file(s) changed" if c.files else "")
    if expect_no_changes:
        return EXIT_CHANGES, f"--expect-no-changes, but the plans differ: {what}"
    if not exit_code:
        return EXIT_OK, None
    if c.data_loss and not allow_data_loss:
        names = ", ".join(s.name for s in c.data_loss)
        return EXIT_DATA_LOSS, f"this change loses data ({names}); exit 3. Pass --allow-data-loss if that is intended."
    return EXIT_CHANGES, None
