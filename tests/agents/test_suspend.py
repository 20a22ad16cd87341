"""suspend terminates exactly the named nodes' instances; resume-fail terminates and fails nodes."""

from __future__ import annotations

from tests.agents.conftest import CLUSTER, Harness
from tests.agents.test_orphans import launch_raw


def test_suspend_terminates_exactly_the_named_nodes(harness: Harness) -> None:
    assert harness.slurm_resume("p5-[1-4],g6e-[1-2]") == 0
    before = harness.nodes()
    foreign = launch_raw(
        harness, {"gpucluster:cluster": "othercl", "gpucluster:node-group": "p5", "gpucluster:node-name": "p5-2"}
    )
    harness.proxy.clear()
    assert harness.slurm_suspend("p5-[2-3]") == 0
    after = harness.nodes()
    assert after == {k: v for k, v in before.items() if k not in ("p5-2", "p5-3")}
    (req,) = harness.proxy.requests("TerminateInstances")
    assert sorted(v for k, v in req.items() if k.startswith("InstanceId.")) == sorted(before["p5-2"] + before["p5-3"])
    from tests.agents.moto_env import instances

    assert foreign[0] in {i["InstanceId"] for i in instances(harness.moto.url)}  # another cluster's p5-2
    # suspending nodes that own nothing is a no-op
    harness.proxy.clear()
    assert harness.slurm_suspend("p5-[9-10]") == 0
    assert harness.proxy.actions()["TerminateInstances"] == 0
    assert harness.nodes() == after


def test_resume_fail_terminates_and_sets_down(harness: Harness) -> None:
    assert harness.slurm_resume("p5-1") == 0
    (iid,) = harness.nodes()["p5-1"]
    # Slurm: ResumeTimeout reached for p5-1 (slurmd never registered) and p5-2 (no instance at all)
    harness.slurm.set("p5-[1-2]", "DOWN+CLOUD+POWERED_DOWN", "ResumeTimeout reached")
    assert harness.run("resume-fail", "p5-[1-2]") == 0
    assert harness.nodes() == {}
    r1, r2 = harness.slurm.node("p5-1")["reason"], harness.slurm.node("p5-2")["reason"]
    assert r1 == f"gpucluster: ResumeTimeout, node did not register ({iid})"
    assert r2 == "gpucluster: ResumeTimeout, node did not register (no instance)"
    assert harness.slurm.node("p5-1")["state"].startswith("DOWN")


def test_resume_fail_keeps_the_capacity_reason(harness: Harness) -> None:
    # Injected: no g6e capacity. Slurm later reaches ResumeTimeout for the node the agent set DOWN,
    # overwrites the reason and calls ResumeFailProgram: the agent puts its reason back.
    harness.proxy.capacity("g6e", fulfil=0)
    assert harness.slurm_resume("g6e-1") == 0
    reason = harness.slurm.node("g6e-1")["reason"]
    assert "InsufficientInstanceCapacity" in reason
    harness.slurm.set("g6e-1", "DOWN+CLOUD+POWERED_DOWN", "ResumeTimeout reached")
    assert harness.run("resume-fail", "g6e-1") == 0
    assert harness.slurm.node("g6e-1")["reason"] == reason
    assert CLUSTER not in reason
