"""No mass action on one read (docs/slurm.md, "The node agent: no work lost on a crash or a
wrong read"): a node whose instance is missing
from one DescribeInstances answer is powered down only once a second listing, at least
``lifecycle.confirm_seconds`` later, agrees; and never more than the per-pass cap of a group at once: above
it the agent does nothing for those nodes, logs one ``ALERT vanished-over-cap`` line and ``status`` says so.
The agent runs in this process with a stepped clock and a botocore hook that drops instances from its own
DescribeInstances answers."""

from __future__ import annotations

import json

from gpucluster_agents.power import lifecycle
from tests.agents.conftest import Harness
from tests.agents.moto_env import ec2_client
from tests.agents.scenarios import SteppedClock, assert_invariants, hide_instances, in_process


def sixteen_running(h: Harness) -> dict[str, str]:
    """p5-[1-16] resumed, registered and running jobs: node -> instance."""
    assert h.slurm_resume("p5-[1-16]") == 0
    h.slurm.set("p5-[1-16]", "ALLOCATED+CLOUD")
    return {node: ids[0] for node, ids in h.nodes().items()}


def power_downs(h: Harness) -> list[list[str]]:
    return [c for c in h.slurm.updates() if "state=power_down_force" in c]


def maintain(h: Harness, clock: SteppedClock, hidden: set[str] | None = None, times: int = -1) -> list[str]:
    with in_process(h, clock=clock) as agent:
        if hidden:
            hide_instances(agent.ec2.client, lambda iid: iid in hidden, times)
        agent.maintain()
        return agent.status()


def test_n06_one_answer_missing_half_the_instances_powers_nothing_down(harness: Harness) -> None:
    running = sixteen_running(harness)
    half = {running[f"p5-{i}"] for i in range(9, 17)}
    clock = SteppedClock()
    maintain(harness, clock, hidden=half, times=1)  # one partial answer
    assert power_downs(harness) == []
    assert set(json.loads((harness.tmp / "state" / "vanished.json").read_text())) == {f"p5-{i}" for i in range(9, 17)}
    clock.step(120)
    maintain(harness, clock)  # the next listing disagrees: nothing happened, the record is forgotten
    assert power_downs(harness) == []
    assert json.loads((harness.tmp / "state" / "vanished.json").read_text()) == {}
    assert_invariants(harness, running=running)


def test_n06_a_second_listing_too_soon_does_not_confirm(harness: Harness) -> None:
    running = sixteen_running(harness)
    ec2_client(harness.moto.url).terminate_instances(InstanceIds=[running["p5-3"]])  # AWS took it
    clock = SteppedClock()
    maintain(harness, clock)
    clock.step(lifecycle.confirm_seconds(harness.config["orphan_grace_seconds"]) - 5)
    maintain(harness, clock)
    assert power_downs(harness) == []
    clock.step(10)
    maintain(harness, clock)
    assert power_downs(harness) == [["update", "nodename=p5-3", "state=power_down_force", f"reason={lifecycle.VANISHED_REASON}"]]
    del running["p5-3"]
    harness.slurm_suspend("p5-3")
    assert_invariants(harness, running=running)


def test_n06_a_listing_that_keeps_missing_many_stops_at_the_cap_and_says_so(harness: Harness) -> None:
    running = sixteen_running(harness)
    half = {running[f"p5-{i}"] for i in range(9, 17)}
    clock = SteppedClock()
    maintain(harness, clock, hidden=half)
    clock.step(120)
    status = maintain(harness, clock, hidden=half)  # two agreeing listings, but 8 of 16 is over the cap
    assert power_downs(harness) == []
    alerts = [line for line in harness.log_text().splitlines() if "ALERT vanished-over-cap" in line]
    assert len(alerts) == 1
    assert "group=p5 nodes=p5-[9-16] count=8 cap=3" in alerts[0]
    assert any("p5: 8 nodes without an instance" in line and "cap 3" in line for line in status), status
    assert any("state=power_down_force" in line for line in status)  # how an operator releases it by hand
    clock.step(120)
    maintain(harness, clock)  # EC2 lists them again: the stop ends by itself
    assert power_downs(harness) == []
    with in_process(harness, clock=clock) as agent:
        assert not any("without an instance" in line for line in agent.status())
    assert_invariants(harness, running=running)


def test_n06_vanished_nodes_within_the_cap_are_returned(harness: Harness) -> None:
    running = sixteen_running(harness)
    gone = ["p5-4", "p5-5", "p5-6"]  # a spot reclaim of 3 of 16: the cap is max(2, 20 % of 16) = 3
    ec2_client(harness.moto.url).terminate_instances(InstanceIds=[running.pop(n) for n in gone])
    clock = SteppedClock()
    maintain(harness, clock)
    clock.step(120)
    maintain(harness, clock)
    assert power_downs(harness) == [
        ["update", "nodename=p5-[4-6]", "state=power_down_force", f"reason={lifecycle.VANISHED_REASON}"]
    ]
    assert "ALERT" not in harness.log_text()
    harness.slurm_suspend("p5-[4-6]")
    assert_invariants(harness, running=running)


def test_vanished_cap() -> None:
    assert lifecycle.vanished_cap(1) == 2  # a one- or two-node group can lose both
    assert lifecycle.vanished_cap(16) == 3
    assert lifecycle.vanished_cap(1000) == 200


def test_n05_a_listing_that_never_comes_changes_nothing(harness: Harness) -> None:
    # DescribeInstances throttled past botocore's retries: the pass gives up before deciding anything.
    running = sixteen_running(harness)
    harness.proxy.throttle("DescribeInstances", 50)
    harness.proxy.clear()
    harness.config["api_max_attempts"] = 2  # botocore gives up sooner (the review measured 8 attempts, 42 s)
    assert harness.run("maintain") == 0
    harness.config["api_max_attempts"] = 5
    assert "maintain failed" in harness.log_text()
    assert harness.proxy.actions()["TerminateInstances"] == 0 and power_downs(harness) == []
    harness.proxy.throttles.clear()
    clock = SteppedClock()
    maintain(harness, clock)
    clock.step(120)
    maintain(harness, clock)
    assert harness.proxy.actions()["TerminateInstances"] == 0 and power_downs(harness) == []
    assert_invariants(harness, running=running)
