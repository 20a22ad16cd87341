"""Holds that reach Slurm, launches that stop after insufficient capacity, errors after a good launch and
holds across clock steps (docs/slurm.md, "The node agent: no mass action on one signal"), against moto behind the fault proxy
and the fake scontrol. Each scenario ends with no running job killed (a node with an instance is never
set DOWN), no node stranded, no instance unowned and no double launch (the harness checks the last two
after every passing test)."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from tests.agents.conftest import Harness
from tests.agents.power.test_faults import assert_clean


def holds(harness: Harness) -> dict[str, Any]:
    return json.loads((harness.tmp / "state" / "holds.json").read_text())


def downs(harness: Harness, node: str) -> list[list[str]]:
    return [u for u in harness.slurm.updates() if u[1] == f"nodename={node}" and "state=down" in u]


def assert_no_launched_node_down(harness: Harness) -> None:
    """No node that has an instance is DOWN (a DOWN node with a job kills the job)."""
    for node in harness.nodes():
        assert not harness.slurm.node(node)["state"].startswith("DOWN"), (node, harness.slurm.node(node))


# ---------------------------------------------------------------------------- insufficient capacity
def test_insufficient_capacity_fails_the_groups_remaining_batches_without_calling_ec2(harness: Harness) -> None:
    # Injected: 6 nodes in batches of 2; the first CreateFleet for p5 launches 1 of 2 and reports ICE.
    harness.config["max_instances_per_fleet"] = 2
    harness.proxy.capacity("p5", fulfil=1)
    assert harness.slurm_resume("p5-[1-6],g6e-1") == 0
    p5_fleets = [r for r in harness.proxy.requests("CreateFleet") if "p5" in r.values()]
    assert len(p5_fleets) == 1, "CreateFleet called again for a group that just answered insufficient capacity"
    assert sorted(harness.nodes()) == ["g6e-1", "p5-1"]  # another group's launch is not affected
    for n in ("p5-2", "p5-3", "p5-4", "p5-5", "p5-6"):
        node = harness.slurm.node(n)
        assert node["state"].startswith("DOWN") and node["reason"].startswith(
            "gpucluster: InsufficientInstanceCapacity p5.48xlarge"
        )
    assert "decision skip-launch group=p5 nodes=p5-[3-6]: insufficient capacity earlier in this call" in harness.log_text()
    assert_no_launched_node_down(harness)
    harness.slurm.set("p5-[2-6]", "DOWN+CLOUD+POWERED_DOWN", harness.slurm.node("p5-2")["reason"])  # ResumeTimeout later
    assert_clean(harness)


# ---------------------------------------------------------------------------- a hold Slurm missed
def test_a_hold_slurm_did_not_get_is_applied_on_the_next_pass(harness: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    # Injected: insufficient capacity while slurmctld is away (every scontrol call but hostnames fails).
    harness.proxy.capacity("p5", fulfil=0)
    harness.slurm.set("p5-1", "ALLOCATED+CLOUD+POWERING_UP")  # a job waits for this node to boot
    harness.slurm.set_flag("unreachable", True)
    assert harness.run("resume", "p5-1") == 0
    assert harness.nodes() == {}
    assert harness.slurm.node("p5-1")["state"] == "ALLOCATED+CLOUD+POWERING_UP"  # Slurm never heard of the ICE
    recorded = holds(harness)
    assert recorded["nodes"]["p5-1"]["applied"] is False and "p5" in recorded["groups"]
    assert harness.run("status") == 0  # what an operator sees meanwhile
    out = capsys.readouterr().out
    assert re.search(r"group p5: held \d+s more \(InsufficientInstanceCapacity\)", out), out
    assert "not in Slurm yet (scontrol failed; sent again every call): p5-1" in out

    # slurmctld is back: the next maintain pass (a timer, every minute) sets the node DOWN with the reason,
    # so Slurm requeues the job at once instead of waiting out ResumeTimeout
    harness.slurm.set_flag("unreachable", False)
    assert harness.run("maintain") == 0
    node = harness.slurm.node("p5-1")
    assert node["state"].startswith("DOWN") and node["reason"].startswith("gpucluster: InsufficientInstanceCapacity p5.48xlarge")
    assert harness.slurm.node("p5-9")["state"] == "DOWN+CLOUD+POWERED_DOWN"  # the group's idle nodes too
    assert holds(harness)["nodes"]["p5-1"]["applied"] is True
    assert "decision hold-reapply nodes=p5-1" in harness.log_text()
    # once Slurm has it, nothing is sent again
    assert harness.run("maintain") == 0
    assert len(downs(harness, "p5-1")) == 2  # the one that failed, the one that worked
    assert harness.proxy.actions()["CreateFleet"] == 1
    assert_clean(harness)  # DOWN under a hold that ends with the node handed back: not stranded


def test_a_failed_down_is_kept_until_slurm_answers_again(harness: Harness) -> None:
    harness.proxy.capacity("p5", fulfil=0)
    harness.slurm.set("p5-1", "IDLE+CLOUD+POWERING_UP")
    harness.slurm.set_flag("unreachable", True)
    assert harness.run("resume", "p5-1") == 0
    assert harness.run("maintain") == 0  # still away (no node states to act on): kept as not applied
    assert holds(harness)["nodes"]["p5-1"]["applied"] is False
    assert len(downs(harness, "p5-1")) == 1
    harness.slurm.set_flag("unreachable", False)
    assert harness.run("maintain") == 0
    assert harness.slurm.node("p5-1")["state"].startswith("DOWN")


def test_a_hold_an_operator_undid_is_not_forced_again(harness: Harness) -> None:
    harness.proxy.capacity("p5", fulfil=0)
    assert harness.slurm_resume("p5-1") == 0
    assert harness.slurm.node("p5-2")["state"] == "DOWN+CLOUD+POWERED_DOWN"
    harness.slurm.set("p5-2", "IDLE+CLOUD+POWERED_DOWN")  # scontrol update nodename=p5-2 state=resume
    before = len(harness.slurm.updates())
    assert harness.run("maintain") == 0
    assert harness.slurm.node("p5-2")["state"] == "IDLE+CLOUD+POWERED_DOWN"
    assert "p5-2" not in holds(harness)["nodes"]
    assert not [u for u in harness.slurm.updates()[before:] if "nodename=p5-2" in u[1]]


def test_a_hold_that_ends_while_slurm_never_got_it_powers_the_node_down(harness: Harness) -> None:
    harness.config["insufficient_capacity_hold_seconds"] = 1
    harness.proxy.capacity("p5", fulfil=0)
    harness.slurm.set("p5-1", "IDLE+CLOUD+POWERING_UP")
    harness.slurm.set_flag("unreachable", True)
    assert harness.run("resume", "p5-1") == 0
    time.sleep(1.1)
    harness.slurm.set_flag("unreachable", False)
    assert harness.run("maintain") == 0
    # Slurm waited for a boot that never comes: power_down_force returns the node at once
    assert ["update", "nodename=p5-1", "state=power_down_force"] in harness.slurm.updates()
    assert holds(harness) == {"groups": {}, "nodes": {}}


# ---------------------------------------------------------------------------- errors after a launch
def test_a_topology_failure_after_a_good_launch_never_sets_the_launched_nodes_down(harness: Harness) -> None:
    # Injected: every DescribeInstances after the first two (inventory, the launch's own) is throttled
    # past the retries: the topology refresh after the launch fails.
    harness.config["topology_conf"] = str(harness.tmp / "topology.conf")
    harness.config["api_max_attempts"] = 2
    harness.proxy.throttle("DescribeInstances", 100, skip=2)
    assert harness.slurm_resume("p5-[1-2]") == 0
    assert sorted(harness.nodes()) == ["p5-1", "p5-2"]
    for n in ("p5-1", "p5-2"):
        node = harness.slurm.node(n)
        assert not node["state"].startswith("DOWN") and node["addr"], node
    assert "topology: refresh failed" in harness.log_text()
    assert not [u for u in harness.slurm.updates() if "state=down" in u]
    assert_clean(harness)


def test_an_error_in_resume_sets_down_only_the_nodes_without_an_instance(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Injected: the agent fails after the first group's launch (a bug, or an API error nothing catches).
    from gpucluster_agents import agent as agent_module

    real_launch = agent_module.launch
    calls: list[str] = []

    def launch_then_fail(*args: Any, **kwargs: Any) -> int:
        calls.append(args[2].name)
        if len(calls) > 1:
            raise RuntimeError("injected")
        return real_launch(*args, **kwargs)

    monkeypatch.setattr(agent_module, "launch", launch_then_fail)
    assert harness.slurm_resume("g6e-1,p5-1") == 0
    assert sorted(harness.nodes()) == ["g6e-1"]
    assert harness.slurm.node("p5-1")["reason"] == "gpucluster: agent error, see agent log"
    assert not harness.slurm.node("g6e-1")["state"].startswith("DOWN")


# ---------------------------------------------------------------------------- clock steps
def test_a_hold_set_while_the_clock_ran_an_hour_fast_ends_on_time(harness: Harness) -> None:
    real = time.time()
    harness.proxy.capacity("p5", fulfil=0, calls=1)
    harness.now = real + 3600  # the head node's clock is an hour fast
    assert harness.slurm_resume("p5-1") == 0
    assert harness.slurm.node("p5-2")["state"] == "DOWN+CLOUD+POWERED_DOWN"
    harness.now = real  # NTP steps it back
    assert harness.run("maintain") == 0
    assert "p5" in holds(harness)["groups"]  # the hold still has its 600 s to run
    assert holds(harness)["groups"]["p5"]["until"] <= real + 600
    harness.now = real + 601
    assert harness.run("maintain") == 0
    assert holds(harness) == {"groups": {}, "nodes": {}}
    assert harness.slurm.node("p5-2")["state"] == "IDLE+CLOUD+POWERED_DOWN"
    assert harness.slurm.node("p5-1")["state"] == "IDLE+CLOUD+POWERING_DOWN"  # handed back with power_down_force
    assert_clean(harness)


def test_fault_clock_step_hold(harness: Harness) -> None:
    """A 10-minute capacity hold whose clock NTP steps back 11 minutes, 9 minutes in, still ends 10 minutes after it
    began by the boot clock (it used to start again at the step: 19 minutes in all)."""
    real = time.time()
    harness.now, harness.boot = real, 1000.0
    harness.proxy.capacity("p5", fulfil=0, calls=1)
    assert harness.slurm_resume("p5-1") == 0
    assert holds(harness)["groups"]["p5"]["seconds"] == 600
    assert harness.slurm.node("p5-2")["state"] == "DOWN+CLOUD+POWERED_DOWN"
    harness.now, harness.boot = real + 540 - 660, 1540.0  # 9 minutes on, the clock is stepped back 11 minutes
    assert harness.run("maintain") == 0
    harness.now, harness.boot = real - 120 + 59, 1599.0  # 9 min 59 s after the hold began: still held
    assert harness.run("maintain") == 0
    assert "p5" in holds(harness)["groups"] and harness.slurm.node("p5-2")["state"] == "DOWN+CLOUD+POWERED_DOWN"
    harness.now, harness.boot = real - 120 + 61, 1601.0  # 10 min 1 s: over
    assert harness.run("maintain") == 0
    assert holds(harness) == {"groups": {}, "nodes": {}}
    assert harness.slurm.node("p5-2")["state"] == "IDLE+CLOUD+POWERED_DOWN"
    assert harness.slurm.node("p5-1")["state"] == "IDLE+CLOUD+POWERING_DOWN"  # handed back with power_down_force
    assert "clock stepped -660s since hold group=p5 began" in harness.log_text()
    assert_clean(harness)


@pytest.mark.parametrize(
    ("anchor", "now", "since", "until"),
    [
        ({"id": "b1", "at": 100.0}, 5300.0, 5000.0, 5600.0),  # 300 s on, no step: unchanged
        ({"id": "b1", "at": 100.0}, 4700.0, 4400.0, 5000.0),  # stepped back 600 s: the hold moves with it
        ({"id": "b1", "at": 100.0}, 9300.0, 9000.0, 9600.0),  # stepped forward 4000 s: not ended early
        ({"id": "b0", "at": 100.0}, 4700.0, 5000.0, 5600.0),  # set before a reboot: left to the clamp
        ({"id": "b1", "at": 900.0}, 4700.0, 5000.0, 5600.0),  # an anchor ahead of the boot clock: the clamp
        (None, 4700.0, 5000.0, 5600.0),  # from an older agent: the clamp
    ],
)
def test_holds_follow_the_boot_clock(anchor: dict[str, Any] | None, now: float, since: float, until: float) -> None:
    from gpucluster_agents.power.state import anchor_holds, follow_boot_clock

    hold = {"since": 5000.0, "until": 5600.0, "seconds": 600, **({"boot": anchor} if anchor else {})}
    doc: dict[str, dict[str, dict[str, Any]]] = {"groups": {"p5": hold}, "nodes": {}}
    follow_boot_clock(doc, now, ("b1", 400.0))  # the boot clock: 400 s since boot
    assert (hold["since"], hold["until"]) == (since, until)
    anchor_holds(doc, now, ("b1", 400.0))
    assert hold["boot"] == {"id": "b1", "at": 400.0 - max(0.0, now - since)}  # anchored in this boot


@pytest.mark.parametrize(
    ("hold", "now", "until"),
    [
        ({"since": 5000.0, "until": 5600.0, "seconds": 600}, 1000.0, 1600.0),  # clock stepped back: clamped
        ({"since": 900.0, "until": 1500.0, "seconds": 600}, 1000.0, 1500.0),  # in range: unchanged
        ({"since": 0.0, "until": 600.0, "seconds": 600}, 1000.0, 600.0),  # over: unchanged (ends now)
        ({"since": 5000.0, "until": 5600.0}, 1000.0, 1600.0),  # from an older agent: the longest hold
    ],
)
def test_clamp_hold(hold: dict[str, Any], now: float, until: float) -> None:
    from gpucluster_agents.power.holds import clamp_hold

    clamp_hold(hold, now, 600)
    assert hold["until"] == until and hold["since"] <= now
