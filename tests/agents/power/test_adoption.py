"""Adoption that never kills work (docs/slurm.md, "The node agent: no work lost on a crash or a
wrong read"): what the
next call does with a launch that died at each crash window (the proxy SIGKILLs the agent process), with
Slurm unreadable, with ``names.json`` lost, and with the head node's clock off from EC2's. Every scenario
ends with the four properties of ``scenarios.assert_invariants``."""

from __future__ import annotations

import json

import pytest

from gpucluster_agents.power.sweep import INTERRUPTED_REASON
from tests.agents.conftest import Harness
from tests.agents.contract.test_node_maps import names_file, published, with_maps
from tests.agents.moto_env import instances
from tests.agents.scenarios import SteppedClock, assert_invariants, in_process, waiting_without_instance
from tests.agents.test_orphans import OF_P5, crash, journal, launch_raw

# ---------------------------------------------------------------------------- crash after the map


@pytest.mark.parametrize("registered", ["ALLOCATED+CLOUD", "MIXED+CLOUD+DRAIN", "IDLE+CLOUD", "DOWN+CLOUD+NOT_RESPONDING"])
def test_n01_a_node_that_registered_from_the_map_keeps_its_instance(harness: Harness, registered: str) -> None:
    # SIGKILL right after S3 took the map, before names.json and the journal's end. The node boots from
    # the map, slurmd registers and a job starts before the next agent call: its only instance is adopted.
    with_maps(harness)
    harness.slurm.set("p5-1", "IDLE+CLOUD+POWERING_UP")
    crash(harness, "S3.PutObject", "after", "resume", "p5-1")
    (iid,) = harness.nodes()[""]
    assert published(harness).popitem()[1]["nodes"] == {iid: "p5-1"}
    harness.slurm.set("p5-1", registered, "Not responding" if "NOT_RESPONDING" in registered else None)
    harness.proxy.clear()
    assert harness.run("maintain") == 0
    assert harness.proxy.actions()["TerminateInstances"] == 0
    assert harness.nodes() == {"p5-1": [iid]}
    assert f"decision adopt instance={iid} node=p5-1" in harness.log_text()
    assert_invariants(harness, running={"p5-1": iid}, fleets=0)


# ---------------------------------------------------------------------------- Slurm unreadable


def test_n02_nothing_from_the_journal_is_terminated_while_slurm_cannot_be_read(
    harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    harness.config["api_concurrency"] = 1
    harness.slurm.set("p5-1", "IDLE+CLOUD+POWERING_UP")
    crash(harness, "CreateTags", "before", "resume", "p5-1")
    (iid,) = harness.nodes()[""]
    nodes = harness.slurm.data()["nodes"]
    harness.slurm.set_flag("nodes", "scontrol fails")  # every scontrol show nodes fails
    harness.config["orphan_grace_seconds"] = 0  # the entry is past its grace: it must stay anyway
    harness.proxy.clear()
    for _ in range(2):
        assert harness.run("maintain") == 0
    assert harness.proxy.actions()["TerminateInstances"] == 0
    assert harness.nodes() == {"": [iid]}
    (entry,) = journal(harness)
    assert entry["assignments"] == {iid: "p5-1"}
    assert "Slurm's node states are unavailable" in harness.log_text()
    capsys.readouterr()
    assert harness.run("status") == 0  # what an operator sees meanwhile
    assert f"launch journal: {entry['token']} group=p5 nodes=p5-1" in capsys.readouterr().out
    harness.slurm.set_flag("nodes", nodes)  # slurmctld answers again; the node still waits for its boot
    assert harness.run("maintain") == 0
    assert harness.nodes() == {"p5-1": [iid]}
    (inst,) = instances(harness.moto.url)
    assert harness.slurm.node("p5-1")["addr"] == inst["PrivateIpAddress"]
    assert journal(harness) == []
    assert_invariants(harness, fleets=0)


def test_n02_a_resume_of_the_node_adopts_even_while_slurm_cannot_be_read(harness: Harness) -> None:
    harness.config["api_concurrency"] = 1
    harness.slurm.set("p5-1", "IDLE+CLOUD+POWERING_UP")
    crash(harness, "CreateTags", "before", "resume", "p5-1")
    (iid,) = harness.nodes()[""]
    nodes = harness.slurm.data()["nodes"]
    harness.slurm.set_flag("nodes", "scontrol fails")
    harness.proxy.clear()
    assert harness.run("resume", "p5-1") == 0  # the resumed node wants an instance whatever Slurm shows
    assert harness.nodes() == {"p5-1": [iid]}
    assert harness.proxy.actions()["CreateFleet"] == 0
    harness.slurm.set_flag("nodes", nodes)
    assert_invariants(harness, fleets=0)


# ---------------------------------------------------------------------------- crash after CreateFleet


@pytest.mark.parametrize("maps", [False, True])
def test_n03_a_launch_without_assignments_is_recovered_by_its_token_and_node_list(harness: Harness, maps: bool) -> None:
    # SIGKILL once CreateFleet has answered, before the journal got the instance -> node assignment.
    if maps:
        with_maps(harness)
    harness.slurm.set("p5-[1-2]", "IDLE+CLOUD+POWERING_UP")
    crash(harness, "CreateFleet", "after", "resume", "p5-[1-2]")
    ids = sorted(harness.nodes()[""])
    assert len(ids) == 2
    (entry,) = journal(harness)
    assert entry["assignments"] == {} and entry["nodes"] == ["p5-1", "p5-2"]
    harness.proxy.clear()
    assert harness.run("maintain") == 0
    assert harness.proxy.actions()["TerminateInstances"] == 0
    assert harness.nodes() == {"p5-1": [ids[0]], "p5-2": [ids[1]]}
    by_id = {i["InstanceId"]: i for i in instances(harness.moto.url)}
    for node, iid in (("p5-1", ids[0]), ("p5-2", ids[1])):
        assert harness.slurm.node(node)["addr"] == by_id[iid]["PrivateIpAddress"]
        assert f"decision adopt instance={iid} node={node}" in harness.log_text()
    assert_invariants(harness, fleets=0)


def test_n03_instances_of_nodes_slurm_gave_up_on_are_terminated(harness: Harness) -> None:
    harness.slurm.set("p5-[1-2]", "IDLE+CLOUD+POWERING_UP")
    crash(harness, "CreateFleet", "after", "resume", "p5-[1-2]")
    harness.slurm.set("p5-1", "DOWN+CLOUD+POWERED_DOWN", "ResumeTimeout reached")
    harness.proxy.clear()
    assert harness.run("maintain") == 0
    assert harness.proxy.actions()["TerminateInstances"] == 1
    assert sorted(harness.nodes()) == ["p5-2"]  # one instance adopted by p5-2, the other terminated
    assert "orphan of crashed launch" in harness.log_text()
    assert_invariants(harness, fleets=0)


def test_n03_nodes_whose_launch_never_reached_ec2_are_powered_down_at_once(harness: Harness) -> None:
    # SIGKILL between the journal entry and CreateFleet: nothing was launched. Slurm must hear it from the
    # next call (the nodes are powered down, their jobs requeued), not after ResumeTimeout.
    harness.slurm.set("p5-[1-2]", "IDLE+CLOUD+POWERING_UP")
    harness.slurm.set("p5-3", "IDLE+CLOUD+POWERING_UP")  # another resume's node: not this launch's
    crash(harness, "CreateFleet", "before", "resume", "p5-[1-2]")
    assert harness.nodes() == {}
    harness.proxy.clear()
    assert harness.run("maintain") == 0
    for node in ("p5-1", "p5-2"):
        assert "POWERING_DOWN" in harness.slurm.node(node)["state"]
        assert harness.slurm.node(node)["reason"] == INTERRUPTED_REASON
    assert harness.slurm.node("p5-3")["state"] == "IDLE+CLOUD+POWERING_UP"
    assert harness.proxy.actions()["DescribeInstances"] >= 2  # the listing, then one by the launch token
    harness.slurm.set("p5-3", "IDLE+CLOUD+POWERED_DOWN")
    assert_invariants(harness, fleets=0)


# ---------------------------------------------------------------------------- names.json lost


@pytest.mark.parametrize("damage", ["{torn", "[1, 2]", None])
def test_n08_a_lost_names_file_is_rebuilt_from_the_node_maps(
    harness: Harness, damage: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    with_maps(harness)
    assert harness.slurm_resume("p5-[1-2]") == 0
    named = {e["node"]: iid for iid, e in names_file(harness).items()}
    harness.slurm.set("p5-[1-2]", "ALLOCATED+CLOUD")
    harness.config["orphan_grace_seconds"] = 0  # past any grace
    path = harness.tmp / "state" / "names.json"
    if damage is None:
        path.unlink()
    else:
        path.write_text(damage)
    harness.proxy.clear()
    assert harness.run("maintain") == 0
    assert harness.proxy.actions()["TerminateInstances"] == 0
    assert harness.proxy.actions()["S3.GetObject"] == 1  # one map, both instances
    assert harness.nodes() == {n: [iid] for n, iid in named.items()}  # maintain then tagged them
    aside = sorted(path.parent.glob("names.json.corrupt-*"))
    if damage is None:
        assert aside == []
    else:
        assert [p.read_text() for p in aside] == [damage]
        assert "names.json is unreadable" in harness.log_text()
        capsys.readouterr()
        assert harness.run("status") == 0
        assert f"names: {aside[0]} was unreadable" in capsys.readouterr().out
    assert_invariants(harness, running=named)


def test_n08_an_instance_is_kept_while_its_map_cannot_be_read(harness: Harness) -> None:
    with_maps(harness)
    assert harness.slurm_resume("p5-1") == 0
    (iid,) = names_file(harness)
    harness.slurm.set("p5-1", "ALLOCATED+CLOUD")
    harness.config["orphan_grace_seconds"] = 0
    (harness.tmp / "state" / "names.json").write_text("")
    harness.proxy.fail("S3.GetObject", "SlowDown", n=50)  # S3 keeps answering 503 past botocore's retries
    assert harness.run("maintain") == 0
    assert harness.proxy.actions()["TerminateInstances"] == 0
    assert harness.nodes() == {"": [iid]}
    assert "kept: its node map could not be read" in harness.log_text()
    harness.proxy.failures.clear()
    assert harness.run("maintain") == 0
    assert harness.nodes() == {"p5-1": [iid]}
    assert_invariants(harness, running={"p5-1": iid})


def test_n08_an_untagged_instance_no_map_names_is_still_an_orphan(harness: Harness) -> None:
    with_maps(harness)
    stray = launch_raw(harness, {**OF_P5, "gpucluster:launch-token": "ab" * 16})
    harness.config["orphan_grace_seconds"] = 0
    assert harness.run("maintain") == 0  # first sight
    assert harness.run("maintain") == 0
    assert harness.nodes() == {}
    assert f"decision terminate instance={stray[0]}: orphan without node-name tag" in harness.log_text()
    assert_invariants(harness)


# ---------------------------------------------------------------------------- clocks


def test_n13_orphan_age_is_counted_from_the_agents_first_sight_not_from_ec2s_launch_time(harness: Harness) -> None:
    stray = launch_raw(harness, OF_P5)
    clock = SteppedClock(-600.0)  # the head node's clock 10 min behind EC2's
    with in_process(harness, clock=clock) as agent:
        agent.maintain()
    assert harness.nodes() == {"": stray}  # first sight: within the grace (120 s)
    clock.step(60)
    with in_process(harness, clock=clock) as agent:
        agent.maintain()
    assert harness.nodes() == {"": stray}
    clock.step(61)  # 121 s since the agent first saw it; EC2's launch time is still "in the future"
    with in_process(harness, clock=clock) as agent:
        agent.maintain()
    assert harness.nodes() == {}
    assert_invariants(harness)


def test_n13_a_clock_ahead_of_ec2s_or_stepped_back_never_shortens_the_grace(harness: Harness) -> None:
    stray = launch_raw(harness, OF_P5)
    clock = SteppedClock(3600.0)  # an hour ahead: EC2's launch time looks an hour old
    with in_process(harness, clock=clock) as agent:
        agent.maintain()
    assert harness.nodes() == {"": stray}
    clock.step(-7200)  # stepped back an hour behind: the first sighting lies in the future
    with in_process(harness, clock=clock) as agent:
        agent.maintain()
    assert harness.nodes() == {"": stray}
    assert "clock stepped back" in harness.log_text()
    clock.step(119)
    with in_process(harness, clock=clock) as agent:
        agent.maintain()
    assert harness.nodes() == {"": stray}
    clock.step(2)
    with in_process(harness, clock=clock) as agent:
        agent.maintain()
    assert harness.nodes() == {}


def test_journal_grace_is_clamped_when_the_clock_steps_back(harness: Harness) -> None:
    # A crashed launch's entry is kept orphan_grace_seconds to catch instances DescribeInstances shows
    # late. With the clock stepped back an hour after the crash it must not live an hour longer.
    harness.config["api_concurrency"] = 1
    harness.slurm.set("p5-1", "IDLE+CLOUD+POWERING_UP")
    crash(harness, "CreateTags", "before", "resume", "p5-1")
    (iid,) = harness.nodes()[""]
    clock = SteppedClock(-3600.0)
    with in_process(harness, clock=clock) as agent:
        agent.maintain()
    assert harness.nodes() == {"p5-1": [iid]}
    (entry,) = journal(harness)
    assert abs(float(entry["started"]) - clock()) < 30  # restarted at the agent's now
    clock.step(121)
    with in_process(harness, clock=clock) as agent:
        agent.maintain()
    assert journal(harness) == []
    assert waiting_without_instance(harness) == []
    assert_invariants(harness, fleets=1)


def test_names_book_entries_from_the_future_are_clamped(harness: Harness) -> None:
    with_maps(harness)
    assert harness.slurm_resume("p5-1") == 0
    path = harness.tmp / "state" / "names.json"
    book = json.loads(path.read_text())
    ((iid, entry),) = book.items()
    entry["since"] = float(entry["since"]) + 7200  # written before the clock was stepped back two hours
    path.write_text(json.dumps(book))
    with in_process(harness, clock=SteppedClock()) as agent:
        agent.topology()
    assert float(names_file(harness)[iid]["since"]) <= SteppedClock()()
    harness.slurm.set("p5-1", "IDLE+CLOUD")
    assert harness.run("maintain") == 0  # tags it
    assert harness.nodes() == {"p5-1": [iid]}
