"""Show a :class:`~gpucluster.tools.plan.run.engine.Plan` as text: the cluster summary
(:mod:`~gpucluster.tools.plan.show.summary`), the tree (:mod:`~gpucluster.tools.plan.show.tree`), then the estimate,
storage sizing, findings, stack outputs and rendered files, with the mocks' ids shown as what they stand
for (:mod:`~gpucluster.tools.plan.run.placeholders`). JSON is :mod:`~gpucluster.tools.plan.run.json`, diffs
:mod:`~gpucluster.tools.plan.diff.text`."""

from __future__ import annotations

from gpucluster.tools.plan.run.engine import Plan
from gpucluster.tools.plan.run.json import to_json
from gpucluster.tools.plan.run.placeholders import replacer
from gpucluster.tools.plan.show.estimate import estimate_lines
from gpucluster.tools.plan.show.files import file_lines
from gpucluster.tools.plan.show.outputs import output_lines
from gpucluster.tools.plan.show.program_estimate import plan_estimate
from gpucluster.tools.plan.show.summary import summarize, text_lines
from gpucluster.tools.plan.show.tree import tree_lines
from gpucluster.tools.plan.show.width import shorten, wrap_all


def _money(v: float | None) -> str:
    return "unknown" if v is None else f"${v:,.2f}"


OFFLINE = "Offline: the stack program ran under Pulumi's mock engine; nothing was created, no credentials were used."
OFFLINE_SHORT = "offline, under Pulumi's mock engine: nothing created, no credentials used"


SCREENS = 110
"""Two screens of 55 lines: the most the default text plan may take (a test holds every shipped stack to it). 110 since
the monitoring part added its folded tree and estimate line to slurm-p5's 101."""


def render_text(
    plan: Plan, *, files: str = "list", full_tree: bool | None = None, width: int | None = None, detail: bool = False
) -> str:
    """The text plan: the cluster summary first, then the tree, estimate, storage sizing, findings, stack
    outputs and rendered files. ``files`` is ``"list"`` (one line each), ``"full"`` or ``"none"``;
    ``full_tree`` None means the full tree where the plan then fits in :data:`SCREENS` lines (ignoring
    files in full), else the folded one; at a width, nothing elided where that fits. With a ``width`` (the CLI's: the terminal's, or
    :data:`~gpucluster.tools.plan.show.width.DEFAULT_WIDTH`) no line is wider: long lists are elided
    (``… and N more``), the rest wrapped under its item; ``detail`` (the full tree, every IAM statement, nothing
    elided, only wrapped) has no line budget. Rendered files in full are never wrapped."""
    if detail:
        return _render(plan, files=files, full_tree=True, width=width, detail=True)
    if full_tree is None:
        # the first view that fits: at a width, nothing elided (full tree, then folded) before elided
        views = [(True, True), (False, True), (True, False)] if width is not None else [(True, False)]
        for tree, whole in views:
            text = _render(plan, files="list" if files == "full" else files, full_tree=tree, width=width, detail=whole)
            if len(text.splitlines()) <= SCREENS:
                return text if files != "full" else _render(plan, files=files, full_tree=tree, width=width, detail=whole)
        return _render(plan, files=files, full_tree=False, width=width)
    return _render(plan, files=files, full_tree=full_tree, width=width)


def _render(plan: Plan, *, files: str, full_tree: bool, width: int | None = None, detail: bool = False) -> str:
    out: list[str] = [
        f"gpucluster plan — stack {plan.stack} (project {plan.project}, region {plan.region})",
    ]
    if plan.error:
        out += [OFFLINE, "", "The stack config is invalid; `pulumi up` would stop before creating anything:", plan.error, ""]
        return "\n".join(out) + "\n"  # a config error's findings, one a line, as docs/stacks.md quotes them
    rewrite = replacer(plan.placeholders)
    doc = to_json(plan)
    out += [rewrite(line) for line in text_lines(summarize(doc))]
    custom = [r for r in plan.resources if r.custom]
    components = [r for r in plan.resources if not r.custom]
    out += ["", f"Resources: {len(custom)} to create, in {len(components)} components ({OFFLINE_SHORT})"]
    out += tree_lines(plan, full=full_tree, rewrite=rewrite, width=width, detail=detail)
    out.append("")
    out += estimate_lines(plan_estimate(doc), width=None if detail else width)
    sizing = plan.outputs.get("storageSizing")
    if sizing:
        monthly = sizing.get("usdPerMonth")
        cost = f"{_money(monthly)}/month list (≈ {_money(monthly / 730)}/h)" if monthly is not None else "unknown"
        out += ["Storage sizing", *sizing["lines"], f"  cost        FSx for Lustre {cost}", ""]
    findings = plan.findings
    shown = [f"{f['level']:<7} {f['path']}: {f['message']}" + (f" Fix: {f['fix']}" if f.get("fix") else "") for f in findings]
    if len(shown) == 1:  # one finding on the heading's line: the plan of a shipped stack stays within two screens
        out.append(f"Findings: {shown[0]}")
    else:
        out.append("Findings" if shown else "Findings: none")
        out += [f"  {line}" for line in shown]
    out.append("")
    out += output_lines(plan.outputs, rewrite, width=None if detail else width)
    out.append("")
    if width is not None:
        out = wrap_all(out, width)
    if files != "none":
        listed = file_lines(plan.files, full=files == "full")
        if width is not None and files != "full":
            listed = wrap_all(listed, width) if detail else [shorten(line, width) for line in listed]
        out += listed
    return "\n".join(out).rstrip("\n") + "\n"
