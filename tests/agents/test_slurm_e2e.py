"""End to end with the real Slurm (Debian 22.05): a job on a cloud partition makes slurmctld run the
agent, the agent launches through moto (behind the fault proxy), a local slurmd per launched node
registers, the job completes, and after SuspendTime the agent terminates the instances.

Fault case: no capacity for the first node group (injected by the proxy: CreateFleet answers with
InsufficientInstanceCapacity, which moto cannot produce) -> the job, submitted to both partitions,
runs on the second; the first group's nodes are DOWN with the reason; no instance is left unowned.

Set GPUCLUSTER_E2E_KEEP=1 to keep the run directory (/tmp/gce2e-*: slurm.conf, logs) for debugging."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import CLUSTER, GROUPS, base_config, require_tool
from ec2_fault_proxy import FaultProxy
from moto_env import MotoServer, instances, make_world, node_instances
from slurm_e2e import SCONTROL, SLURMCTLD, SLURMD, GroupSpec, SlurmCluster, build_uptime_shim, marked_pids

from gpucluster_agents import hostlist
from gpucluster_agents.topology import HEADER

pytestmark = pytest.mark.slow

E2E_GROUPS = [
    GroupSpec("p5", nodes=2, gpus=8, cpus=192, memory_mb=2_000_000, priority_tier=10),
    GroupSpec("g6e", nodes=2, gpus=4, cpus=48, memory_mb=380_000, priority_tier=5),
]


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for tool in (SLURMCTLD, SLURMD, SCONTROL, "/usr/bin/gcc"):
        require_tool(tool)
    return build_uptime_shim(tmp_path_factory.mktemp("shim"))


@pytest.fixture
def cluster(moto: MotoServer, proxy: FaultProxy, aws_env: None, shim: Path) -> Iterator[SlurmCluster]:
    # a short run dir: slurmd's unix socket path must stay under 108 characters
    run_dir = Path(tempfile.mkdtemp(prefix="gce2e-", dir="/tmp"))
    world = make_world(moto.url, GROUPS)
    cfg: dict[str, Any] = base_config(run_dir, proxy.url, world, Path("/usr/bin"))
    for g in cfg["node_groups"]:
        g["max_nodes"] = 2
    c = SlurmCluster(run_dir, CLUSTER, E2E_GROUPS, cfg, moto.url, shim)
    try:
        c.start()  # exits (and start() raises) on an invalid slurm.conf
        yield c
    finally:
        c.stop()
        leftover = marked_pids(c.marker)
        if not os.environ.get("GPUCLUSTER_E2E_KEEP"):
            shutil.rmtree(run_dir, ignore_errors=True)
        assert leftover == [], f"processes left running: {leftover}"


def assert_no_unowned_instance(c: SlurmCluster, moto_url: str) -> None:
    """Every live instance carries a node name, one per node, and Slurm still counts that node as up."""
    states = c.nodes()
    seen: set[str] = set()
    for inst in instances(moto_url, CLUSTER):
        node = inst["tags"].get("gpucluster:node-name")
        assert node, f"instance {inst['InstanceId']} has no node"
        assert node not in seen, f"node {node} has two instances"
        seen.add(node)
        assert not states[node].powered_down, f"{node} is powered down but {inst['InstanceId']} runs"


def test_job_runs_on_launched_nodes_then_suspend_terminates(cluster: SlurmCluster, moto: MotoServer) -> None:
    job = cluster.sbatch("-p", "p5", "-N", "2", "--gres=gpu:1", "--output=job-%j.out", "--wrap", "echo ran-on-$SLURMD_NODENAME")
    info = cluster.wait_job(job, timeout=100)
    assert info["JobState"] == "COMPLETED", cluster.debug()
    assert info["NodeList"] == "p5-[1-2]"
    assert (cluster.dir / f"job-{job}.out").read_text().strip() == "ran-on-p5-1"
    launched = node_instances(moto.url, CLUSTER)
    assert sorted(launched) == ["p5-1", "p5-2"] and all(len(v) == 1 for v in launched.values())
    agent_log = Path(cluster.agent_config["log_file"]).read_text()
    assert "api CreateFleet group=p5" in agent_log and "count=2" in agent_log
    # topology.conf, rewritten by the agent after the resume, now places both nodes
    topo = (cluster.dir / "etc" / "topology.conf").read_text().splitlines()
    assert topo[: len(HEADER)] == list(HEADER)
    assert "SwitchName=nn-p5-1 Nodes=p5-[1-2]" in topo
    assert "SwitchName=unplaced-g6e Nodes=g6e-[1-2]" in topo
    # slurmctld re-read it on the agent's `scontrol reconfigure` (its debug log lists the switches it built)
    ctld_log = (cluster.dir / "log" / "slurmctld.log").read_text()
    assert "_log_switches: Switch level:0 name:nn-p5-1 nodes:p5-[1-2] switches:(null)" in ctld_log
    assert "name:root nodes:g6e-[1-2],p5-[1-2] switches:nn-top,unplaced-g6e" in ctld_log
    assert "switches lack access" not in ctld_log

    # idle for SuspendTime (8 s): slurmctld runs SuspendProgram, the agent terminates the instances
    deadline = time.monotonic() + 60
    while node_instances(moto.url, CLUSTER) and time.monotonic() < deadline:
        time.sleep(1)
    assert node_instances(moto.url, CLUSTER) == {}, cluster.debug()
    gone = {i["InstanceId"] for i in instances(moto.url, CLUSTER, states=("shutting-down", "terminated"))}
    assert gone == {v[0] for v in launched.values()}
    assert "decision suspend node=p5-1" in Path(cluster.agent_config["log_file"]).read_text()
    deadline = time.monotonic() + 30
    while any(not cluster.nodes()[n].has("POWERED_DOWN") for n in ("p5-1", "p5-2")) and time.monotonic() < deadline:
        time.sleep(1)
    for n in ("p5-1", "p5-2"):
        assert cluster.nodes()[n].has("POWERED_DOWN"), cluster.debug()


def test_insufficient_capacity_fails_over_to_the_second_partition(
    cluster: SlurmCluster, moto: MotoServer, proxy: FaultProxy
) -> None:
    # Injected: every CreateFleet for node group p5 answers InsufficientInstanceCapacity, no instance.
    proxy.capacity("p5", fulfil=0)
    job = cluster.sbatch("-p", "p5,g6e", "-N", "1", "--output=job-%j.out", "--wrap", "echo ran-on-$SLURMD_NODENAME")
    info = cluster.wait_job(job, timeout=150)
    assert info["JobState"] == "COMPLETED", cluster.debug()
    assert info["Partition"] == "g6e"
    ran_on = hostlist.expand(info["NodeList"])
    assert len(ran_on) == 1 and ran_on[0].startswith("g6e-")
    assert (cluster.dir / f"job-{job}.out").read_text().strip() == f"ran-on-{ran_on[0]}"
    # the job went to p5 first (higher PriorityTier) and the agent failed that node
    fleet_groups = [r["TagSpecification.1.Tag.2.Value"] for r in proxy.requests("CreateFleet")]
    assert fleet_groups[0] == "p5" and fleet_groups[-1] == "g6e"
    states = cluster.nodes()
    for n in ("p5-1", "p5-2"):
        assert states[n].has("DOWN"), cluster.debug()
        assert states[n].reason and "InsufficientInstanceCapacity" in states[n].reason
    assert node_instances(moto.url, CLUSTER) == {ran_on[0]: node_instances(moto.url, CLUSTER)[ran_on[0]]}
    assert_no_unowned_instance(cluster, moto.url)
