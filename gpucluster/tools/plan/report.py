"""Show a :class:`~gpucluster.tools.plan.engine.Plan` as text: a tree grouped by component with each
resource described (:mod:`gpucluster.tools.plan.describe`), then the estimate, storage sizing, findings and
rendered files. JSON is :mod:`~gpucluster.tools.plan.jsonplan`, diffs :mod:`~gpucluster.tools.plan.diff`."""

from __future__ import annotations

from gpucluster.tools.plan.describe import DESCRIBERS
from gpucluster.tools.plan.engine import Plan
from gpucluster.tools.plan.estimate_text import estimate_lines
from gpucluster.tools.plan.monitor import Registration


def _short(token: str) -> str:
    """``aws:ec2/launchTemplate:LaunchTemplate`` → ``aws:ec2:LaunchTemplate``."""
    parts = token.split(":")
    if len(parts) == 3 and "/" in parts[1]:
        return f"{parts[0]}:{parts[1].split('/')[0]}:{parts[2]}"
    return token


def _money(v: float | None) -> str:
    return "unknown" if v is None else f"${v:,.2f}"


def render_text(plan: Plan, *, show_files: bool = True) -> str:
    out: list[str] = [
        f"gpucluster plan — stack {plan.stack} (project {plan.project}, region {plan.region})",
        "Offline: the stack program ran under Pulumi's mock engine; nothing was created, no credentials were used.",
        "",
    ]
    if plan.error:
        out += ["The stack config is invalid; `pulumi up` would stop before creating anything:", plan.error, ""]
        return "\n".join(out) + "\n"
    custom = [r for r in plan.resources if r.custom]
    components = [r for r in plan.resources if not r.custom]
    out.append(f"Resources: {len(custom)} to create, in {len(components)} components")
    roots = [r for r in sorted_resources(plan) if r.parent is None or r.parent not in {x.urn for x in plan.resources}]
    for root in roots:
        _tree(plan, root, "", out, last=True, is_root=True)
    out.append("")
    out += estimate_lines(plan.outputs.get("estimate") or {})
    sizing = plan.outputs.get("storageSizing")
    if sizing:
        monthly = sizing.get("usdPerMonth")
        cost = f"{_money(monthly)}/month list (≈ {_money(monthly / 730)}/h)" if monthly is not None else "unknown"
        out += ["Storage sizing", *sizing["lines"], f"  cost        FSx for Lustre {cost}", ""]
    findings = plan.findings
    out.append("Findings" if findings else "Findings: none")
    for f in findings:
        out.append(f"  {f['level']:<7} {f['path']}: {f['message']}" + (f" Fix: {f['fix']}" if f.get("fix") else ""))
    out.append("")
    if show_files and plan.files:
        out.append("Rendered files")
        for path in sorted(plan.files):
            out += [f"--- {path}", plan.files[path].rstrip("\n"), ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _tree(plan: Plan, r: Registration, prefix: str, out: list[str], *, last: bool, is_root: bool = False) -> None:
    marks = []
    if r.protect:
        marks.append("protected")
    if r.retain_on_delete:
        marks.append("retained on delete")
    mark = f"  [{', '.join(marks)}]" if marks else ""
    label = f"{r.type.split(':')[-1]} {r.name}" if not r.custom else f"{_short(r.type)}  {r.name}"
    branch = "" if is_root else ("└─ " if last else "├─ ")
    out.append(f"{prefix}{branch}{label}{mark}")
    child_prefix = prefix if is_root else prefix + ("   " if last else "│  ")
    describer = DESCRIBERS.get(r.type)
    if describer and r.custom:
        for line in describer(r.inputs):
            out.append(f"{child_prefix}      {line}")
    kids = [c for c in sorted_resources(plan) if c.parent == r.urn]
    for n, kid in enumerate(kids):
        _tree(plan, kid, child_prefix, out, last=n == len(kids) - 1)


def sorted_resources(plan: Plan) -> list[Registration]:
    """Components first, then by type and name: stable whatever order the runtime registered them in."""
    return sorted(plan.resources, key=lambda r: (r.custom, r.type, r.name))
