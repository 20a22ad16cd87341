#!/usr/bin/env python3
"""Benchmark: N consecutive ``gpucluster plan`` processes, counting any that exit dirty.

    python bench/plan_exit_noise.py [--runs 200] [--stack dev] [--jobs 2]

Each run is its own ``python -m gpucluster.tools.cli plan --stack S --no-files`` process, as a user or CI
would start it. A run is dirty when it exits non-zero, or writes anything to stderr (a traceback, or
asyncio's ``Exception ignored … Invalid file descriptor: -1`` at interpreter exit: what unclosed
worker-thread event loops used to print in about one plan in five to twenty-five).
Prints the counts and wall times; exit 1 if any run was dirty. Times are printed, never asserted.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def one(stack: str) -> tuple[int, str, float]:
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "gpucluster.tools.cli", "plan", "--stack", stack, "--no-files"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode, proc.stderr, time.monotonic() - start


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--stack", default="dev")
    p.add_argument("--jobs", type=int, default=2, help="plans run at once (default 2)")
    args = p.parse_args()
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda _: one(args.stack), range(args.runs)))
    wall = time.monotonic() - start
    kinds: Counter[str] = Counter()
    for rc, err, _ in results:
        if rc != 0:
            kinds[f"exit {rc}"] += 1
        if "Traceback" in err:
            kinds["traceback on stderr"] += 1
        if "Exception ignored" in err:
            kinds["'Exception ignored' on stderr"] += 1
        if err.strip():
            kinds["any stderr output"] += 1
    times = sorted(t for _, _, t in results)
    print(f"{args.runs} plans of stack {args.stack!r} ({args.jobs} at a time) in {wall:.1f} s")
    print(f"per plan: median {times[len(times) // 2]:.2f} s, max {times[-1]:.2f} s")
    dirty = sum(1 for rc, err, _ in results if rc != 0 or err.strip())
    print(f"dirty runs: {dirty}")
    for kind, n in sorted(kinds.items()):
        print(f"  {kind}: {n}")
    example = next((err for rc, err, _ in results if err.strip()), "")
    if example:
        print("first dirty stderr:\n" + example)
    return 1 if dirty else 0


if __name__ == "__main__":
    sys.exit(main())
