#!/usr/bin/env python3
"""Benchmark: what a container adds to a job step's start — ``srun --container-image=<squashfs> true`` against a bare
``srun true`` on the same real slurmd, in one run.

    python bench/container_start.py [--runs 10] [--slurm 22.05|24.11]

The node is the container tests' (``tests/e2e/containers.py: container_node``): slurmctld and slurmd 22.05 of this
machine (or 24.11 of the trixie root), pyxis and enroot built from the pinned releases, the files gpucluster renders for a node with NVMe scratch
(the container prolog and epilog included), a busybox squashfs on the node's disk, steps run by an unprivileged
user. Each step is its own job (``srun`` allocates), so both figures include the allocation, the prolog and the
epilog; the difference is pyxis and enroot: the squashfs mounted through squashfuse and fuse-overlayfs, the hooks
(the mount check, PMI, PyTorch), the namespace entered, and the container removed.

slurmd runs under a child subreaper (``tests/e2e/slurm_harness.py: SUBREAPER``), as under a node's systemd: this
machine's PID 1 reaps orphans late, which added 3 s to every container step (slurmstepd waiting out a zombie).

Prints the medians and ends with ``container start overhead S s (ratio R x bare srun)``; exit 1 when the overhead is
over 1 s. Needs root (the node's mount namespace) and the container tests' packages (.ci/run).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.containers import ContainerNode, container_node
from tests.render.slurm_versions import TRIXIE_ROOT, TRIXIE_VERSION

AIM_S = 1.0


def timed(node: ContainerNode, *args: str) -> float:
    start = time.monotonic()
    proc = node.srun(*args)
    took = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"srun {' '.join(args)} failed: {proc.stderr}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description="srun --container-image against a bare srun on one real slurmd")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--slurm", choices=("22.05", TRIXIE_VERSION), default="22.05")
    args = parser.parse_args()
    runs = args.runs
    print(f"Slurm {args.slurm}")
    with container_node(None if args.slurm == "22.05" else TRIXIE_ROOT) as node:
        image = f"--container-image={node.image}"
        timed(node, "true")  # warm: the first step of a slurmd loads its plugins
        timed(node, image, "true")
        bare, contained = [], []
        for _ in range(runs):  # interleaved, so a slow moment of the machine weighs on both
            bare.append(timed(node, "true"))
            contained.append(timed(node, image, "true"))
    b, c = statistics.median(bare), statistics.median(contained)
    print(f"bare srun true: median {b:.3f} s over {runs} (min {min(bare):.3f}, max {max(bare):.3f})")
    print(f"srun --container-image true: median {c:.3f} s over {runs} (min {min(contained):.3f}, max {max(contained):.3f})")
    print(f"container start overhead {c - b:.3f} s (ratio {c / b:.2f} x bare srun)")
    return 0 if c - b <= AIM_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
