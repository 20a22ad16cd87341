#!/usr/bin/env python3
"""Benchmark: the whole offline preview of a pull request, as the workflow runs it after its installs.

    python bench/preview_pr.py [--stacks slurm-p5 eks-p5] [--repeat 3]

Builds a base and a head checkout (this checkout's program and stacks; the head raises every stack's first
node group's maxSize by 8, a stack-only change, so both sides share one process as the workflow does), then
times, per stack, plan base, plan head and compare+markdown inside one process, and the whole
``gpucluster preview`` command from its start (imports included) to its exit; it plans the head in its own
process and the base in a second one at once (both cores). Prints the figures; the
issue's target is ≤ 10 s for slurm-p5 and eks-p5 together on a 2-core machine. Times are printed, never
asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _checkout(where: Path, stacks: list[str], grow: bool) -> Path:
    where.mkdir(parents=True)
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy2(REPO / name, where / name)
    (where / "stacks").mkdir()
    for stack in stacks:
        src = REPO / "stacks" / f"Pulumi.{stack}.yaml"
        text = src.read_text()
        if grow:
            doc = yaml.safe_load(text)
            group = doc["config"]["gpucluster:nodeGroups"][0]
            old = group["maxSize"]
            text = text.replace(f"maxSize: {old}\n", f"maxSize: {old + 8}\n", 1)
            cap = group.get("capacity") or {}
            if cap.get("instanceCount") == old:
                text = text.replace(f"instanceCount: {old}\n", f"instanceCount: {old + 8}\n", 1)
        (where / "stacks" / src.name).write_text(text)
    return where


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stacks", nargs="+", default=["slurm-p5", "eks-p5"])
    ap.add_argument("--repeat", type=int, default=1, help="runs of the whole command (the best is printed too)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpucluster-bench-") as tmp:
        base = _checkout(Path(tmp) / "base", args.stacks, grow=False)
        head = _checkout(Path(tmp) / "head", args.stacks, grow=True)

        t0 = time.perf_counter()
        from gpucluster.tools.ci.preview import Preview, compare, empty_plan, render_comment  # noqa: F401
        from gpucluster.tools.ci.scope import scope
        from gpucluster.tools.plan.run.engine import run_plan  # noqa: F401  (imports Pulumi and the providers)

        t_import = time.perf_counter() - t0
        from gpucluster.tools.ci.preview import _plan_here

        print(f"imports (pulumi, pulumi-aws, pulumi-kubernetes, gpucluster): {t_import:6.2f} s")
        sc = scope(base, head)
        p = Preview(sc)
        for stack in args.stacks:
            t = time.perf_counter()
            old = _plan_here(stack, base)
            t_base = time.perf_counter() - t
            t = time.perf_counter()
            new = _plan_here(stack, head)
            t_head = time.perf_counter() - t
            t = time.perf_counter()
            p.results.append(compare(stack, old, new))
            comment = render_comment(p)
            t_diff = time.perf_counter() - t
            print(
                f"{stack:<10} plan base {t_base:5.2f} s   plan head {t_head:5.2f} s   compare + markdown {t_diff:5.2f} s"
                f"   ({len(old['resources'])} resources, comment {len(comment):,} chars)"
            )
        print(f"in one process, all of it: {time.perf_counter() - t0:6.2f} s")

        exe = Path(sys.executable).parent / "gpucluster"
        walls = []
        for n in range(args.repeat):
            out = Path(tmp) / f"out{n}"
            t = time.perf_counter()
            r = subprocess.run(
                [str(exe), "preview", "--base", str(base), "--head", str(head), "--out", str(out)],
                capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}, check=False,
            )  # fmt: skip
            walls.append(time.perf_counter() - t)
            if r.returncode not in (0, 3):
                print(r.stderr, file=sys.stderr)
                return 1
        print(
            f"`gpucluster preview` for {', '.join(args.stacks)} (plan head here and base in a second process at once, diff, markdown): "
            f"{walls[-1]:.2f} s" + (f" (best of {len(walls)}: {min(walls):.2f} s)" if len(walls) > 1 else "")
        )
        print(f"cores: {os.cpu_count()}, load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
