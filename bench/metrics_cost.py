#!/usr/bin/env python3
"""Benchmark: what monitoring a p5.48xlarge node costs — series, samples, Amazon Managed Service for
Prometheus (AMP) dollars against the node's on-demand price — and the exporter's CPU time per scrape.

    python bench/metrics_cost.py [--interval 30] [--scrapes 50]

Series per node:
- gpucluster's exporter, counted from a real scrape of it fed a p5's fixtures: 8 fake H100s (NVML scenario
  ``faulty``: a throttling GPU, a pending row remap, an XID), 32 EFA devices with a p5's hw_counters, one
  Lustre client;
- the node exporter: Debian's ``prometheus-node-exporter`` started here on 127.0.0.1 and scraped once, with
  the flags the node's unit gives it (``metrics.cli.NODE_EXPORTER_FLAGS``: no softnet, guest CPU time or
  cpufreq); series labelled by CPU scaled to p5's 192 vCPUs, network devices to its 32 network cards (+ lo,
  + the primary), block devices to its 8 NVMe disks + the root volume (the catalog's figures), plus the CPU
  thermal throttle counters a container here lacks (one per core, 96, and per package, 2);
- scrape meta series the collector adds per target (up, scrape_duration_seconds, scrape_samples_scraped,
  scrape_samples_post_metric_relabeling, scrape_series_added): 5 per target, 2 targets.

Samples per month at ``--interval`` seconds (30 s: the config's default is aws23's `gpucluster:monitoring`;
30 s is what this bench assumes and says), AMP ingestion at its tiered price, storage at 2 bytes a sample
for AMP's 150-day default retention. Prices (us-east-1), https://aws.amazon.com/prometheus/pricing/:
ingestion $0.90 per 10 M samples for the first 2 B a month (the figure the page states); $0.35 and $0.16 per
10 M for the next 250 B and beyond (the page's tiers as recalled, not re-read here: verify before
budgeting); storage $0.03 per GB-month. The node's on-demand price is the catalog's (gpucluster/facts).

Prints the figures and ends with
``series per p5 node N, monitoring P % of on-demand, exporter C ms per scrape``; exit 1 when the monitoring
share is over 0.1 % or a scrape takes over 50 ms of CPU.
"""

from __future__ import annotations

import argparse
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpucluster.facts.prices import load_prices  # noqa: E402
from gpucluster.render.kubernetes.health import DCGM_METRICS  # noqa: E402
from gpucluster_agents.metrics.cli import NODE_EXPORTER_FLAGS, _parser, sources  # noqa: E402
from gpucluster_agents.metrics.server import Exporter  # noqa: E402
from tests.agents.metrics import nodes  # noqa: E402

P5_VCPUS, P5_NETWORK_CARDS, P5_NVME = 192, 32, 8
P5_THROTTLE_SERIES = 96 + 2  # node_cpu_core_throttles_total per core, node_cpu_package_throttles_total per socket
HOURS_PER_MONTH = 730
TIERS = ((2e9, 0.90), (250e9, 0.35), (float("inf"), 0.16))  # (samples in the tier, USD per 10 M)
STORAGE_USD_PER_GB_MONTH = 0.03
BYTES_PER_SAMPLE = 2
RETENTION_MONTHS = 150 / 30.4
META_SERIES_PER_TARGET = 5
LIMIT_SHARE, LIMIT_MS = 0.1, 50.0
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def series_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln and not ln.startswith("#")]


def exporter_figures(scrapes: int) -> tuple[int, float]:
    """(series of one scrape, CPU ms per scrape and render) on a p5's fixtures."""
    with tempfile.TemporaryDirectory() as tmp:
        args = nodes.exporter_args(Path(tmp), "faulty", efa=P5_NETWORK_CARDS)
        exporter = Exporter(sources(_parser().parse_args(["print", *args])))
        count = len(series_lines(exporter.collect().render()))  # the first scrape starts NVML
        start = time.process_time()
        for _ in range(scrapes):
            exporter.collect().render()
        return count, (time.process_time() - start) * 1000 / scrapes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def node_exporter_text() -> str | None:
    binary = shutil.which("prometheus-node-exporter")
    if binary is None:
        return None
    port = _free_port()
    argv = [binary, f"--web.listen-address=127.0.0.1:{port}", *NODE_EXPORTER_FLAGS]  # as the node's unit runs it
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                    return resp.read().decode()
            except OSError:
                time.sleep(0.1)
        return None
    finally:
        proc.terminate()
        proc.wait(10)


def scaled_node_exporter(text: str) -> tuple[int, int]:
    """(series seen here, series on a p5): per-CPU, per-network-device and per-disk series scaled."""
    lines = series_lines(text)
    cpus = {m for ln in lines for k, m in _LABEL.findall(ln) if k == "cpu"} or {"0"}
    nets = {m for ln in lines if ln.startswith("node_network_") for k, m in _LABEL.findall(ln) if k == "device"} or {"lo"}
    disks = {m for ln in lines if ln.startswith("node_disk_") for k, m in _LABEL.findall(ln) if k == "device"} or {"vda"}
    kinds: Counter[str] = Counter()
    for ln in lines:
        labels = dict(_LABEL.findall(ln))
        if "cpu" in labels:
            kinds["cpu"] += 1
        elif ln.startswith("node_network_") and "device" in labels:
            kinds["net"] += 1
        elif ln.startswith("node_disk_") and "device" in labels:
            kinds["disk"] += 1
        else:
            kinds["other"] += 1
    p5 = kinds["other"] + (0 if any(ln.startswith("node_cpu_core_throttles_total") for ln in lines) else P5_THROTTLE_SERIES)
    p5 += round(kinds["cpu"] / len(cpus) * P5_VCPUS)
    p5 += round(kinds["net"] / len(nets) * (P5_NETWORK_CARDS + 2))
    p5 += round(kinds["disk"] / len(disks) * (P5_NVME + 1))
    return len(lines), p5


def ingestion_usd(samples: float) -> float:
    usd, left = 0.0, samples
    for size, price in TIERS:
        take = min(left, size)
        usd += take / 10e6 * price
        left -= take
        if left <= 0:
            break
    return usd


def monthly_usd(samples_per_month: float) -> float:
    stored_gb = samples_per_month * RETENTION_MONTHS * BYTES_PER_SAMPLE / 2**30  # steady state: 150 days kept
    return ingestion_usd(samples_per_month) + stored_gb * STORAGE_USD_PER_GB_MONTH


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--interval", type=float, default=30.0, help="scrape interval, seconds (default 30)")
    p.add_argument("--scrapes", type=int, default=50)
    a = p.parse_args()
    ours, cpu_ms = exporter_figures(a.scrapes)
    text = node_exporter_text()
    if text is None:
        print("prometheus-node-exporter is not installed or did not answer: apt install prometheus-node-exporter")
        return 2
    here, node_exp = scaled_node_exporter(text)
    per_node = ours + node_exp + 2 * META_SERIES_PER_TARGET
    samples_node = per_node * (3600 / a.interval) * HOURS_PER_MONTH
    on_demand = load_prices().on_demand("p5.48xlarge")
    assert on_demand is not None, "p5.48xlarge has no on-demand price in the catalog"
    node_month = on_demand * HOURS_PER_MONTH
    one = monthly_usd(samples_node)
    nodes_1000 = 1000 // 8
    fleet = monthly_usd(samples_node * nodes_1000)
    share = one / node_month * 100
    print(f"gpucluster exporter: {ours} series (8 GPUs, {P5_NETWORK_CARDS} EFA devices, Lustre)")
    print(
        f"node exporter: {here} series here, {node_exp} on a p5 ({P5_VCPUS} vCPUs, {P5_NETWORK_CARDS} network cards, {P5_NVME} NVMe)"
    )
    print(f"dcgm-exporter on EKS instead of ours: {len(DCGM_METRICS) - 1} fields x 8 GPUs = {(len(DCGM_METRICS) - 1) * 8} series")
    print(f"per p5 node: {per_node} series, {samples_node / 1e6:.1f} M samples a month at {a.interval:g} s")
    print(
        f"per 1,000 GPUs ({nodes_1000} nodes): {per_node * nodes_1000} series, {samples_node * nodes_1000 / 1e9:.1f} B samples a month"
    )
    print(f"AMP, one node alone: ${one:.2f} a month; p5.48xlarge on-demand ${node_month:,.0f} a month -> {share:.3f} %")
    print(f"AMP, 1,000 GPUs: ${fleet:,.0f} a month -> {fleet / (node_month * nodes_1000) * 100:.3f} % of on-demand")
    print(f"exporter CPU: {cpu_ms:.1f} ms per scrape (mean of {a.scrapes}, 8 fake GPUs)")
    print(f"series per p5 node {per_node}, monitoring {share:.3f} % of on-demand, exporter {cpu_ms:.1f} ms per scrape")
    return 0 if share <= LIMIT_SHARE and cpu_ms <= LIMIT_MS else 1


if __name__ == "__main__":
    sys.exit(main())
