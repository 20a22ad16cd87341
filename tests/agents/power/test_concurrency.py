"""Two agent processes at once never launch twice for one node (the state_dir lock)."""

from __future__ import annotations

from collections import Counter

from gpucluster_agents.power.state import FileLock
from tests.agents.conftest import Harness


def test_two_concurrent_resumes_launch_one_instance_per_node(harness: Harness) -> None:
    # Injected: CreateFleet takes 1 s, so without the lock both processes would launch p5-3 and p5-4.
    harness.proxy.delay("CreateFleet", 1.0)
    harness.slurm.set("p5-[1-6]", "IDLE+CLOUD+POWERING_UP")
    a = harness.spawn("resume", "p5-[1-4]")
    b = harness.spawn("resume", "p5-[3-6]")
    assert a.wait(timeout=60) == 0 and b.wait(timeout=60) == 0
    nodes = harness.nodes()
    assert sorted(nodes) == [f"p5-{i}" for i in range(1, 7)]
    assert all(len(ids) == 1 for ids in nodes.values()), nodes
    sizes = sorted(int(r["TargetCapacitySpecification.TotalTargetCapacity"]) for r in harness.proxy.requests("CreateFleet"))
    assert sizes == [2, 4]  # the second process only launched what the first had not
    log = harness.log_text()
    assert "busy, waiting" in log
    assert Counter(line.split()[1] for line in log.splitlines() if " end resume " in line).total() == 2


def test_lock_timeout_fails_the_nodes_fast(harness: Harness) -> None:
    harness.config["lock_timeout_seconds"] = 1
    (harness.tmp / "state").mkdir(parents=True, exist_ok=True)
    with FileLock(str(harness.tmp / "state" / "agent.lock"), 1):
        harness.slurm.set("p5-1", "IDLE+CLOUD+POWERING_UP")
        assert harness.run("resume", "p5-1") == 0
    assert harness.slurm.node("p5-1")["reason"] == "gpucluster: agent lock timeout"
    assert harness.proxy.actions()["CreateFleet"] == 0
