#!/usr/bin/env python3
"""Benchmark: roll 1,024 dynamic nodes onto a new image, 10 % at a time, with the real agent against a local moto server.

    python bench/rolling_update.py [--nodes 1024] [--percent 10]

The nodes are launched by the agent's ``resume`` (one group, launch template version ``$Default``) and registered in
the stub scontrol (the tests' fake, as ``bench/resume_scale.py`` uses it); then the launch template gets a new
version with a new AMI as its default, as ``pulumi up`` does after an image change. Each maintenance pass is
``python -m gpucluster_agents maintain`` as its own process (the head node's timer); between passes this script
plays slurmctld: nodes the agent powered down run the agent's ``suspend`` and are powered down (``idle~``). A node is
rolled once no instance of the old image runs it: the next job that wants it launches the new version (the resume
path is ``bench/resume_scale.py``'s subject; relaunching here would only time moto).

Measured per maintenance pass: the EC2 calls by action (through the counting proxy), the agent's own time (its
log's end line: total less the time waiting on AWS), the nodes drained or powering down for the roll.
Checks (exit 1 if broken): every node ends on the new AMI with one instance, no node drained; at no time more
than the share drained; no action called more than a fixed few times per pass (no per-node call); the agent's own
time per pass at most 5 s at 1,024 nodes (scaled for other sizes).
Ends with: ``rolled N nodes in P passes, at most C EC2 calls and T s agent time per pass, at most D drained at once``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "agents"))
sys.path.insert(0, str(REPO))

from ec2_fault_proxy import FaultProxy  # noqa: E402
from moto_env import AMI_ID, AWS_ENV, MotoServer, ec2_client, instances, make_world  # noqa: E402
from resume_scale import AGENT_TIMES, BUCKET, CLUSTER, run, stub_scontrol, write_config  # noqa: E402

from gpucluster_agents.contract import hostlist  # noqa: E402
from gpucluster_agents.power.roll import REASON  # noqa: E402

OWN_LIMIT = 5.0  # the issue: the agent's own time per maintenance pass at 1,024 nodes (also the limit for fewer)
PER_PASS = 16  # calls of one action a pass may make (DescribeInstanceTopology: 100 ids a call, 11 at 1,024 nodes)
# Not the roll's: the maintenance pass names the instances the resumes launched by tag, one CreateTags each (their
# Name tags differ), at most 1000 a pass (power/names.py ``tag_lazily``): counted and shown, not held to PER_PASS.
LAZY_TAGS = "CreateTags"


def nodes_state(state: Path) -> dict[str, dict[str, str | None]]:
    return json.loads(state.read_text())["nodes"]


def set_state(state: Path, nodes: list[str], value: str) -> None:
    data = json.loads(state.read_text())
    for n in nodes:
        data["nodes"][n].update(state=value, reason=None)
    state.write_text(json.dumps(data))


def own_time(log: Path) -> float:
    ends = [line for line in log.read_text().splitlines() if " maintain INFO end maintain in " in line]
    m = AGENT_TIMES.search(ends[-1]) if ends else None
    return float(m[2]) if m else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--percent", type=int, default=10, help="updates.max_drained_percent")
    args = ap.parse_args()
    for k, v in AWS_ENV.items():
        os.environ[k] = v
    with tempfile.TemporaryDirectory(prefix="gpucluster-bench-roll-") as tmp_s:
        tmp = Path(tmp_s)
        moto = MotoServer(tmp / "moto.log")
        proxy = FaultProxy(moto.url)
        try:
            return bench(tmp, moto, proxy, args.nodes, args.percent)
        finally:
            proxy.stop()
            moto.stop()


def bench(tmp: Path, moto: MotoServer, proxy: FaultProxy, count: int, percent: int) -> int:
    import boto3

    world = make_world(moto.url, {"p5": "p5.48xlarge"})
    boto3.session.Session(region_name="us-east-1").client("s3", endpoint_url=moto.url).create_bucket(Bucket=BUCKET)
    nodes = [f"p5-{i}" for i in range(1, count + 1)]
    bin_dir, calls_path = stub_scontrol(tmp, nodes)
    state = calls_path.with_suffix("")  # slurm-state.json
    config = write_config(tmp, proxy.url, world, ["p5"], [count], 8, bin_dir)
    doc = json.loads(config.read_text())
    doc["updates"] = {"max_drained_percent": percent}
    doc["node_groups"][0]["launch_template_version"] = "$Default"
    config.write_text(json.dumps(doc))
    log = tmp / "agent.log"
    expr = hostlist.compress(nodes)
    print(f"launching {count} nodes on the old image ...", flush=True)
    assert run("resume", expr, config, proxy, calls_path)[4] == 0
    set_state(state, nodes, "IDLE+CLOUD")
    assert run("maintain", "", config, proxy, calls_path)[4] == 0  # names them by tag, as the timer would

    ec2 = ec2_client(moto.url)
    ami = ec2.copy_image(SourceImageId=AMI_ID, SourceRegion="us-east-1", Name="gpucluster-bench-next")["ImageId"]
    lt = world.launch_templates["p5"]
    v = ec2.create_launch_template_version(LaunchTemplateId=lt, LaunchTemplateData={"ImageId": ami})["LaunchTemplateVersion"]
    ec2.modify_launch_template(LaunchTemplateId=lt, DefaultVersion=str(v["VersionNumber"]))
    share = max(1, count * percent // 100)
    print(f"new image {ami} (launch template version {v['VersionNumber']}); share {share} nodes", flush=True)

    passes, most_calls, most_own, most_drained, ok = 0, 0, 0.0, 0, True
    print("EC2 calls: all but the lazy CreateTags of the instances the resumes launched (shown by action)")
    print(f"{'pass':>4} {'EC2 calls':>9} {'own s':>6} {'drained':>7} {'powering down':>13} {'old left':>8}  calls by action")
    while True:
        on_old = sum(1 for i in instances(moto.url, CLUSTER) if i["ImageId"] != ami)
        st = nodes_state(state)
        if on_old == 0 and not any(s["reason"] == REASON for s in st.values()):
            break
        passes += 1
        if passes > 4 * (100 // max(1, percent)) + 10:
            print("the roll does not end")
            return 1
        _wall, api, _secs, _sc, rc = run("maintain", "", config, proxy, calls_path)
        ok = ok and rc == 0
        st = nodes_state(state)
        drained = [n for n, s in st.items() if s["reason"] == REASON]
        down = [n for n, s in st.items() if "POWERING_DOWN" in str(s["state"])]
        own = own_time(log)
        most_drained = max(most_drained, len(drained) + len(down))
        per_node = [a for a, n in api.items() if n > PER_PASS and a != LAZY_TAGS]
        roll_calls = sum(n for a, n in api.items() if a != LAZY_TAGS)
        most_calls, most_own = max(most_calls, roll_calls), max(most_own, own)
        ok = ok and not per_node and len(drained) + len(down) <= share
        calls = " ".join(f"{a}={n}" for a, n in sorted(api.items()))
        print(f"{passes:4d} {roll_calls:9d} {own:6.2f} {len(drained):7d} {len(down):13d} {on_old:8d}  {calls}", flush=True)
        if down:  # slurmctld: SuspendProgram (the agent terminates the instances), then idle~
            ok = ok and run("suspend", hostlist.compress(down), config, proxy, calls_path)[4] == 0
            set_state(state, down, "IDLE+CLOUD+POWERED_DOWN")
    live = instances(moto.url, CLUSTER)
    st = nodes_state(state)
    one_each = not live and all(s["state"] == "IDLE+CLOUD+POWERED_DOWN" and s["reason"] is None for s in st.values())
    own_limit = OWN_LIMIT
    ok = ok and one_each and most_own <= own_limit and most_drained <= share
    print(f"every node powered down, none drained, no instance left: {one_each}; own time limit {own_limit:.2f} s; share {share}")
    print(
        f"rolled {count} nodes in {passes} passes, at most {most_calls} EC2 calls and {most_own:.2f} s agent time per pass,"
        f" at most {most_drained} drained at once"
    )
    print(f"result: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
