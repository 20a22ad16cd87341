"""Never leak an instance: crashes between launch and tagging (the proxy SIGKILLs the agent process
mid-call, a crash moto cannot produce), untagged strays, duplicates, instances of powered-down nodes."""

from __future__ import annotations

import json
import signal

import pytest

from tests.agents.conftest import CLUSTER, Harness
from tests.agents.moto_env import ec2_client, instances


def crash(harness: Harness, action: str, when: str, command: str, nodes: str) -> None:
    """Run the agent as its own process and have the proxy SIGKILL it at ``action``."""
    c = harness.proxy.crash_client(action, when)
    proc = harness.spawn(command, nodes)
    c.pid = proc.pid
    c.ready.set()
    assert proc.wait(timeout=60) == -signal.SIGKILL
    assert c.fired


def journal(harness: Harness) -> list[dict[str, object]]:
    d = harness.tmp / "state" / "journal"
    return [json.loads(p.read_text()) for p in sorted(d.glob("*.json"))]


def launch_raw(harness: Harness, tags: dict[str, str], count: int = 1) -> list[str]:
    """Instances made behind the agent's back (as a crashed or foreign launcher would leave them)."""
    ec2 = ec2_client(harness.moto.url)
    r = ec2.run_instances(
        LaunchTemplate={"LaunchTemplateId": harness.world.launch_templates["p5"]},
        MinCount=count,
        MaxCount=count,
        SubnetId=harness.world.subnet_ids[0],
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}],
    )
    return [i["InstanceId"] for i in r["Instances"]]


def test_crash_after_create_fleet_answer_lost(harness: Harness) -> None:
    # Injected: moto launched the fleet, then the agent died before reading the answer: no instance id
    # ever reached the journal. The next call (an unrelated suspend) gives the instances to the nodes that
    # still wait for them, by their launch token and the entry's node list.
    harness.slurm.set("p5-[1-2]", "IDLE+CLOUD+POWERING_UP")
    crash(harness, "CreateFleet", "after", "resume", "p5-[1-2]")
    ids = sorted(harness.nodes()[""])
    assert len(ids) == 2
    (entry,) = journal(harness)
    assert entry["assignments"] == {} and entry["nodes"] == ["p5-1", "p5-2"]
    assert harness.run("suspend", "g6e-1") == 0
    assert harness.nodes() == {"p5-1": [ids[0]], "p5-2": [ids[1]]}
    assert "decision recover instance=" in harness.log_text()


@pytest.mark.parametrize("next_call", [("maintain", ""), ("suspend", "g6e-1"), ("resume", "p5-1")])
def test_crash_before_tagging_is_adopted_while_the_node_powers_up(harness: Harness, next_call: tuple[str, str]) -> None:
    # Injected: the agent dies as it sends CreateTags, after the journal got the instance -> node map.
    harness.config["api_concurrency"] = 1
    harness.slurm.set("p5-1", "IDLE+CLOUD+POWERING_UP")
    crash(harness, "CreateTags", "before", "resume", "p5-1")
    (iid,) = harness.nodes()[""]
    (entry,) = journal(harness)
    assert entry["assignments"] == {iid: "p5-1"}
    harness.proxy.clear()
    assert harness.run(*next_call) == 0
    assert harness.nodes() == {"p5-1": [iid]}
    (inst,) = instances(harness.moto.url, CLUSTER)
    assert harness.slurm.node("p5-1")["addr"] == inst["PrivateIpAddress"]
    assert harness.proxy.actions()["CreateFleet"] == 0
    assert f"decision adopt instance={iid} node=p5-1" in harness.log_text()


def test_crash_before_tagging_is_terminated_when_slurm_gave_up(harness: Harness) -> None:
    harness.config["api_concurrency"] = 1
    harness.slurm.set("p5-1", "IDLE+CLOUD+POWERING_UP")
    crash(harness, "CreateTags", "before", "resume", "p5-1")
    assert len(harness.nodes()[""]) == 1
    # ResumeTimeout passed meanwhile: Slurm powered the node down (and failed it)
    harness.slurm.set("p5-1", "DOWN+CLOUD+POWERED_DOWN", "ResumeTimeout reached")
    assert harness.run("maintain") == 0
    assert harness.nodes() == {}


OF_P5 = {"gpucluster:cluster": CLUSTER, "gpucluster:node-group": "p5"}  # what CreateFleet tags every launch with


def test_untagged_strays_are_terminated_after_the_grace_period(harness: Harness) -> None:
    stray = launch_raw(harness, OF_P5)
    foreign = launch_raw(harness, {"gpucluster:cluster": "othercl", "gpucluster:node-group": "p5"})
    untagged_other = launch_raw(harness, {"Name": "not-ours"})
    # The cluster's own instances that are not the agent's: the head node (no node group) and a plain
    # Auto Scaling group (a node group the agent config does not list). Never listed, never swept.
    head = launch_raw(harness, {"gpucluster:cluster": CLUSTER, "Name": f"{CLUSTER}-head"})
    plain = launch_raw(harness, {"gpucluster:cluster": CLUSTER, "gpucluster:node-group": "cpu"})
    assert harness.run("maintain") == 0
    assert harness.nodes() == {"": stray + head + plain}  # the stray is younger than orphan_grace_seconds (120 s)
    assert f"instance={stray[0]} untagged, first seen 0s ago" in harness.log_text()
    harness.config["orphan_grace_seconds"] = 0
    assert harness.run("maintain") == 0
    assert harness.nodes() == {"": head + plain}
    alive = {i["InstanceId"] for i in instances(harness.moto.url)}
    assert alive == set(foreign + untagged_other + head + plain)  # only the agent's own stray was terminated
    for iid in head + plain:
        assert iid not in harness.log_text()
    ec2_client(harness.moto.url).terminate_instances(InstanceIds=head + plain)  # for the teardown's no-unowned check


def test_duplicates_stopped_and_powered_down_nodes(harness: Harness) -> None:
    def tags(node: str, cluster: str = CLUSTER) -> dict[str, str]:
        return {"gpucluster:cluster": cluster, "gpucluster:node-group": "p5", "gpucluster:node-name": node}

    dup = launch_raw(harness, tags("p5-1"), count=2)
    off = launch_raw(harness, tags("p5-2"))
    stopped = launch_raw(harness, tags("p5-3"))
    ec2_client(harness.moto.url).stop_instances(InstanceIds=stopped)
    booting = launch_raw(harness, tags("p5-4"))
    foreign = launch_raw(harness, tags("p5-2", cluster="othercl"))
    harness.slurm.set("p5-1", "MIXED+CLOUD")
    harness.slurm.set("p5-4", "IDLE+CLOUD+POWERING_UP")
    # p5-2, p5-3: IDLE+CLOUD+POWERED_DOWN (the fake's default): they own nothing any more
    assert harness.run("maintain") == 0
    nodes = harness.nodes()
    assert nodes == {"p5-1": [min(dup)], "p5-4": booting}
    assert not set(off + stopped) & {
        i["InstanceId"] for i in instances(harness.moto.url, states=("pending", "running", "stopped"))
    }
    assert foreign[0] in {i["InstanceId"] for i in instances(harness.moto.url)}
    log = harness.log_text()
    assert f"instance={max(dup)}: second instance of node p5-1" in log
    assert f"instance={off[0]}: node p5-2 is powered down in Slurm" in log
    assert f"instance={stopped[0]}: node p5-3 instance is stopped" in log


def test_every_subcommand_sweeps(harness: Harness) -> None:
    harness.config["orphan_grace_seconds"] = 0
    harness.config["topology_conf"] = str(harness.tmp / "topology.conf")
    for command, nodes in [
        ("resume", "g6e-1"),
        ("suspend", "g6e-1"),
        ("resume-fail", "g6e-2"),
        ("topology", ""),
        ("maintain", ""),
    ]:
        stray = launch_raw(harness, OF_P5)
        if command == "resume":
            harness.slurm.set(nodes, "IDLE+CLOUD+POWERING_UP")
        assert harness.run(command, nodes) == 0, command
        assert "" not in harness.nodes(), command
        assert f"decision terminate instance={stray[0]}" in harness.log_text(), command


def test_lost_create_fleet_answer_keeps_the_journal_for_the_next_sweep(harness: Harness) -> None:
    # Injected: moto launches, but every answer is lost as a 500 InternalError. botocore retries (in EC2
    # the ClientToken makes that idempotent; moto launches again), then the agent gives up: it must keep
    # the launch journal so that the next call terminates what those calls may have launched.
    harness.config["api_max_attempts"] = 2
    harness.proxy.fail("CreateFleet", "InternalError", n=2, after=True)
    assert harness.slurm_resume("p5-1") == 0
    assert harness.slurm.node("p5-1")["reason"].startswith("gpucluster: InternalError")
    assert len(harness.nodes()[""]) == 2
    (entry,) = journal(harness)
    assert entry["nodes"] == ["p5-1"]
    assert harness.run("maintain") == 0
    assert harness.nodes() == {}
