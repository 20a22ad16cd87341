#!/usr/bin/env python3
"""Benchmark: how long a scrape takes while a job floods the exporter (docs/monitoring.md, "Floods and squatters").

    python bench/serve_flood.py [--clients 400] [--seconds 20] [--delay 0.01] [--package-root DIR]

Starts the head node's exporter (``python -m gpucluster_agents.metrics serve``, no GPUs, Slurm's figures from a
``sinfo``/``squeue`` that each take ``--delay`` seconds, so a collect takes about 3 × delay plus three process
starts), floods it with ``--clients`` looping clients (``tests/agents/metrics/flood.py``, its own process), and
scrapes it every 0.25 s meanwhile. ``--package-root`` runs another checkout's package (e.g. an older tree exported
with ``git archive``) for a before/after figure on the same machine.

Prints the scrape latencies (median, 95th percentile, worst), the collects run, the exporter's peak thread count
and the flood's answered requests; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.agents.metrics.nodes import SINFO, SQUEUE  # noqa: E402


def fake_slurm(bin_dir: Path, delay: float) -> None:
    bin_dir.mkdir(parents=True)
    for name, text in (("sinfo", SINFO), ("squeue", SQUEUE)):
        (bin_dir / f"{name}.out").write_text(text)
        (bin_dir / name).write_text(
            f'#!/bin/sh\nsleep {delay}\necho {name} >> "{bin_dir}/calls"\nexec cat "{bin_dir}/{name}.out"\n'
        )
        (bin_dir / name).chmod(0o755)


def threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def run(clients: int, seconds: float, delay: float, package_root: Path) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        fake_slurm(t / "bin", delay)
        (t / "sys").mkdir()
        cmd = [sys.executable, "-m", "gpucluster_agents.metrics", "serve", "--listen", "127.0.0.1", "--port", "0"]
        cmd += ["--no-gpus", "--sysfs-root", str(t / "sys"), "--lustre-root", str(t / "sys"), "--slurm-bin-dir", str(t / "bin")]
        env = {**os.environ, "PYTHONPATH": str(package_root)}
        exporter = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=package_root)
        try:
            assert exporter.stdout is not None
            port = int(exporter.stdout.readline().rsplit(":", 1)[1].split("/")[0])
            flood_cmd = [sys.executable, "-m", "tests.agents.metrics.flood", "--port", str(port)]
            flood_cmd += ["--clients", str(clients), "--seconds", str(seconds)]
            flood = subprocess.Popen(
                flood_cmd, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO
            )
            time.sleep(1.0)
            took: list[float] = []
            failed, peak = 0, 0
            start = time.monotonic()
            while time.monotonic() - start < seconds - 2:
                t0 = time.monotonic()
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=15) as resp:
                        resp.read()
                    took.append(time.monotonic() - t0)
                except OSError:
                    failed += 1
                peak = max(peak, threads(exporter.pid))
                time.sleep(0.25)
            window = time.monotonic() - start
            calls = (t / "bin" / "calls").read_text().split() if (t / "bin" / "calls").exists() else []
            out, _ = flood.communicate(timeout=300)
        finally:
            exporter.kill()
            exporter.wait()
    took.sort()
    return {
        "clients": clients,
        "scrapes": len(took),
        "scrapes_failed": failed,
        "median_s": round(statistics.median(took), 3) if took else None,
        "p95_s": round(took[int(0.95 * (len(took) - 1))], 3) if took else None,
        "worst_s": round(took[-1], 3) if took else None,
        "collects": calls.count("squeue"),
        "window_s": round(window, 1),
        "peak_threads": peak,
        "flood": json.loads(out),
    }


def main() -> int:
    p = argparse.ArgumentParser(description="scrape latency while looping clients flood the exporter")
    p.add_argument("--clients", type=int, default=400)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--delay", type=float, default=0.01, help="seconds each sinfo/squeue takes")
    p.add_argument("--package-root", type=Path, default=REPO, help="the checkout whose gpucluster_agents runs")
    a = p.parse_args()
    r = run(a.clients, a.seconds, a.delay, a.package_root.resolve())
    print(json.dumps(r))
    print(
        f"{r['clients']} clients: scrape median {r['median_s']} s, p95 {r['p95_s']} s, worst {r['worst_s']} s "
        f"({r['scrapes_failed']} failed); {r['collects']} collects in {r['window_s']} s; {r['peak_threads']} threads"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
