#!/usr/bin/env python3
"""Benchmark: resume 1024 nodes across 2 node groups with the real agent against a local moto server.

    python bench/resume_scale.py [--nodes 512 512] [--no-suspend]

Starts moto_server (from the active venv), an HTTP proxy in front of it that counts EC2 and S3 calls
by action (and answers DescribeInstanceTopology, which moto lacks), and a stub scontrol that records
its calls. The agent publishes node maps to a bucket in moto (``node_map``: one PutObject per
CreateFleet batch, no CreateTags during the resume). Runs ``python -m gpucluster_agents resume
<hostlist>`` as its own process, as slurmctld would, then the same resume again (must launch
nothing), then ``maintain`` (tags the instances, off the resume path), then ``suspend`` for the
same nodes, and prints the calls made by type, the agent's own time and the time it waited on AWS
(botocore calls, measured inside the agent: ``gpucluster_agents.power.apitime``) and the time moto took
to answer.

Checks of the first resume (exit 1 if broken): at most ceil(nodes/500) CreateFleet calls per group;
no per-node call: every action at most PER_BATCH calls per CreateFleet batch plus FIXED; the agent's
own time (its total less the time it waited on moto) at most OWN_LIMIT seconds for 1,024 nodes (the
limit scales with the node count for other sizes); one instance per node.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "agents"))
sys.path.insert(0, str(REPO))

import boto3  # noqa: E402
from ec2_fault_proxy import FaultProxy  # noqa: E402
from moto_env import AWS_ENV, MotoServer, agent_env, make_world, node_instances  # noqa: E402

from gpucluster_agents.contract import hostlist  # noqa: E402

CLUSTER = "bench"
# the agent's last log line: "end resume in 1.234s: own 0.321s, waiting on EC2 0.913s (5 calls)"
AGENT_TIMES = re.compile(r" in ([0-9.]+)s: own (-?[0-9.]+)s, waiting on EC2 ([0-9.]+)s \((\d+) calls\)")
SCONTROL_TIME = re.compile(r"scontrol: (\d+) calls, ([0-9.]+)s")
OWN_LIMIT = 5.0  # the agent's own time for 1,024 nodes, moto's excluded
# Calls of one action a resume may make per CreateFleet batch (<= 500 nodes), plus a fixed few: the
# most per batch is DescribeInstanceTopology (100 instance ids a call, the API's limit: 5 per 500).
PER_BATCH = 6
FIXED = 2
BUCKET = "bench-artifacts"
TYPES = {"p5": "p5.48xlarge", "g6e": "g6e.48xlarge", "p4d": "p4d.24xlarge", "trn1": "trn1.32xlarge"}


def stub_scontrol(directory: Path, nodes: list[str]) -> tuple[Path, Path]:
    """The tests' fake scontrol: records every call, keeps node states (all start POWERING_UP)."""
    state = directory / "slurm-state.json"
    state.write_text(json.dumps({"nodes": {n: {"state": "IDLE+CLOUD+POWERING_UP", "reason": None, "addr": None} for n in nodes}}))
    bin_dir = directory / "bin"
    bin_dir.mkdir()
    script = bin_dir / "scontrol"
    script.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -S "{REPO / "tests" / "agents" / "fake_scontrol.py"}" "{state}" "$@"\n'
    )
    script.chmod(0o755)
    return bin_dir, Path(str(state) + ".calls")


def scontrol_calls(calls_path: Path, start: int) -> Counter[str]:
    lines = calls_path.read_text().splitlines()[start:] if calls_path.exists() else []
    out: Counter[str] = Counter()
    for line in lines:
        args = json.loads(line)
        if args[:1] == ["update"]:
            kind = "update nodeaddr" if any(a.startswith("nodeaddr=") for a in args) else "update state"
        else:
            kind = " ".join(a for a in args if not a.startswith("-"))[:24].split(" p")[0]
            kind = " ".join(kind.split()[:2])
        out[kind] += 1
    return out


def run(
    command: str, expr: str, config: Path, proxy: FaultProxy, calls_path: Path, profile: str | None = None
) -> tuple[float, Counter[str], Counter[str], Counter[str], int]:
    proxy.clear()
    before = len(calls_path.read_text().splitlines()) if calls_path.exists() else 0
    env = agent_env({"GPUCLUSTER_AGENT_CONFIG": str(config), "PYTHONPATH": str(REPO)})
    t = time.monotonic()
    rc = subprocess.run(
        [sys.executable, *(["-m", "cProfile", "-o", profile] if profile else []), "-m", "gpucluster_agents", command, expr],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        check=False,
    ).returncode
    return time.monotonic() - t, proxy.actions(), proxy.seconds(), scontrol_calls(calls_path, before), rc


def report(
    title: str, wall: float, api: Counter[str], secs: Counter[str], sc: Counter[str], agent_log: Path, command: str
) -> float | None:
    """Print one call's figures; returns the agent's own time (None if its log has no end line)."""
    lines = agent_log.read_text().splitlines()
    ends = [line for line in lines if f" {command} INFO end {command} in " in line]
    m = AGENT_TIMES.search(ends[-1]) if ends else None
    sc_times = [SCONTROL_TIME.search(line) for line in lines if f" {command} INFO scontrol: " in line]
    print(f"\n== {title}")
    print(f"wall time (process start to exit, interpreter start included): {wall:.2f} s")
    if m:
        total, own, waited, calls = float(m[1]), float(m[2]), float(m[3]), int(m[4])
        print(f"agent call: {total:.2f} s = own {own:.2f} s + waiting on AWS {waited:.2f} s ({calls} botocore calls)")
        last = sc_times[-1] if sc_times else None
        if last:
            print(
                f"  of the own time, waiting on the stub scontrol (a Python script here): {float(last[2]):.2f} s ({last[1]} calls)"
            )
    print("AWS API calls (HTTP requests, retries included) and the time moto took to answer them (summed):")
    for action, n in sorted(api.items()):
        print(f"  {action:28s} {n:6d}   {secs[action]:7.2f} s")
    print(f"  {'total':28s} {sum(api.values()):6d}   {sum(secs.values()):7.2f} s")
    print("scontrol calls:")
    for kind, n in sorted(sc.items()):
        print(f"  {kind:28s} {n:6d}")
    return float(m[2]) if m else None


def write_config(tmp: Path, url: str, world, groups: list[str], sizes: list[int], concurrency: int, bin_dir: Path) -> Path:
    """The agent's config for the benchmark's groups, every AWS call through the fault proxy at ``url``."""
    config = tmp / "agent.json"
    config.write_text(
        json.dumps(
            {
                "cluster_name": CLUSTER,
                "region": "us-east-1",
                "endpoint_url": url,
                "log_file": str(tmp / "agent.log"),
                "state_dir": str(tmp / "state"),
                "slurm_bin_dir": str(bin_dir),
                "topology_conf": str(tmp / "topology.conf"),
                "api_concurrency": concurrency,
                "node_map": {"bucket": BUCKET, "endpoint_url": url},
                "node_groups": [
                    {
                        "name": g,
                        "max_nodes": n,
                        "instance_type": TYPES[g],
                        "launch_template_id": world.launch_templates[g],
                        "subnet_ids": [world.subnet_ids[0]],
                        "efa_enabled": True,
                    }
                    for g, n in zip(groups, sizes, strict=True)
                ],
            }
        )
    )
    return config


def check_resume(own: float | None, api: Counter, fleets: list, groups: list[str], sizes: list[int], nodes: int) -> bool:
    """The first resume's figures against their limits: the agent's own time, calls per action, CreateFleet per group."""
    ok = True
    own_limit = OWN_LIMIT * nodes / 1024
    own_ok = own is not None and own <= own_limit
    ok = ok and own_ok
    print(
        f"\nagent's own time: {own if own is not None else float('nan'):.2f} s, limit {own_limit:.2f} s: {'OK' if own_ok else 'OVER'}"
    )
    batches = len(fleets)
    limit = PER_BATCH * batches + FIXED
    print(f"calls per action (limit {PER_BATCH} per CreateFleet batch + {FIXED} = {limit} for {batches} batches):")
    for action, n in sorted(api.items()):
        good = n <= limit
        ok = ok and good
        print(f"  {action:28s} {n:6d} {'OK' if good else 'PER-NODE?'}")
    per_group = Counter(r["TagSpecification.1.Tag.2.Value"] for r in fleets)
    print("\nCreateFleet per group (limit: one call per 500 nodes per group):")
    for g, n in zip(groups, sizes, strict=True):
        limit = math.ceil(n / 500)
        good = per_group[g] <= limit
        ok = ok and good
        print(f"  {g:6s} nodes={n:5d} CreateFleet={per_group[g]} limit={limit} {'OK' if good else 'TOO MANY'}")
    print(f"  batch sizes: {[int(r['TargetCapacitySpecification.TotalTargetCapacity']) for r in fleets]}")
    return ok


def check_after(
    moto_url: str, tmp: Path, config: Path, proxy, calls_path: Path, expr: str, nodes: list[str], maps: int, suspend: bool
) -> bool:
    """What follows the first resume: the same resume again launches nothing, two maintenance passes tag one instance
    per node, and the suspend leaves none."""
    live = node_instances(moto_url, CLUSTER)
    untagged = live.get("", [])
    print(f"instances: {len(untagged)} launched, node names in {maps} node map(s), not tagged yet")
    # the same resume again (Slurm never does this, a retry might): nothing is launched twice
    wall, api, secs, sc, rc = run("resume", expr, config, proxy, calls_path)
    report("resume again (idempotency)", wall, api, secs, sc, tmp / "agent.log", "resume")
    again = node_instances(moto_url, CLUSTER)
    ok = rc == 0 and api["CreateFleet"] == 0 and again == live
    print(f"CreateFleet calls: {api['CreateFleet']}; instances unchanged: {again == live}")
    # the maintenance pass names the instances by tag, off the resume path (at most 1000 a pass)
    for n in range(1, 3):
        wall, api, secs, sc, rc = run("maintain", "", config, proxy, calls_path)
        report(f"maintain #{n} (tags what the node maps named)", wall, api, secs, sc, tmp / "agent.log", "maintain")
        ok = ok and rc == 0
    owned = node_instances(moto_url, CLUSTER)
    one_each = sorted(owned) == sorted(nodes) and all(len(v) == 1 for v in owned.values())
    ok = ok and one_each and sorted(i for v in owned.values() for i in v) == sorted(untagged)
    print(f"instances: {sum(len(v) for v in owned.values())} for {len(nodes)} nodes, one per node: {one_each}")
    if suspend:
        wall, api, secs, sc, rc = run("suspend", expr, config, proxy, calls_path)
        report("suspend", wall, api, secs, sc, tmp / "agent.log", "suspend")
        left = node_instances(moto_url, CLUSTER)
        print(f"instances left after suspend: {sum(len(v) for v in left.values())}")
        ok = ok and rc == 0 and not left
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, nargs="+", default=[512, 512], help="nodes per group (up to 4 groups)")
    ap.add_argument("--concurrency", type=int, default=8, help="agent api_concurrency (parallel CreateTags)")
    ap.add_argument("--no-suspend", action="store_true")
    ap.add_argument("--profile", metavar="PATH", help="write a cProfile of the first resume to PATH")
    args = ap.parse_args()
    groups = list(TYPES)[: len(args.nodes)]
    for k, v in AWS_ENV.items():
        os.environ[k] = v

    with tempfile.TemporaryDirectory(prefix="gpucluster-bench-") as tmp_s:
        tmp = Path(tmp_s)
        moto = MotoServer(tmp / "moto.log")
        proxy = FaultProxy(moto.url)
        try:
            world = make_world(moto.url, {g: TYPES[g] for g in groups})
            s3 = boto3.session.Session(region_name="us-east-1").client("s3", endpoint_url=moto.url)
            s3.create_bucket(Bucket=BUCKET)
            nodes = [f"{g}-{i}" for g, n in zip(groups, args.nodes, strict=True) for i in range(1, n + 1)]
            bin_dir, calls_path = stub_scontrol(tmp, nodes)
            config = write_config(tmp, proxy.url, world, groups, args.nodes, args.concurrency, bin_dir)
            expr = hostlist.compress(nodes)
            print(f"resume {len(nodes)} nodes in {len(groups)} groups: {expr}")
            wall, api, secs, sc, rc = run("resume", expr, config, proxy, calls_path, args.profile)
            own = report("resume", wall, api, secs, sc, tmp / "agent.log", "resume")
            fleets = proxy.requests("CreateFleet")  # cleared by the next run: read now
            ok = check_resume(own, api, fleets, groups, args.nodes, len(nodes)) and rc == 0
            maps = api["S3.PutObject"]
            ok = check_after(moto.url, tmp, config, proxy, calls_path, expr, nodes, maps, not args.no_suspend) and ok
            print(f"\nresult: {'OK' if ok else 'FAILED'}")
            return 0 if ok else 1
        finally:
            proxy.stop()
            moto.stop()


if __name__ == "__main__":
    sys.exit(main())
