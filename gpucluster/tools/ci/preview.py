"""Plan the base and the head of a pull request and write the one comment a reviewer reads.

``gpucluster preview --base DIR --head DIR --out DIR`` (what ``.github/workflows/preview.yml`` runs):

1. :mod:`~gpucluster.tools.ci.scope` decides which stacks the change can affect;
2. each stack is planned on both sides, offline. When only stack files changed, both sides run the same code: the
   head's plans run in this process while a second process of the same installation plans the base
   (:mod:`~gpucluster.tools.ci.planmany`), each paying Pulumi's imports once, on two cores at once. When code
   changed, the base is planned by the base's own installation (``--base-gpucluster``), since the head's code
   would misstate what the base creates;
3. each pair is compared (:func:`compare`) and the markdown of every stack is joined under one marker, so the
   workflow edits its own comment instead of adding one per push, and kept under GitHub's comment limit.

Exit status: 0 when the preview ran (changes or not), 3 when a change loses data and ``--allow-data-loss`` was
not given (the workflow passes it when the pull request carries the ``allow-data-loss`` label), 1 when the
head's config is invalid or a plan could not run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster.tools.ci.scope import Scope, scope

MARKER = "<!-- gpucluster-preview -->"
COMMENT_LIMIT = 65_536
"""GitHub refuses an issue comment body over 65,536 characters."""
EXIT_OK, EXIT_FAILED, EXIT_DATA_LOSS = 0, 1, 3


@dataclass
class StackResult:
    stack: str
    changed: bool
    data_loss: bool
    counts: dict[str, int]
    markdown: str
    monthly_delta: float | None = None
    error: str | None = None


@dataclass
class Preview:
    scope: Scope
    results: list[StackResult] = field(default_factory=list)

    @property
    def data_loss(self) -> list[str]:
        return [r.stack for r in self.results if r.data_loss]

    @property
    def failed(self) -> list[str]:
        return [r.stack for r in self.results if r.error]


def empty_plan(stack: str) -> dict[str, Any]:
    """The plan of a stack that does not exist on one side: nothing, so every resource is a create or a delete."""
    return {"project": None, "stack": stack, "region": None, "ok": True, "error": None, "resources": [], "outputs": {},
            "findings": [], "files": {}}  # fmt: skip


def _plan_here(stack: str, checkout: Path) -> dict[str, Any]:
    from gpucluster.tools.plan.run.engine import run_plan
    from gpucluster.tools.plan.run.json import to_json

    return json.loads(json.dumps(to_json(run_plan(stack, checkout)), sort_keys=True, default=str))


def _plan_with(gpucluster: str, stack: str, checkout: Path, out: Path) -> dict[str, Any]:
    """Plan with another installation (the base's own code), through its CLI."""
    target = out / f"{stack}.json"
    proc = subprocess.run(
        [gpucluster, "plan", "--project-dir", str(checkout), "--stack", stack, "--json", str(target)],
        capture_output=True,
        text=True,
    )
    if not target.is_file():
        raise RuntimeError(f"{gpucluster} plan --stack {stack} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return json.loads(target.read_text())


def plans(sc: Scope, base: Path, head: Path, out: Path, base_gpucluster: str | None) -> dict[str, tuple[dict, dict]]:
    """``{stack: (base plan, head plan)}`` for every stack in scope, saved under ``out/base`` and ``out/head``."""
    if sc.code_changed and not base_gpucluster:
        raise ValueError(
            "the change touches code the stack program reads, so the base must be planned with the base's own code: "
            "install it into its own virtual environment (cd BASE && python -m venv ../.venv-base && "
            "../.venv-base/bin/pip install -r requirements.txt) and pass --base-gpucluster ../.venv-base/bin/gpucluster"
        )
    for side in ("base", "head"):
        (out / side).mkdir(parents=True, exist_ok=True)
    exists = {
        side: {s for s in sc.stacks if (checkout / "stacks" / f"Pulumi.{s}.yaml").is_file()}
        for side, checkout in (("base", base), ("head", head))
    }
    # Same code on both sides: the base is planned by a second process of this installation meanwhile.
    child = None
    if not sc.code_changed and exists["base"]:
        child = subprocess.Popen(
            [sys.executable, "-m", "gpucluster.tools.ci.planmany", str(base), str(out / "base"), *sorted(exists["base"])],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    head_docs = {s: _plan_here(s, head) for s in sorted(exists["head"])}
    if child is not None:
        _, err = child.communicate()
        if child.returncode != 0:
            raise RuntimeError(f"planning the base failed ({child.returncode}): {err.strip()[-2000:]}")
    result: dict[str, tuple[dict, dict]] = {}
    for stack in sc.stacks:
        sides: list[dict[str, Any]] = []
        for side, checkout in (("base", base), ("head", head)):
            if stack not in exists[side]:
                doc = empty_plan(stack)
            elif side == "head":
                doc = head_docs[stack]
            elif sc.code_changed and base_gpucluster:  # (checked above: code changed means a base installation)
                doc = _plan_with(base_gpucluster, stack, checkout, out / side)
            else:
                doc = json.loads((out / "base" / f"{stack}.json").read_text())
            (out / side / f"{stack}.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
            sides.append(doc)
        result[stack] = (sides[0], sides[1])
    return result


Compare = Callable[[str, dict[str, Any], dict[str, Any]], StackResult]


def compare(stack: str, old: dict[str, Any], new: dict[str, Any]) -> StackResult:
    """One stack's change as the PR comment shows it: the review's markdown (replacements, data loss, cost,
    summary, details), its counts and whether it loses data."""
    from gpucluster.tools.plan.diff.review import render, review

    if new.get("error"):
        md = f"The head's config of `{stack}` is invalid; `pulumi up` would stop before creating anything:\n\n```\n{new['error']}\n```\n"
        return StackResult(stack, True, False, {}, md, error=str(new["error"]))
    r = review(old, new)
    c = r.comparison
    counts = {op: n for op, n in c.counts().items() if op != "same"}
    md = render(r, "markdown", limit=COMMENT_LIMIT - 2_000)
    # The section heading names the stack: drop the review's own title line.
    md = md.split("\n", 2)[2] if md.startswith("## ") else md
    return StackResult(stack, c.changed, bool(c.data_loss), counts, md, monthly_delta=r.cost.total.delta("usdPerMonth"))


def _header(p: Preview, base_ref: str, head_ref: str, allow_data_loss: bool) -> list[str]:
    n = len(p.results)
    lines = [MARKER, "## gpucluster preview", ""]
    refs = f"`{base_ref}` → `{head_ref}`: " if base_ref and head_ref else ""
    if not n:
        return [*lines, f"{refs}no stack is affected by this change (only files no plan reads changed).", ""]
    changed = [r for r in p.results if r.changed]
    lines.append(
        f"{refs}{n} stack{'s' * (n != 1)} planned offline under Pulumi's mock engine (no credentials; nothing was "
        f"created); {len(changed)} with changes."
    )
    lines.append("")
    if p.data_loss:
        verdict = (
            "allowed by the `allow-data-loss` label"
            if allow_data_loss
            else "this check fails until the pull request carries the `allow-data-loss` label"
        )
        lines += ["> [!CAUTION]", f"> **Data loss** in {', '.join(f'`{s}`' for s in p.data_loss)}: {verdict}.", ""]
    if p.failed:
        lines += ["> [!WARNING]", f"> The head's config is invalid for {', '.join(f'`{s}`' for s in p.failed)}.", ""]
    return lines


def render_comment(p: Preview, *, base_ref: str = "", head_ref: str = "", allow_data_loss: bool = False,
                   limit: int = COMMENT_LIMIT) -> str:  # fmt: skip
    """The sticky comment: the header (data loss first), then one section per stack; stacks that do not fit
    under ``limit`` are cut with a note pointing at the job summary, which carries the whole preview."""
    head = "\n".join(_header(p, base_ref, head_ref, allow_data_loss)) + "\n"
    sections = [f"### `{r.stack}`\n\n{r.markdown.rstrip()}\n\n" for r in p.results]
    note = "\n> [!NOTE]\n> Cut to fit GitHub's comment limit: {n} more stack section(s) are in the job summary of this run.\n"
    body, kept = head, 0
    for s in sections:
        room = limit - len(body) - len(note) - 8
        if len(s) > room:
            break
        body += s
        kept += 1
    if kept < len(sections):
        cut = sections[kept]
        room = limit - len(body) - len(note) - 200
        if room > 500:  # part of the next section rather than nothing of it
            body += cut[:room].rsplit("\n", 1)[0] + "\n\n…\n"
        body += note.format(n=len(sections) - kept)
    return body


def run(base: Path, head: Path, out: Path, *, base_gpucluster: str | None = None, allow_data_loss: bool = False,
        base_ref: str = "", head_ref: str = "", compare_fn: Compare = compare) -> tuple[int, Preview]:  # fmt: skip
    """The whole preview: scope, plans, comparisons; writes ``comment.md``, ``summary.md`` (uncut) and
    ``preview.json`` under ``out`` and returns the exit status with what it found."""
    sc = scope(base, head)
    out.mkdir(parents=True, exist_ok=True)
    p = Preview(sc)
    for stack, (old, new) in plans(sc, base, head, out, base_gpucluster).items():
        p.results.append(compare_fn(stack, old, new))
    comment = render_comment(p, base_ref=base_ref, head_ref=head_ref, allow_data_loss=allow_data_loss)
    (out / "comment.md").write_text(comment)
    (out / "summary.md").write_text(render_comment(p, base_ref=base_ref, head_ref=head_ref,
                                                   allow_data_loss=allow_data_loss, limit=1 << 20))  # fmt: skip
    status = EXIT_FAILED if p.failed else EXIT_DATA_LOSS if p.data_loss and not allow_data_loss else EXIT_OK
    (out / "preview.json").write_text(
        json.dumps(
            {
                "codeChanged": sc.code_changed,
                "stacks": [
                    {"stack": r.stack, "changed": r.changed, "dataLoss": r.data_loss, "counts": r.counts, "error": r.error}
                    for r in p.results
                ],
                "exit": status,
            },
            indent=2,
        )
        + "\n"
    )
    return status, p
