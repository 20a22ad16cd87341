"""End to end with the real Slurm (Debian 22.05) running the project's rendered slurm.conf, gres.conf,
cgroup.conf, topology.conf, TaskProlog and agent config (``slurm_e2e.render``; ``local_overrides`` is
the only local patch): a job on a cloud partition makes slurmctld run the agent, the agent launches
through moto (behind the fault proxy), a local slurmd per launched node registers, the job completes
with the node's NCCL/EFA environment from the TaskProlog, and after SuspendTime the agent terminates
the instances.

Fault case: no capacity for the first node group (injected by the proxy: CreateFleet answers with
InsufficientInstanceCapacity, which moto cannot produce) -> the job, submitted to both partitions,
runs on the second; the first group's nodes are DOWN with the reason; no instance is left unowned.

Static group: the Auto Scaling group's instance (launched here with its launch template's tags) is
named by the agent's ``maintain``, its slurmd registers as that node and runs a job; when the group
takes the instance away, the node goes DOWN; the agent never launches or terminates one.

Set GPUCLUSTER_E2E_KEEP=1 to keep the run directory (/tmp/gce2e-*: slurm.conf, logs) for debugging."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpucluster_agents.contract import hostlist
from gpucluster_agents.contract.topology import HEADER
from tests.agents.conftest import CLUSTER, base_config, require_tool
from tests.agents.ec2_fault_proxy import FaultProxy
from tests.agents.moto_env import MotoServer, ec2_client, instances, make_world, node_instances
from tests.e2e import slurm_harness
from tests.e2e.slurm_e2e import SCONTROL, SLURMCTLD, SLURMD, GroupSpec, SlurmCluster, build_uptime_shim, render
from tests.e2e.slurm_programs import agent_env, start_slurmd, stop_slurmds

pytestmark = pytest.mark.slow

E2E_GROUPS = [
    GroupSpec("p5", "p5.48xlarge", nodes=2, priority_tier=10),
    GroupSpec("g6e", "g6e.12xlarge", nodes=2, priority_tier=5),
]
STATIC = GroupSpec("st", "g6e.12xlarge", nodes=2, priority_tier=1, mode="static")
# The agent settings of this machine, laid over the rendered agent config (base_config has them).
LOCAL_AGENT_KEYS = ("endpoint_url", "log_file", "state_dir", "orphan_grace_seconds", "api_retry_mode", "api_max_attempts")


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for tool in (SLURMCTLD, SLURMD, SCONTROL, "/usr/bin/gcc"):
        require_tool(tool)
    return build_uptime_shim(tmp_path_factory.mktemp("shim"))


def start_cluster(groups: list[GroupSpec], moto: MotoServer, proxy: FaultProxy, shim: Path) -> Iterator[SlurmCluster]:
    # a short run dir: slurmd's unix socket path must stay under 108 characters
    run_dir = slurm_harness.run_dir("gce2e-")
    world = make_world(moto.url, {g.name: g.instance_type for g in groups})
    base: dict[str, Any] = base_config(run_dir, proxy.url, world, Path("/usr/bin"))
    rendered = render(CLUSTER, groups, world.launch_templates, world.subnet_ids)
    c = SlurmCluster(run_dir, CLUSTER, groups, rendered, {k: base[k] for k in LOCAL_AGENT_KEYS}, moto.url, shim)
    c.world = world  # type: ignore[attr-defined]
    try:
        c.start()  # exits (and start() raises) on an invalid slurm.conf
        yield c
    finally:
        c.stop()
        leftover = c.leftover()
        if not os.environ.get("GPUCLUSTER_E2E_KEEP"):
            shutil.rmtree(run_dir, ignore_errors=True)
        assert leftover == [], f"processes left running: {leftover}"


@pytest.fixture
def cluster(moto: MotoServer, proxy: FaultProxy, aws_env: None, shim: Path) -> Iterator[SlurmCluster]:
    yield from start_cluster(E2E_GROUPS, moto, proxy, shim)


@pytest.fixture
def static_cluster(moto: MotoServer, proxy: FaultProxy, aws_env: None, shim: Path) -> Iterator[SlurmCluster]:
    yield from start_cluster([*E2E_GROUPS, STATIC], moto, proxy, shim)


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
    # the rendered config: typed GPU GRES, the rendered partitions and features
    assert (
        "Gres=gpu:h100:8" in cluster.rendered.slurm_conf
        and "PartitionName=p5 Nodes=p5-[1-2] Default=YES" in cluster.rendered.slurm_conf
    )
    job = cluster.sbatch(
        "-p", "p5", "-N", "2", "--gres=gpu:h100:1", "--constraint=efa", "--output=job-%j.out",
        "--wrap", "echo ran-on-$SLURMD_NODENAME FI_PROVIDER=$FI_PROVIDER",
    )  # fmt: skip
    info = cluster.wait_job(job, timeout=100)
    assert info["JobState"] == "COMPLETED", cluster.debug()
    assert info["NodeList"] == "p5-[1-2]"
    # the TaskProlog gave the task the node's NCCL/EFA environment
    assert (cluster.dir / f"job-{job}.out").read_text().strip() == "ran-on-p5-1 FI_PROVIDER=efa"
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


def test_static_group_instances_are_named_run_jobs_and_go_down_with_their_instance(
    static_cluster: SlurmCluster, moto: MotoServer, proxy: FaultProxy
) -> None:
    c = static_cluster
    assert "SuspendExcParts=st" in c.rendered.slurm_conf  # Slurm never powers static nodes down
    # The Auto Scaling group launches an instance from the group's template (tagged cluster + node group).
    (iid,) = [
        i["InstanceId"]
        for i in ec2_client(moto.url).run_instances(
            LaunchTemplate={"LaunchTemplateId": c.world.launch_templates["st"]},  # type: ignore[attr-defined]
            MinCount=1,
            MaxCount=1,
            TagSpecifications=[
                {
                    "ResourceType": "instance",
                    "Tags": [{"Key": "gpucluster:cluster", "Value": CLUSTER}, {"Key": "gpucluster:node-group", "Value": "st"}],
                }
            ],
        )["Instances"]
    ]
    assert c.run_agent("maintain") == 0  # the head node's timer
    assert node_instances(moto.url, CLUSTER) == {"st-1": [iid]}
    states = c.nodes()
    assert states["st-2"].has("DOWN") and (states["st-2"].reason or "").startswith("gpucluster: no instance"), c.debug()
    assert not states["st-1"].has("DOWN")
    # The instance boots, reads its name from its tags and starts slurmd as that node.
    start_slurmd(c.settings, "st-1", agent_env(c.settings))
    job = c.sbatch("-p", "st", "-N", "1", "--output=job-%j.out", "--wrap", "echo ran-on-$SLURMD_NODENAME")
    info = c.wait_job(job, timeout=60)
    assert info["JobState"] == "COMPLETED" and info["NodeList"] == "st-1", c.debug()
    assert proxy.actions()["CreateFleet"] == 0 and proxy.actions()["TerminateInstances"] == 0
    # The Auto Scaling group takes the instance away: the node goes DOWN, nothing is left unowned.
    ec2_client(moto.url).terminate_instances(InstanceIds=[iid])
    stop_slurmds(c.settings, ["st-1"])
    assert c.run_agent("maintain") == 0
    assert c.nodes()["st-1"].has("DOWN"), c.debug()
    assert proxy.actions()["TerminateInstances"] == 0
    assert_no_unowned_instance(c, moto.url)
