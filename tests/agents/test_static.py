"""Static node groups: an Auto Scaling group owns the instances, the agent only names them.

The "Auto Scaling group" here is the test launching instances with the tags its launch template
gives them (cluster and node group) and terminating them; the agent must name each after the
lowest free node, keep Slurm's view true (nodes without an instance DOWN, back once they have one)
and never launch or terminate one itself."""

from __future__ import annotations

from tests.agents.conftest import CLUSTER, FakeSlurm, Harness
from tests.agents.moto_env import ec2_client, instances
from tests.agents.test_orphans import launch_raw

GROUP = "st-cpu"  # a spec-style name with '-': nodes st-cpu-1 .. st-cpu-3
OF_GROUP = {"gpucluster:cluster": CLUSTER, "gpucluster:node-group": GROUP}


def with_static_group(harness: Harness) -> None:
    nodes = [f"p5-{i}" for i in range(1, 17)] + [f"g6e-{i}" for i in range(1, 9)] + [f"{GROUP}-{i}" for i in range(1, 4)]
    harness.slurm = FakeSlurm(harness.tmp / "slurm-static", nodes)
    harness.config["slurm_bin_dir"] = str(harness.slurm.bin_dir)
    harness.config["orphan_grace_seconds"] = 0  # were these instances the agent's, they would be swept at once
    harness.config["node_groups"].append(
        {
            "name": GROUP,
            "mode": "static",
            "max_nodes": 3,
            "instance_type": "g6e.12xlarge",
            "launch_template_id": harness.world.launch_templates["g6e"],
            "subnet_ids": [harness.world.subnet_ids[0]],
        }
    )


def named(harness: Harness) -> dict[str, str]:
    """node -> instance id, for the static group's live instances."""
    return {
        i["tags"]["gpucluster:node-name"]: i["InstanceId"]
        for i in instances(harness.moto.url, CLUSTER)
        if i["tags"].get("gpucluster:node-group") == GROUP and "gpucluster:node-name" in i["tags"]
    }


def test_instances_of_the_auto_scaling_group_are_named_never_terminated(harness: Harness) -> None:
    with_static_group(harness)
    asg = launch_raw(harness, OF_GROUP, count=2)
    assert harness.run("maintain") == 0
    assert sorted(named(harness)) == [f"{GROUP}-1", f"{GROUP}-2"] and set(named(harness).values()) == set(asg)
    ips = {i["tags"]["gpucluster:node-name"]: i["PrivateIpAddress"] for i in instances(harness.moto.url, CLUSTER)}
    for node in (f"{GROUP}-1", f"{GROUP}-2"):
        assert harness.slurm.node(node)["addr"] == ips[node]
        assert not harness.slurm.node(node)["state"].startswith("DOWN")
    # the third name has no instance: DOWN with a reason, so jobs go elsewhere
    third = harness.slurm.node(f"{GROUP}-3")
    assert third["state"].startswith("DOWN") and third["reason"].startswith("gpucluster: no instance")
    assert harness.proxy.actions()["CreateFleet"] == 0 and harness.proxy.actions()["TerminateInstances"] == 0

    # the group scales out: the new instance gets the free name, and the node comes back
    (new,) = launch_raw(harness, OF_GROUP)
    assert harness.run("maintain") == 0
    assert named(harness)[f"{GROUP}-3"] == new
    assert harness.slurm.node(f"{GROUP}-3")["state"].startswith("IDLE") and harness.slurm.node(f"{GROUP}-3")["reason"] is None

    # the group replaces st-cpu-1's instance: the name goes DOWN, then to the replacement
    ec2_client(harness.moto.url).terminate_instances(InstanceIds=[named(harness)[f"{GROUP}-1"]])
    assert harness.run("maintain") == 0
    assert harness.slurm.node(f"{GROUP}-1")["state"].startswith("DOWN")
    (replacement,) = launch_raw(harness, OF_GROUP)
    assert harness.run("maintain") == 0
    assert named(harness)[f"{GROUP}-1"] == replacement
    assert harness.slurm.node(f"{GROUP}-1")["state"].startswith("IDLE")
    assert harness.proxy.actions()["CreateFleet"] == 0 and harness.proxy.actions()["TerminateInstances"] == 0


def test_slurm_programs_leave_static_instances_to_the_auto_scaling_group(harness: Harness) -> None:
    with_static_group(harness)
    (iid,) = launch_raw(harness, OF_GROUP)
    assert harness.run("maintain") == 0
    assert named(harness) == {f"{GROUP}-1": iid}
    # slurmctld resumes a static node with an instance: its address, no launch
    assert harness.slurm_resume(f"{GROUP}-1") == 0
    # ... and one without: DOWN, still no launch
    assert harness.slurm_resume(f"{GROUP}-2") == 0
    assert harness.slurm.node(f"{GROUP}-2")["reason"].startswith("gpucluster: no instance")
    # suspend and resume-fail never terminate a static node's instance
    assert harness.slurm_suspend(f"{GROUP}-1") == 0
    assert harness.run("resume-fail", f"{GROUP}-1") == 0
    assert harness.slurm.node(f"{GROUP}-1")["reason"].startswith("gpucluster: ResumeTimeout, static node did not register")
    assert named(harness) == {f"{GROUP}-1": iid}
    assert harness.proxy.actions()["CreateFleet"] == 0 and harness.proxy.actions()["TerminateInstances"] == 0
    log = harness.log_text()
    assert f"nodes={GROUP}-1 are static" in log and "left to the Auto Scaling group" in log
