"""The lifecycle fault suite: what AWS or a config change takes away from under the agent (moto, the
fault proxy and the fake scontrol). Every scenario ends with the two properties the agent exists for,
asserted explicitly: no stranded node (a node of a dynamic group with no instance that Slurm can
neither use nor power up) and no unowned instance (one no configured node owns, or a node's second)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpucluster_agents.contract import parse
from gpucluster_agents.power import lifecycle
from gpucluster_agents.power.ec2 import Instance
from gpucluster_agents.power.error_codes import ICE_CODES
from tests.agents.conftest import CLUSTER, Harness
from tests.agents.moto_env import ec2_client, instances
from tests.agents.test_orphans import crash, journal

NOT_FOUND = "InvalidInstanceID.NotFound"


def stranded(h: Harness) -> list[str]:
    """Dynamic nodes of the config with no live instance that Slurm can neither run a job on after a
    power-up nor get back by itself: not powered down or powering down, and not held by the agent
    (a hold in holds.json ends with the node handed back)."""
    holds_path = h.tmp / "state" / "holds.json"
    holds: dict[str, Any] = json.loads(holds_path.read_text())["nodes"] if holds_path.exists() else {}
    live = h.nodes()
    out: list[str] = []
    groups = {g["name"]: g for g in h.config["node_groups"]}
    for name, node in h.slurm.data()["nodes"].items():
        prefix, _, num = name.rpartition("-")
        g = groups.get(prefix)
        if g is None or g.get("mode") == "static" or int(num) > g["max_nodes"] or live.get(name):
            continue
        flags = node["state"].split("+")
        if "POWERED_DOWN" in flags or "POWERING_DOWN" in flags or "POWERING_UP" in flags:
            continue
        if "DOWN" in flags and (node["reason"] or "").startswith("gpucluster") and name in holds:
            continue
        out.append(name)
    return sorted(out)


def unowned(h: Harness) -> list[str]:
    """Live instances of the cluster no configured node owns, or that are a node's second."""
    owners = {g["name"]: g for g in h.config["node_groups"]}
    out: list[str] = []
    seen: set[str] = set()
    for inst in instances(h.moto.url, CLUSTER):
        node = inst["tags"].get("gpucluster:node-name")
        g = owners.get(inst["tags"].get("gpucluster:node-group", ""))
        prefix, _, num = (node or "").rpartition("-")
        if node is None or g is None or prefix != g["name"] or int(num) > g["max_nodes"] or node in seen:
            out.append(inst["InstanceId"])
        seen.add(node or "")
    return sorted(out)


def assert_clean(h: Harness) -> None:
    assert stranded(h) == [], "stranded nodes"
    assert unowned(h) == [], "unowned instances"


def kill_instance(h: Harness, node: str) -> str:
    (iid,) = h.nodes()[node]
    ec2_client(h.moto.url).terminate_instances(InstanceIds=[iid])
    return iid


# ---------------------------------------------------------------------------- vanished instances


@pytest.mark.parametrize(
    "slurm_state, reason",
    [("DOWN+CLOUD+NOT_RESPONDING", "Not responding"), ("ALLOCATED+CLOUD", None), ("IDLE+CLOUD", None)],
)
def test_vanished_instance_is_powered_down_and_returned(harness: Harness, slurm_state: str, reason: str | None) -> None:
    # Injected: AWS takes p5-1's instance away (spot interruption, capacity block end, retirement).
    assert harness.slurm_resume("p5-[1-2]") == 0
    harness.slurm.set("p5-[1-2]", "ALLOCATED+CLOUD")
    kill_instance(harness, "p5-1")
    harness.slurm.set("p5-1", slurm_state, reason)
    assert stranded(harness) == ["p5-1"]  # what the agent used to leave behind
    harness.config["orphan_grace_seconds"] = 0  # two listings, 0 s apart at least (test_vanished: the wait)
    assert harness.run("maintain") == 0
    assert not [c for c in harness.slurm.updates() if "state=power_down_force" in c]  # one listing is not enough
    assert harness.run("maintain") == 0
    node = harness.slurm.node("p5-1")
    assert "POWERING_DOWN" in node["state"] and node["reason"] == lifecycle.VANISHED_REASON
    assert ["update", "nodename=p5-1", "state=power_down_force", f"reason={lifecycle.VANISHED_REASON}"] in harness.slurm.updates()
    assert harness.slurm.node("p5-2")["state"] == "ALLOCATED+CLOUD"  # its instance still runs
    # slurmctld then runs SuspendProgram for it and counts it powered down: ready for the next resume
    assert harness.slurm_suspend("p5-1") == 0
    assert harness.slurm_resume("p5-1") == 0
    assert len(harness.nodes()["p5-1"]) == 1
    assert_clean(harness)


def test_operator_down_and_agent_holds_are_left_alone(harness: Harness) -> None:
    harness.slurm.set("p5-3", "DOWN+CLOUD", "disk replaced by ops")
    harness.slurm.set("p5-4", "DOWN+CLOUD+POWERED_DOWN", "gpucluster: InsufficientInstanceCapacity p5.48xlarge")
    harness.slurm.set("p5-5", "IDLE+CLOUD+POWERING_UP")  # a resume waiting for the lock: no instance yet
    assert harness.run("maintain") == 0
    assert not [c for c in harness.slurm.updates() if "state=power_down_force" in c]
    assert harness.slurm.node("p5-3")["reason"] == "disk replaced by ops"


# ---------------------------------------------------------------------------- shrunk and removed groups


def test_shrunk_group_drains_then_terminates_after_the_grace(harness: Harness) -> None:
    assert harness.slurm_resume("p5-[1,11-12]") == 0
    harness.slurm.set("p5-[1,11-12]", "IDLE+CLOUD")
    harness.slurm.set("p5-11", "ALLOCATED+CLOUD")
    harness.group("p5")["max_nodes"] = 8  # Slurm still has p5-11 and p5-12 until slurm.conf catches up
    assert harness.run("maintain") == 0
    assert sorted(harness.nodes()) == ["p5-1", "p5-11", "p5-12"]  # within the grace
    for n in ("p5-11", "p5-12"):
        assert "DRAIN" in harness.slurm.node(n)["state"] and harness.slurm.node(n)["reason"] == lifecycle.STRAY_REASON
    assert "DRAIN" not in harness.slurm.node("p5-1")["state"]
    harness.config["orphan_grace_seconds"] = 0
    assert harness.run("maintain") == 0
    assert sorted(harness.nodes()) == ["p5-1", "p5-11"]  # p5-11 still runs a job: kept
    harness.slurm.set("p5-11", "IDLE+CLOUD+DRAIN", lifecycle.STRAY_REASON)
    assert harness.run("maintain") == 0
    assert sorted(harness.nodes()) == ["p5-1"]
    assert "decision terminate strays=" in harness.log_text()
    assert_clean(harness)


def test_removed_group_instances_are_found_by_the_cluster_tag(harness: Harness) -> None:
    assert harness.slurm_resume("p5-[1-3],g6e-1") == 0
    harness.slurm.set("p5-[1-3],g6e-1", "IDLE+CLOUD")
    removed = sorted(i for n, ids in harness.nodes().items() if n.startswith("p5-") for i in ids)
    harness.config["node_groups"] = [g for g in harness.config["node_groups"] if g["name"] != "p5"]
    harness.config["orphan_grace_seconds"] = 0
    assert harness.run("maintain") == 0
    assert sorted(harness.nodes()) == ["g6e-1"]
    assert all(f"decision stray instance={i} group=p5" in harness.log_text() for i in removed)
    assert_clean(harness)


def test_renamed_group_with_the_same_node_names_keeps_the_running_job(harness: Harness) -> None:
    # The group is renamed but keeps its node names: the old instance runs a job, so the new group's
    # node is neither powered down as "vanished" nor given a second instance until the job ends.
    assert harness.slurm_resume("p5-1") == 0
    harness.slurm.set("p5-1", "ALLOCATED+CLOUD")
    harness.group("p5")["name"] = "h100"
    harness.group("h100")["node_prefix"] = "p5"
    harness.config["orphan_grace_seconds"] = 0
    assert harness.run("maintain") == 0
    assert not [c for c in harness.slurm.updates() if "state=power_down_force" in c]
    assert "DRAIN" in harness.slurm.node("p5-1")["state"]
    assert len(harness.nodes()["p5-1"]) == 1
    harness.slurm.set("p5-1", "IDLE+CLOUD+DRAIN", lifecycle.STRAY_REASON)
    assert harness.run("maintain") == 0  # the stray goes
    assert harness.run("maintain") == 0  # its node has no instance in a second listing
    assert harness.run("maintain") == 0  # and is returned
    assert harness.nodes() == {} and "POWERING_DOWN" in harness.slurm.node("p5-1")["state"]
    harness.group("h100")["name"] = "p5"  # the checks below read the group by its prefix
    del harness.group("p5")["node_prefix"]
    assert_clean(harness)


def test_strays_are_kept_while_slurm_is_unreadable(harness: Harness) -> None:
    assert harness.slurm_resume("p5-1") == 0
    harness.config["node_groups"] = [g for g in harness.config["node_groups"] if g["name"] != "p5"]
    harness.config["orphan_grace_seconds"] = 0
    harness.slurm.set_flag("nodes", "not-a-dict")  # scontrol show nodes fails
    assert harness.run("maintain") == 0
    assert len(instances(harness.moto.url, CLUSTER)) == 1
    assert "terminating nothing" in harness.log_text()
    ec2_client(harness.moto.url).terminate_instances(InstanceIds=[i["InstanceId"] for i in instances(harness.moto.url)])


def test_split_strays_leaves_other_owners_alone() -> None:
    from datetime import datetime, timezone

    cfg = parse(
        {
            "cluster_name": "c",
            "region": "us-east-1",
            "node_groups": [
                {
                    "name": "p5",
                    "max_nodes": 2,
                    "instance_type": "p5.48xlarge",
                    "launch_template_id": "lt-1",
                    "subnet_ids": ["subnet-1"],
                }
            ],
        }
    )
    t = datetime.now(timezone.utc)

    def inst(iid: str, **tags: str) -> Instance:
        return Instance(
            iid, "running", t, None, "p5.48xlarge", {k.replace("_", ":", 1).replace("_", "-"): v for k, v in tags.items()}
        )

    a = inst("i-a", gpucluster_node_group="p5", gpucluster_node_name="p5-2", gpucluster_launch_token="t")
    b = inst("i-b", gpucluster_node_group="p5", gpucluster_node_name="p5-3", gpucluster_launch_token="t")
    c = inst("i-c", gpucluster_node_group="old", gpucluster_node_name="old-1", gpucluster_launch_token="t")
    d = inst("i-d", gpucluster_node_group="cpu")  # a plain Auto Scaling group of the cluster
    mine, strays = lifecycle.split_strays(cfg, [a, b, c, d])
    assert [i.id for i in mine] == ["i-a"] and [i.id for i in strays] == ["i-b", "i-c"]


# ---------------------------------------------------------------------------- NotFound after launch


def test_not_found_right_after_launch_is_retried_not_read_as_gone(harness: Harness) -> None:
    # Injected: CreateTags answers NotFound until it gives up; TerminateInstances then answers NotFound
    # twice too (the correlated eventual-consistency case): the instance must still be terminated.
    harness.proxy.fail("CreateTags", NOT_FOUND, n=6)
    harness.proxy.fail("TerminateInstances", NOT_FOUND, n=2)
    assert harness.slurm_resume("p5-1") == 0
    log = harness.log_text()
    assert "already gone" not in log
    assert "TerminateInstances: InvalidInstanceID.NotFound (eventual consistency), retry 2" in log
    assert harness.nodes() == {}
    assert harness.slurm.node("p5-1")["reason"].endswith("terminated")
    assert journal(harness) == []
    assert_clean(harness)


def test_not_found_to_the_end_keeps_the_journal_for_the_next_call(harness: Harness) -> None:
    harness.proxy.fail("CreateTags", NOT_FOUND, n=6)
    harness.proxy.fail("TerminateInstances", NOT_FOUND, n=6)
    assert harness.slurm_resume("p5-1") == 0
    assert "already gone" not in harness.log_text()
    assert "not terminated yet" in harness.slurm.node("p5-1")["reason"]
    (entry,) = journal(harness)
    assert len(harness.nodes()[""]) == 1  # still running, still covered by its journal entry
    assert harness.run("maintain") == 0
    assert harness.nodes() == {}
    assert str(entry["token"]) in harness.log_text()
    assert_clean(harness)


# ---------------------------------------------------------------------------- corrupted journal


def test_corrupted_journal_entry_is_quarantined_and_its_instance_adopted(harness: Harness) -> None:
    harness.config["api_concurrency"] = 1
    harness.slurm.set("p5-1", "IDLE+CLOUD+POWERING_UP")
    crash(harness, "CreateTags", "before", "resume", "p5-1")
    (iid,) = harness.nodes()[""]
    (path,) = sorted((harness.tmp / "state" / "journal").glob("*.json"))
    path.write_text(path.read_text()[:20])  # torn write
    assert harness.run("maintain") == 0
    assert harness.nodes() == {"p5-1": [iid]}
    assert harness.slurm.node("p5-1")["addr"] == instances(harness.moto.url, CLUSTER)[0]["PrivateIpAddress"]
    (bad,) = [p for p in (harness.tmp / "state" / "journal" / "quarantine").iterdir() if not p.name.endswith(".reason")]
    assert len(bad.read_text()) == 20  # the torn entry, kept as it was for a person to read
    assert Path(str(bad) + ".reason").exists()
    log = harness.log_text()
    assert "quarantined as" in log and f"decision adopt instance={iid} node=p5-1" in log
    assert_clean(harness)


def test_corrupted_journal_entry_of_a_node_slurm_gave_up_on_is_terminated(harness: Harness) -> None:
    harness.config["api_concurrency"] = 1
    harness.slurm.set("p5-1", "IDLE+CLOUD+POWERING_UP")
    crash(harness, "CreateTags", "before", "resume", "p5-1")
    (path,) = sorted((harness.tmp / "state" / "journal").glob("*.json"))
    path.write_text("{")
    harness.slurm.set("p5-1", "DOWN+CLOUD+POWERED_DOWN", "ResumeTimeout reached")
    assert harness.run("maintain") == 0
    assert harness.nodes() == {}
    assert_clean(harness)


# ---------------------------------------------------------------------------- capacity codes


@pytest.mark.parametrize("code", sorted(ICE_CODES - {"InsufficientInstanceCapacity"}))
def test_parallelcluster_capacity_codes_hold_the_group(harness: Harness, code: str) -> None:
    harness.proxy.capacity("g6e", fulfil=0, code=code, calls=1)
    assert harness.slurm_resume("g6e-1") == 0
    assert harness.slurm.node("g6e-1")["reason"].startswith(f"gpucluster: {code}")
    holds = json.loads((harness.tmp / "state" / "holds.json").read_text())
    assert holds["groups"]["g6e"]["code"] == code
    assert "DOWN" in harness.slurm.node("g6e-2")["state"]  # idle nodes of the group go DOWN too: jobs fail over
    assert_clean(harness)


# ---------------------------------------------------------------------------- boot failures, concurrency


def test_repeated_boot_failure_never_strands_a_node_or_an_instance(harness: Harness) -> None:
    # The lifecycle part only (protected mode is another module's): a node that never registers goes
    # ResumeTimeout -> resume-fail -> held -> handed back, cycle after cycle, leaking nothing.
    harness.config["failure_hold_seconds"] = 0
    for _cycle in range(3):
        assert harness.slurm_resume("p5-1") == 0
        assert len(harness.nodes()["p5-1"]) == 1
        harness.slurm.set("p5-1", "DOWN+CLOUD+POWERED_DOWN", "ResumeTimeout reached")
        assert harness.run("resume-fail", "p5-1") == 0
        assert harness.nodes() == {}
        assert harness.run("maintain") == 0  # the hold ends: the node is handed back
        assert harness.slurm.node("p5-1")["reason"] is None
        harness.slurm.set("p5-1", "IDLE+CLOUD+POWERED_DOWN")
        assert_clean(harness)


def test_concurrent_resumes_and_maintain_leave_nothing_behind(harness: Harness) -> None:
    harness.proxy.delay("CreateFleet", 0.5)
    harness.slurm.set("p5-[1-6],g6e-[1-2]", "IDLE+CLOUD+POWERING_UP")
    procs = [harness.spawn("resume", "p5-[1-4]"), harness.spawn("maintain"), harness.spawn("resume", "p5-[3-6],g6e-[1-2]")]
    assert all(p.wait(timeout=90) == 0 for p in procs)
    nodes = harness.nodes()
    assert sorted(nodes) == sorted([f"p5-{i}" for i in range(1, 7)] + ["g6e-1", "g6e-2"])
    assert_clean(harness)
