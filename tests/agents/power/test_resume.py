"""resume against moto: launch, tags, node addresses, idempotency, batching, capacity failures,
throttling, holds."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import boto3
from botocore.stub import Stubber

from gpucluster_agents.agent import Agent
from gpucluster_agents.contract import hostlist
from gpucluster_agents.contract import parse as parse_config
from gpucluster_agents.power.ec2 import Ec2
from gpucluster_agents.power.slurm import Slurm
from tests.agents.conftest import CLUSTER, FakeEc2, FakeSlurm, Harness
from tests.agents.moto_env import ec2_client, instances
from tests.agents.test_config import MINIMAL


def test_resume_launches_one_tagged_instance_per_node_and_sets_addresses(harness: Harness) -> None:
    assert harness.slurm_resume("p5-[1-2],g6e-3") == 0
    insts = {i["tags"]["gpucluster:node-name"]: i for i in instances(harness.moto.url, CLUSTER)}
    assert sorted(insts) == ["g6e-3", "p5-1", "p5-2"]
    for node, inst in insts.items():
        group = node.split("-")[0]
        tags = inst["tags"]
        assert tags["gpucluster:cluster"] == CLUSTER
        assert tags["gpucluster:node-group"] == group
        assert len(tags["gpucluster:launch-token"]) == 32
        assert tags["Name"] == f"{CLUSTER}-{node}"
        assert inst["InstanceType"] == {"p5": "p5.48xlarge", "g6e": "g6e.12xlarge"}[group]
        # scontrol update nodename=<n> nodeaddr=<private ip> nodehostname=<n>
        assert harness.slurm.node(node)["addr"] == inst["PrivateIpAddress"]
    assert insts["p5-1"]["tags"]["team"] == "ml"
    assert insts["p5-1"]["SubnetId"] == harness.world.subnet_ids[0]  # the EFA group's only subnet
    # one launch per group, the two p5 nodes share a token
    assert insts["p5-1"]["tags"]["gpucluster:launch-token"] == insts["p5-2"]["tags"]["gpucluster:launch-token"]
    assert harness.proxy.actions()["CreateFleet"] == 2
    assert ["update", "nodename=g6e-3,p5-1,p5-2"] == harness.slurm.updates()[0][:2]
    log = harness.log_text()
    for inst in insts.values():
        assert inst["InstanceId"] in log
    assert "decision launch group=p5" in log and "end resume" in log
    assert not list((harness.tmp / "state" / "journal").iterdir())  # launch completed: journal cleared


def test_resume_twice_is_idempotent(harness: Harness) -> None:
    assert harness.slurm_resume("p5-[1-3]") == 0
    first = harness.nodes()
    harness.proxy.clear()
    assert harness.slurm_resume("p5-[1-3]") == 0
    assert harness.nodes() == first
    assert harness.proxy.actions()["CreateFleet"] == 0
    assert "decision reuse node=p5-2" in harness.log_text()
    # a later resume of an overlapping set only launches the new node
    assert harness.slurm_resume("p5-[2-4]") == 0
    nodes = harness.nodes()
    assert {k: v for k, v in nodes.items() if k != "p5-4"} == first
    assert len(nodes["p5-4"]) == 1
    (req,) = harness.proxy.requests("CreateFleet")
    assert req["TargetCapacitySpecification.TotalTargetCapacity"] == "1"


def test_1200_nodes_take_three_fleets_of_500_500_200(tmp_path: Path) -> None:
    # EC2 is simulated with botocore before-call hooks (no HTTP): moto needs ~20 s to launch, tag and
    # describe 1200 instances; the benchmark (bench/resume_scale.py) runs that scale against moto.
    cfg = parse_config(
        {
            **MINIMAL,
            "state_dir": str(tmp_path / "state"),
            "topology_conf": None,
            "node_groups": [{**MINIMAL["node_groups"][0], "max_nodes": 1200}],
        }
    )
    slurm = FakeSlurm(tmp_path / "slurm", [f"p5-{i}" for i in range(1, 1201)])
    ec2 = FakeEc2()
    agent = Agent(cfg, ec2=Ec2(cfg, client=ec2.client), slurm=Slurm(str(slurm.bin_dir / "scontrol")))
    agent.resume(hostlist.expand("p5-[1-1200]"))
    assert [len(ids) for ids in ec2.fleets] == [500, 500, 200]
    assert ec2.calls["CreateFleet"] == 3
    assert ec2.calls["CreateTags"] == 1200
    assert sorted(ec2.node_tags.values(), key=hostlist.order_key) == [f"p5-{i}" for i in range(1, 1201)]
    assert ec2.calls["DescribeInstances"] == 1 + 3  # the inventory, then one per launch (by launch token)
    updates = [u for u in slurm.updates() if any(a.startswith("nodeaddr=") for a in u)]
    assert [len(hostlist.expand(u[1].split("=", 1)[1])) for u in updates] == [500, 500, 200]
    assert slurm.node("p5-1200")["addr"] == ec2.ips[next(i for i, n in ec2.node_tags.items() if n == "p5-1200")]


def test_batching_against_moto_with_a_small_cap(harness: Harness) -> None:
    harness.config["max_instances_per_fleet"] = 4
    assert harness.slurm_resume("p5-[1-10]") == 0
    sizes = [r["TargetCapacitySpecification.TotalTargetCapacity"] for r in harness.proxy.requests("CreateFleet")]
    assert sizes == ["4", "4", "2"]
    assert len({r["ClientToken"] for r in harness.proxy.requests("CreateFleet")}) == 3
    nodes = harness.nodes()
    assert sorted(nodes, key=hostlist.order_key) == [f"p5-{i}" for i in range(1, 11)]
    assert all(len(v) == 1 for v in nodes.values())


def test_terminate_batches_of_1000() -> None:
    # TerminateInstances takes at most 1000 ids: 2500 ids -> 1000, 1000, 500 (botocore Stubber, no server).
    cfg = parse_config(MINIMAL)
    client = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="y").client("ec2", region_name="us-east-1")
    ids = [f"i-{n:017x}" for n in range(2500)]
    with Stubber(client) as stub:
        for chunk in (ids[:1000], ids[1000:2000], ids[2000:]):
            stub.add_response("terminate_instances", {"TerminatingInstances": []}, {"InstanceIds": chunk})
        assert Ec2(cfg, client=client).terminate(list(reversed(ids)), "test") == []
        stub.assert_no_pending_responses()


def test_terminate_skips_ids_ec2_no_longer_knows() -> None:
    cfg = parse_config(MINIMAL)
    client = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="y").client("ec2", region_name="us-east-1")
    ids = ["i-0000000000000000a", "i-0000000000000000b", "i-0000000000000000c"]
    with Stubber(client) as stub:
        stub.add_client_error(
            "terminate_instances",
            "InvalidInstanceID.NotFound",
            "The instance ID 'i-0000000000000000b' does not exist",
            expected_params={"InstanceIds": ids},
        )
        stub.add_response("terminate_instances", {"TerminatingInstances": []}, {"InstanceIds": [ids[0], ids[2]]})
        assert Ec2(cfg, client=client).terminate(ids, "test") == []
        stub.assert_no_pending_responses()


def test_insufficient_capacity_sets_nodes_down_and_holds_the_group(harness: Harness) -> None:
    # Injected: CreateFleet for group p5 launches 1 instance and reports InsufficientInstanceCapacity
    # for the rest in its Errors list (partial fulfilment, as EC2 does; moto never does this).
    harness.proxy.capacity("p5", fulfil=1)
    assert harness.slurm_resume("p5-[1-3],g6e-1") == 0
    nodes = harness.nodes()
    assert sorted(nodes) == ["g6e-1", "p5-1"]
    for n in ("p5-2", "p5-3"):
        st = harness.slurm.node(n)
        assert st["state"].startswith("DOWN")
        assert "InsufficientInstanceCapacity" in st["reason"]
        assert st["reason"].startswith("gpucluster: InsufficientInstanceCapacity p5.48xlarge")
    assert not harness.slurm.node("p5-1")["state"].startswith("DOWN")
    assert not harness.slurm.node("g6e-1")["state"].startswith("DOWN")
    # the idle powered-down rest of the group is held too, so Slurm fails over at once
    held = harness.slurm.node("p5-9")
    assert held["state"] == "DOWN+CLOUD+POWERED_DOWN"
    assert "node group p5 held 600s" in held["reason"]
    assert harness.slurm.node("g6e-2")["state"] == "IDLE+CLOUD+POWERED_DOWN"
    holds = json.loads((harness.tmp / "state" / "holds.json").read_text())
    assert "p5" in holds["groups"]
    # during the hold a resume of the group fails fast, without calling EC2
    harness.proxy.clear()
    assert harness.slurm_resume("p5-5") == 0
    assert harness.proxy.actions()["CreateFleet"] == 0
    assert "InsufficientInstanceCapacity" in harness.slurm.node("p5-5")["reason"]
    assert "decision skip-launch group=p5" in harness.log_text()
    # no instance is left that no node owns
    assert "" not in harness.nodes()


def test_no_capacity_at_all_and_hold_release(harness: Harness) -> None:
    # Injected: the first CreateFleet for p5 returns no instance, only an InsufficientInstanceCapacity error.
    harness.proxy.capacity("p5", fulfil=0, calls=1)
    assert harness.slurm_resume("p5-1") == 0
    assert harness.nodes() == {}
    st = harness.slurm.node("p5-1")
    assert st["state"] == "DOWN+CLOUD+POWERING_UP" and "InsufficientInstanceCapacity" in st["reason"]
    assert harness.slurm.node("p5-2")["state"] == "DOWN+CLOUD+POWERED_DOWN"
    # Let the hold expire (rewrite its end time), then any agent call hands the nodes back to Slurm:
    # state=resume for powered-down nodes, power_down_force for the one Slurm still waits for.
    holds_path = harness.tmp / "state" / "holds.json"
    holds = json.loads(holds_path.read_text())
    for kind in ("nodes", "groups"):
        for h in holds[kind].values():
            h["until"] = time.time() - 1
    holds_path.write_text(json.dumps(holds))
    assert harness.run("maintain") == 0
    updates = harness.slurm.updates()
    assert ["update", "nodename=p5-1", "state=power_down_force"] in updates
    assert any(u[1] == "nodename=p5-[2-16]" and u[2] == "state=resume" for u in updates)
    assert harness.slurm.node("p5-2")["state"] == "IDLE+CLOUD+POWERED_DOWN"
    assert json.loads(holds_path.read_text()) == {"groups": {}, "nodes": {}}
    # and the group launches again
    assert harness.slurm_resume("p5-2") == 0
    assert sorted(harness.nodes()) == ["p5-2"]


def test_other_launch_errors_set_nodes_down_without_group_hold(harness: Harness) -> None:
    # Injected: CreateFleet itself fails (as with a deleted launch template).
    harness.proxy.fail(
        "CreateFleet", "InvalidLaunchTemplateId.NotFound", n=1, message="The specified launch template does not exist"
    )
    assert harness.slurm_resume("p5-[1-2]") == 0
    for n in ("p5-1", "p5-2"):
        st = harness.slurm.node(n)
        assert st["state"].startswith("DOWN")
        assert st["reason"].startswith("gpucluster: InvalidLaunchTemplateId.NotFound")
    assert harness.slurm.node("p5-3")["state"] == "IDLE+CLOUD+POWERED_DOWN"  # no group hold
    assert harness.nodes() == {}


def test_throttling_is_retried_with_the_same_client_token(harness: Harness) -> None:
    # Injected: the first two CreateFleet and the first DescribeInstances answer RequestLimitExceeded.
    harness.proxy.throttle("CreateFleet", 2)
    harness.proxy.throttle("DescribeInstances", 1)
    assert harness.slurm_resume("p5-1") == 0
    reqs = harness.proxy.requests("CreateFleet")
    assert len(reqs) == 3
    assert len({r["ClientToken"] for r in reqs}) == 1  # a retry can never launch twice in real EC2
    assert harness.nodes() == {"p5-1": harness.nodes()["p5-1"]}
    assert len(harness.nodes()["p5-1"]) == 1
    assert not harness.slurm.node("p5-1")["state"].startswith("DOWN")
    log = harness.log_text()
    assert "api CreateFleet attempt=1 error=RequestLimitExceeded" in log
    assert "api CreateFleet attempt=2 error=RequestLimitExceeded" in log


def test_throttling_beyond_max_attempts_fails_the_nodes(harness: Harness) -> None:
    harness.config["api_max_attempts"] = 2  # total attempts, the first included
    harness.proxy.throttle("CreateFleet", 5)
    assert harness.slurm_resume("p5-1") == 0
    assert len(harness.proxy.requests("CreateFleet")) == 2
    st = harness.slurm.node("p5-1")
    assert st["state"].startswith("DOWN") and "RequestLimitExceeded" in st["reason"]
    assert harness.nodes() == {}


def test_untaggable_instance_is_terminated_and_its_node_failed(harness: Harness) -> None:
    # Injected: CreateTags fails (not retryable) for the first instance tagged.
    harness.config["api_concurrency"] = 1
    harness.proxy.fail("CreateTags", "UnauthorizedOperation", n=1)
    assert harness.slurm_resume("p5-[1-2]") == 0
    nodes = harness.nodes()
    assert list(nodes) == ["p5-2"] or list(nodes) == ["p5-1"]
    failed = "p5-1" if "p5-2" in nodes else "p5-2"
    assert "CreateTags.UnauthorizedOperation" in harness.slurm.node(failed)["reason"]
    assert "" not in nodes
    assert Counter(i["State"]["Name"] for i in instances(harness.moto.url, CLUSTER, ("terminated",)))["terminated"] == 1


def test_unknown_nodes_are_set_down(harness: Harness) -> None:
    harness.slurm = type(harness.slurm)(harness.tmp / "slurm2", ["p5-1", "login-1"])
    harness.config["slurm_bin_dir"] = str(harness.slurm.bin_dir)
    assert harness.run("resume", "login-1,p5-1") == 0
    assert harness.slurm.node("login-1")["reason"] == "gpucluster: node not in agent config"
    assert sorted(harness.nodes()) == ["p5-1"]
    ec2_client(harness.moto.url)  # moto still answers
