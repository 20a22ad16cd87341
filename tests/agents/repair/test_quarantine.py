"""Quarantine and replacement in the maintenance pass, against moto (behind the fault proxy) and the fake
scontrol: the health program's drains (reason ``gpucluster: … (reboot|replace)``) are acted on once the
node is idle, an operator's drain never; dynamic nodes are powered down so the next resume gets new
hardware, static nodes are marked Unhealthy in their (moto) Auto Scaling group, reboot-class faults get
one RebootInstances and a recurrence is replaced; never more than the group's share at once."""

from __future__ import annotations

from typing import Any

import pytest

from gpucluster_agents.contract.repair import Repair
from gpucluster_agents.repair.quarantine import drain_action, share_limit
from tests.agents.conftest import CLUSTER, FakeSlurm, Harness
from tests.agents.moto_env import REGION, instances

REPLACE = "gpucluster: ecc uncorrected volatile errors 2 (replace)"
REBOOT = "gpucluster: row-remap pending 1 (reboot)"
ADMIN = "bad fan, ticket 4711"


@pytest.mark.parametrize(
    ("reason", "action"),
    [
        (REPLACE, "replace"),
        (REBOOT, "reboot"),
        ("gpucluster: xid 79 GPU has fallen off the bus (replace) (+1 more)", "replace"),
        ("gpucluster: row-remap pending (reboot) (+2 more)", "reboot"),
        ("gpucluster: pcie gen 3 < 5", "replace"),  # no action named: replace
        (ADMIN, None),  # an operator's drain
        ("Not responding", None),
        (None, None),
        ("gpucluster: rebooted i-0abc for: row-remap pending (reboot)", None),  # the agent's own marker
    ],
)
def test_drain_action(reason: str | None, action: str | None) -> None:
    assert drain_action(reason) == action


def test_share_limit_is_a_share_of_the_running_nodes_and_at_least_one() -> None:
    assert share_limit(Repair(), 16) == 1 and share_limit(Repair(), 24) == 2 and share_limit(Repair(), 1) == 1
    assert share_limit(Repair(max_share_percent=50), 16) == 8


def up(harness: Harness, nodes: str) -> dict[str, str]:
    """Resume ``nodes`` through the agent and let them register (IDLE); node -> instance id."""
    assert harness.slurm_resume(nodes) == 0
    harness.slurm.set(nodes, "IDLE+CLOUD")
    return {n: ids[0] for n, ids in harness.nodes().items()}


def power_downs(harness: Harness) -> list[str]:
    return [c[1].split("=", 1)[1] for c in harness.slurm.updates() if "state=power_down_force" in c]


def test_dynamic_node_drained_by_health_is_powered_down_when_idle_and_comes_back_on_new_hardware(
    harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    before = up(harness, "p5-[1-3]")
    harness.slurm.set("p5-1", "MIXED+CLOUD+DRAIN", REPLACE)  # a job still runs: wait
    harness.slurm.set("p5-2", "IDLE+CLOUD+DRAIN", ADMIN)  # an operator's drain: never touched
    assert harness.run("maintain") == 0
    assert power_downs(harness) == []
    assert "waiting for its jobs to end" in harness.log_text()

    harness.slurm.set("p5-1", "IDLE+CLOUD+DRAIN", REPLACE)  # the job ended
    assert harness.run("maintain") == 0
    assert power_downs(harness) == ["p5-1"]
    assert f"decision quarantine node=p5-1 group=p5 mode=dynamic action=replace instance={before['p5-1']}" in harness.log_text()
    # slurmctld runs the SuspendProgram; with idle_on_node_suspend the node is idle~ again (reason gone)
    assert harness.slurm_suspend("p5-1") == 0
    assert "p5-1" not in harness.nodes()
    assert harness.run("maintain") == 0
    assert "decision quarantine-end node=p5-1 action=replace" in harness.log_text()
    # Slurm forgot the reason; the agent's status still shows the verdict
    assert harness.run("status") == 0
    out = capsys.readouterr().out
    assert f"p5-1 action=replace instance={before['p5-1']} outcome='replaced' verdict='{REPLACE}'" in out
    # the next job resumes it on a new instance
    after = up(harness, "p5-1")
    assert after["p5-1"] != before["p5-1"]
    assert harness.slurm.node("p5-2") == {
        "state": "IDLE+CLOUD+DRAIN",
        "reason": ADMIN,
        "addr": harness.slurm.node("p5-2")["addr"],
    }
    assert harness.nodes()["p5-2"] == [before["p5-2"]]
    assert harness.proxy.actions()["RebootInstances"] == 0


def test_never_more_than_the_share_of_a_group_at_once(harness: Harness) -> None:
    # 3 of 3 running nodes drained would trip the brake, and a replacement counts for a while after it
    # ended: both off here, test_brake.py has them
    harness.config["repair"] = {"brake_percent": 0, "share_window_seconds": 0}
    up(harness, "p5-[1-3]")
    harness.slurm.set("p5-[1-3]", "IDLE+CLOUD+DRAIN", REPLACE)
    assert harness.run("maintain") == 0
    # 10 % of 3 running nodes, at least one
    assert power_downs(harness) == ["p5-1"]
    assert harness.log_text().count("decision quarantine-defer") == 2
    assert harness.run("maintain") == 0  # p5-1 still powering down: nothing more
    assert power_downs(harness) == ["p5-1"]
    assert harness.slurm_suspend("p5-1") == 0
    assert harness.run("maintain") == 0  # p5-1 done: the next one
    assert power_downs(harness) == ["p5-1", "p5-2"]
    # a larger share lets the rest go together
    harness.config["repair"] = {"max_share_percent": 100, "brake_percent": 0, "share_window_seconds": 0}
    assert harness.run("maintain") == 0
    assert power_downs(harness) == ["p5-1", "p5-2", "p5-3"]
    assert harness.slurm_suspend("p5-[2-3]") == 0


def test_reboot_class_fault_gets_one_reboot_and_a_recurrence_is_replaced(harness: Harness) -> None:
    harness.config["repair"] = {"reboot_settle_seconds": 0}
    before = up(harness, "p5-1")
    harness.slurm.set("p5-1", "IDLE+CLOUD+DRAIN", REBOOT)
    assert harness.run("maintain") == 0
    assert [r["InstanceId.1"] for r in harness.proxy.requests("RebootInstances")] == [before["p5-1"]]
    node = harness.slurm.node("p5-1")
    assert "DRAIN" in node["state"] and node["reason"].startswith(f"gpucluster: rebooted {before['p5-1']} for: row-remap")
    # back and not drained again by the health program: handed back to Slurm
    assert harness.run("maintain") == 0
    assert harness.slurm.node("p5-1")["state"] == "IDLE+CLOUD" and harness.slurm.node("p5-1")["reason"] is None
    assert "outcome=rebooted" in harness.log_text()
    # the same fault again within the window: no second reboot, the node is replaced
    harness.slurm.set("p5-1", "IDLE+CLOUD+DRAIN", REBOOT)
    assert harness.run("maintain") == 0
    assert harness.proxy.actions()["RebootInstances"] == 1
    assert power_downs(harness) == ["p5-1"]
    assert harness.slurm_suspend("p5-1") == 0


def test_a_recurrence_while_settling_is_replaced(harness: Harness) -> None:
    harness.config["repair"] = {"reboot_settle_seconds": 0}
    up(harness, "p5-1")
    harness.slurm.set("p5-1", "IDLE+CLOUD+DRAIN", REBOOT)
    assert harness.run("maintain") == 0
    # the health program runs at slurmd's start after the reboot and drains the node again
    harness.slurm.set("p5-1", "IDLE+CLOUD+DRAIN", REBOOT)
    assert harness.run("maintain") == 0
    assert "outcome='recurred" in harness.log_text() or "outcome=recurred" in harness.log_text()
    assert harness.proxy.actions()["RebootInstances"] == 1 and power_downs(harness) == ["p5-1"]
    assert harness.slurm_suspend("p5-1") == 0


# ---------------------------------------------------------------------------- static groups
ST = "st-gpu"


def with_auto_scaling_group(harness: Harness, size: int = 2) -> Any:
    """A static node group ``st-gpu`` (3 nodes) and a real moto Auto Scaling group of ``size`` instances
    tagged with the cluster and that node group (as the stack's launch template and group tags do)."""
    import boto3

    nodes = [f"p5-{i}" for i in range(1, 17)] + [f"g6e-{i}" for i in range(1, 9)] + [f"{ST}-{i}" for i in range(1, 4)]
    harness.slurm = FakeSlurm(harness.tmp / "slurm-static", nodes)
    harness.config["slurm_bin_dir"] = str(harness.slurm.bin_dir)
    harness.config["node_groups"].append(
        {
            "name": ST,
            "mode": "static",
            "max_nodes": 3,
            "instance_type": "g6e.12xlarge",
            "launch_template_id": harness.world.launch_templates["g6e"],
            "subnet_ids": [harness.world.subnet_ids[0]],
        }
    )
    asg = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION).client(
        "autoscaling", endpoint_url=harness.moto.url
    )
    asg.create_auto_scaling_group(
        AutoScalingGroupName=ST,
        LaunchTemplate={"LaunchTemplateId": harness.world.launch_templates["g6e"]},
        MinSize=size,
        MaxSize=size,
        DesiredCapacity=size,
        VPCZoneIdentifier=harness.world.subnet_ids[0],
        Tags=[
            {"Key": "gpucluster:cluster", "Value": CLUSTER, "PropagateAtLaunch": True},
            {"Key": "gpucluster:node-group", "Value": ST, "PropagateAtLaunch": True},
        ],
    )
    return asg


def asg_replaces_unhealthy(asg: Any) -> list[str]:
    """What the Auto Scaling group does on its own: terminate Unhealthy instances and launch others."""
    bad = [
        i["InstanceId"] for i in asg.describe_auto_scaling_instances()["AutoScalingInstances"] if i["HealthStatus"] == "Unhealthy"
    ]
    for iid in bad:
        asg.terminate_instance_in_auto_scaling_group(InstanceId=iid, ShouldDecrementDesiredCapacity=False)
    return bad


def static_named(harness: Harness) -> dict[str, str]:
    return {
        i["tags"]["gpucluster:node-name"]: i["InstanceId"]
        for i in instances(harness.moto.url, CLUSTER)
        if i["tags"].get("gpucluster:node-group") == ST and "gpucluster:node-name" in i["tags"]
    }


def test_static_node_is_marked_unhealthy_and_its_replacement_returns_to_service(harness: Harness) -> None:
    asg = with_auto_scaling_group(harness)
    assert harness.run("maintain") == 0
    before = static_named(harness)
    assert sorted(before) == [f"{ST}-1", f"{ST}-2"]
    harness.slurm.set(f"{ST}-1", "IDLE+CLOUD+DRAIN", REPLACE)
    harness.slurm.set(f"{ST}-2", "IDLE+CLOUD+DRAIN", ADMIN)
    assert harness.run("maintain") == 0
    health = {i["InstanceId"]: i["HealthStatus"] for i in asg.describe_auto_scaling_instances()["AutoScalingInstances"]}
    assert health == {before[f"{ST}-1"]: "Unhealthy", before[f"{ST}-2"]: "Healthy"}
    assert harness.run("maintain") == 0  # the group has not acted yet: nothing more
    assert [r["InstanceId"] for r in harness.proxy.requests("SetInstanceHealth")] == [before[f"{ST}-1"]]

    assert asg_replaces_unhealthy(asg) == [before[f"{ST}-1"]]
    assert harness.run("maintain") == 0
    after = static_named(harness)
    assert after[f"{ST}-1"] not in (before[f"{ST}-1"], before[f"{ST}-2"]) and after[f"{ST}-2"] == before[f"{ST}-2"]
    assert harness.slurm.node(f"{ST}-1")["state"] == "IDLE+CLOUD" and harness.slurm.node(f"{ST}-1")["reason"] is None
    assert harness.slurm.node(f"{ST}-2")["reason"] == ADMIN
    assert "decision quarantine-end node=st-gpu-1 action=replace" in harness.log_text()
    assert harness.run("maintain") == 0
    # the replacement is not taken for the drained instance (Slurm's state is read before the pass acts)
    assert [r["InstanceId"] for r in harness.proxy.requests("SetInstanceHealth")] == [before[f"{ST}-1"]]
    assert asg_replaces_unhealthy(asg) == []
    # the agent never launches or terminates a static group's instances itself
    assert harness.proxy.actions()["CreateFleet"] == 0 and harness.proxy.actions()["TerminateInstances"] == 0
