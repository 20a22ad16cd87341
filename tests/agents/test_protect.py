"""Protected mode, against moto (behind the fault proxy) and the fake scontrol: after N consecutive boot
failures (ResumeFailProgram for nodes that had an instance) a dynamic node group stops launching, says
so (log, the nodes' reason, ``status``), and keeps its nodes DOWN across hold periods, until an operator
runs ``clear-protect`` or a node of the group registers."""

from __future__ import annotations

import time

import pytest

from tests.agents.conftest import Harness

PROTECTED = "gpucluster: ProtectedMode p5.48xlarge: node group p5 stopped launching after 2 boot failures"


def boot_fails(harness: Harness, nodes: str) -> None:
    """Slurm resumes the nodes, the agent launches them, they never register: ResumeTimeout."""
    assert harness.slurm_resume(nodes) == 0
    assert harness.run("resume-fail", nodes) == 0


def test_group_is_protected_after_n_boot_failures_until_cleared(harness: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    harness.config["repair"] = {"protect_after_failures": 2}
    boot_fails(harness, "p5-1")
    assert "PROTECTED" not in capsys.readouterr().out
    boot_fails(harness, "p5-2")
    fleets = harness.proxy.actions()["CreateFleet"]
    assert fleets == 2
    assert "decision protect group=p5: 2 consecutive boot failures" in harness.log_text()
    # the group's idle nodes go DOWN with the reason, so jobs go to other partitions; g6e is untouched
    for n in ("p5-3", "p5-16"):
        node = harness.slurm.node(n)
        assert node["state"].startswith("DOWN") and node["reason"].startswith(PROTECTED), node
    assert harness.slurm.node("g6e-1")["state"] == "IDLE+CLOUD+POWERED_DOWN"
    # a resume of the group fails fast without calling EC2
    assert harness.slurm_resume("p5-3") == 0
    assert harness.proxy.actions()["CreateFleet"] == fleets
    assert harness.slurm.node("p5-3")["state"].startswith("DOWN") and "ProtectedMode" in harness.slurm.node("p5-3")["reason"]
    # holds that would have ended long ago are renewed: the nodes stay DOWN
    harness.config["failure_hold_seconds"] = 0
    assert harness.run("maintain") == 0 and harness.run("maintain") == 0
    assert all(harness.slurm.node(f"p5-{i}")["state"].startswith("DOWN") for i in range(1, 17))
    assert harness.run("status") == 0
    assert "group p5: PROTECTED after 2 boot failures (nodes p5-1,p5-2)" in capsys.readouterr().out

    # the operator fixed the image and clears it: the nodes are handed back and the group launches again
    assert harness.run("clear-protect", "p5") == 0
    assert all(harness.slurm.node(f"p5-{i}")["state"] == "IDLE+CLOUD+POWERED_DOWN" for i in range(4, 17))
    # the nodes Slurm was still waiting for are powered down (slurmctld then runs the SuspendProgram)
    assert all(harness.slurm.node(f"p5-{i}")["state"] == "IDLE+CLOUD+POWERING_DOWN" for i in range(1, 4))
    assert harness.slurm_suspend("p5-[1-3]") == 0
    assert harness.run("status") == 0
    assert "no node group is protected" in capsys.readouterr().out
    assert harness.slurm_resume("p5-3") == 0
    assert harness.proxy.actions()["CreateFleet"] == fleets + 1 and "p5-3" in harness.nodes()


def test_a_registered_node_resets_the_count(harness: Harness) -> None:
    harness.config["repair"] = {"protect_after_failures": 2}
    boot_fails(harness, "p5-1")
    time.sleep(1.1)  # EC2 launch times have one-second resolution
    assert harness.slurm_resume("p5-2") == 0
    harness.slurm.set("p5-2", "IDLE+CLOUD")  # it registered
    assert harness.run("maintain") == 0
    assert "decision protect-end group=p5: node p5-2 registered after the last boot failure" in harness.log_text()
    boot_fails(harness, "p5-3")  # one failure after a success: not protected
    assert "decision protect group=p5" not in harness.log_text()
    assert harness.slurm_resume("p5-4") == 0
    assert "p5-4" in harness.nodes()


def test_launch_failures_are_not_boot_failures_and_zero_turns_it_off(harness: Harness) -> None:
    harness.config["repair"] = {"protect_after_failures": 1}
    # no capacity: the node never had an instance, so its ResumeTimeout is no boot failure
    harness.proxy.capacity("p5", fulfil=0)
    assert harness.slurm_resume("p5-1") == 0
    assert harness.run("resume-fail", "p5-1") == 0
    assert "boot-failure" not in harness.log_text()
    harness.config["repair"] = {"protect_after_failures": 0}
    boot_fails(harness, "g6e-1")
    boot_fails(harness, "g6e-2")
    assert "decision protect group" not in harness.log_text()
