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


def _money(v: float | None) -> str:
    return "unknown" if v is None else f"${v:,.2f}"


OFFLINE = "Offline: the stack program ran under Pulumi's mock engine; nothing was created, no credentials were used."
OFFLINE_SHORT = "offline, under Pulumi's mock engine: nothing was created, no credentials were used"


SCREENS = 110
"""Two screens of 55 lines: the most the default text plan may take (a test holds every shipped stack to it). 110 since
the monitoring part (issue #23) added its folded tree and estimate line to slurm-p5's 101."""


def render_text(plan: Plan, *, files: str = "list", full_tree: bool | None = None) -> str:
    """The text plan: the cluster summary first, then the tree, estimate, storage sizing, findings, stack
    outputs and rendered files. ``files`` is ``"list"`` (one line each), ``"full"`` or ``"none"``;
    ``full_tree`` None means the full tree where the plan then fits in :data:`SCREENS` lines (ignoring
    files in full), else the folded one."""
    if full_tree is None:
        full = _render(plan, files="list" if files == "full" else files, full_tree=True)
        fits = len(full.splitlines()) <= SCREENS
        return full if fits and files != "full" else _render(plan, files=files, full_tree=fits)
    return _render(plan, files=files, full_tree=full_tree)


def _render(plan: Plan, *, files: str, full_tree: bool) -> str:
    out: list[str] = [
        f"gpucluster plan — stack {plan.stack} (project {plan.project}, region {plan.region})",
    ]
    if plan.error:
        out += [OFFLINE, "", "The stack config is invalid; `pulumi up` would stop before creating anything:", plan.error, ""]
        return "\n".join(out) + "\n"
    rewrite = replacer(plan.placeholders)
    doc = to_json(plan)
    out += [rewrite(line) for line in text_lines(summarize(doc))]
    custom = [r for r in plan.resources if r.custom]
    components = [r for r in plan.resources if not r.custom]
    out += ["", f"Resources: {len(custom)} to create, in {len(components)} components ({OFFLINE_SHORT})"]
    out += tree_lines(plan, full=full_tree, rewrite=rewrite)
    out.append("")
    out += estimate_lines(plan_estimate(doc))
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
    out += output_lines(plan.outputs, rewrite)
    out.append("")
    if files != "none":
        out += file_lines(plan.files, full=files == "full")
    return "\n".join(out).rstrip("\n") + "\n"
