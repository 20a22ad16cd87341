"""Quarantine end to end with the real Slurm (Debian 22.05, the harness of ``test_slurm_e2e``): a node the
health program drained (reason ``gpucluster: … (replace)``) is powered down by the agent's maintenance
pass, slurmctld runs the SuspendProgram (the agent terminates the instance in moto) and, with the rendered
``idle_on_node_suspend``, puts the node back to ``idle~``; the next job resumes it on a new instance. A node
an operator drained is left alone. The verdict Slurm forgot on power-down stays in the agent's journal.

A static node (its instance in a moto Auto Scaling group) drained the same way gets its instance marked
Unhealthy; once the group replaced it, the agent names the new instance after the node and hands the node
back to Slurm, and a job runs on it; the agent itself never launches or terminates one.

Protected mode: a group whose launched nodes never register (a "broken image": the harness starts no slurmd
for them) is protected after ResumeTimeout; its nodes are DOWN with the reason, the job runs in the other
partition, and after ``clear-protect`` the group launches again."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.agents.conftest import CLUSTER
from tests.agents.ec2_fault_proxy import FaultProxy
from tests.agents.moto_env import REGION, MotoServer, node_instances
from tests.agents.repair.test_quarantine import asg_replaces_unhealthy
from tests.e2e import slurm_e2e
from tests.e2e.slurm_e2e import REPO, SlurmCluster
from tests.e2e.slurm_programs import agent_env, start_slurmd, stop_slurmds
from tests.e2e.test_slurm_e2e import E2E_GROUPS, assert_no_unowned_instance, cluster, shim, start_cluster, static_cluster  # noqa: F401

pytestmark = pytest.mark.slow

HEALTH = "gpucluster: ecc uncorrected volatile errors 2 (replace)"
ADMIN = "bad fan ticket 4711"


@pytest.fixture
def quiet_cluster(
    moto: MotoServer,
    proxy: FaultProxy,
    aws_env: None,
    shim: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[SlurmCluster]:
    """The cluster with a SuspendTime longer than the test: Slurm's own power saving would otherwise power
    drained idle nodes down after 8 s and race the agent (seen on a loaded machine)."""
    monkeypatch.setattr(slurm_e2e, "LOCAL_TIMERS", {**slurm_e2e.LOCAL_TIMERS, "SuspendTime": "600"})
    yield from start_cluster(E2E_GROUPS, moto, proxy, shim)


BOOT_FAILURE_TIMEOUT = 40
"""ResumeTimeout of the protected-mode test (the other tests keep 120 s): its p5 nodes never register, so the
test waits this long for each boot failure; a node that boots registers in a few seconds, also on a loaded box."""


@pytest.fixture
def impatient_cluster(
    moto: MotoServer,
    proxy: FaultProxy,
    aws_env: None,
    shim: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[SlurmCluster]:
    """The cluster with a shorter ResumeTimeout, for the test that waits for nodes that never boot."""
    monkeypatch.setattr(slurm_e2e, "LOCAL_TIMERS", {**slurm_e2e.LOCAL_TIMERS, "ResumeTimeout": str(BOOT_FAILURE_TIMEOUT)})
    yield from start_cluster(E2E_GROUPS, moto, proxy, shim)


def wait_for(what: str, cond: Callable[[], object], c: SlurmCluster, timeout: float = 60) -> None:
    c.wait(what, cond, timeout, interval=1)


def test_health_drain_is_replaced_and_the_node_returns_on_new_hardware(quiet_cluster: SlurmCluster, moto: MotoServer) -> None:
    c = quiet_cluster
    job = c.sbatch("-p", "p5", "-N", "2", "--output=job-%j.out", "--wrap", "true")
    assert c.wait_job(job, timeout=100)["JobState"] == "COMPLETED", c.debug()
    before = node_instances(moto.url, CLUSTER)
    assert sorted(before) == ["p5-1", "p5-2"]

    # the health program drains p5-1; an operator drains p5-2
    c.scontrol("update", "nodename=p5-1", "state=drain", f"reason={HEALTH}")
    c.scontrol("update", "nodename=p5-2", "state=drain", f"reason={ADMIN}")
    assert c.nodes()["p5-1"].reason == HEALTH
    assert c.run_agent("maintain") == 0  # the head node's timer
    agent_log = Path(c.agent_config["log_file"]).read_text()
    assert f"decision quarantine node=p5-1 group=p5 mode=dynamic action=replace instance={before['p5-1'][0]}" in agent_log
    assert "quarantine node=p5-2" not in agent_log
    p5_2 = c.nodes()["p5-2"]
    assert p5_2.has("DRAIN") and p5_2.reason == ADMIN, c.debug()

    # slurmctld powers p5-1 down: the agent's suspend terminates its instance, the node is idle~ again
    wait_for("p5-1 instance terminated", lambda: "p5-1" not in node_instances(moto.url, CLUSTER), c)
    wait_for("p5-1 powered down", lambda: c.nodes()["p5-1"].powered_down, c)
    p5_1 = c.nodes()["p5-1"]
    assert not p5_1.has("DRAIN") and not p5_1.has("DOWN"), c.debug()  # Slurm forgot the reason...
    assert c.run_agent("maintain") == 0
    book = json.loads((Path(c.agent_config["state_dir"]) / "quarantine.json").read_text())
    (done,) = [r for r in book["history"] if r["node"] == "p5-1"]
    assert done["verdict"] == HEALTH and done["outcome"] == "replaced" and done["instance"] == before["p5-1"][0]  # ...we did not
    assert book["active"] == {}

    # the next job on p5-1 resumes it on new hardware
    job = c.sbatch("-p", "p5", "-w", "p5-1", "--output=job-%j.out", "--wrap", "echo ran-on-$SLURMD_NODENAME")
    info = c.wait_job(job, timeout=100)
    assert info["JobState"] == "COMPLETED" and info["NodeList"] == "p5-1", c.debug()
    after = node_instances(moto.url, CLUSTER)
    assert len(after["p5-1"]) == 1 and after["p5-1"] != before["p5-1"]
    assert (c.dir / f"job-{job}.out").read_text().strip() == "ran-on-p5-1"
    assert_no_unowned_instance(c, moto.url)


def test_static_node_drained_by_health_gets_a_new_instance_from_its_auto_scaling_group(
    static_cluster: SlurmCluster,  # noqa: F811
    moto: MotoServer,
    proxy: FaultProxy,
) -> None:
    import boto3

    c = static_cluster
    asg = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION).client(
        "autoscaling", endpoint_url=moto.url
    )
    asg.create_auto_scaling_group(
        AutoScalingGroupName="st",
        LaunchTemplate={"LaunchTemplateId": c.world.launch_templates["st"]},  # type: ignore[attr-defined]
        MinSize=1,
        MaxSize=1,
        DesiredCapacity=1,
        VPCZoneIdentifier=c.world.subnet_ids[0],  # type: ignore[attr-defined]
        Tags=[
            {"Key": "gpucluster:cluster", "Value": CLUSTER, "PropagateAtLaunch": True},
            {"Key": "gpucluster:node-group", "Value": "st", "PropagateAtLaunch": True},
        ],
    )
    assert c.run_agent("maintain") == 0
    (old,) = node_instances(moto.url, CLUSTER)["st-1"]
    start_slurmd(c.settings, "st-1", agent_env(c.settings))  # the instance boots as st-1
    # registered and out of every power transition (the agent leaves a node in one alone)
    wait_for("st-1 registered", lambda: c.nodes()["st-1"].flags == ("IDLE", "CLOUD"), c)

    c.scontrol("update", "nodename=st-1", "state=drain", f"reason={HEALTH}")
    assert c.run_agent("maintain") == 0
    health = {i["InstanceId"]: i["HealthStatus"] for i in asg.describe_auto_scaling_instances()["AutoScalingInstances"]}
    assert health == {old: "Unhealthy"}, c.debug()
    assert c.nodes()["st-1"].reason == HEALTH  # still drained until the replacement is there

    # the Auto Scaling group replaces the instance; the old one's slurmd goes with it
    assert asg_replaces_unhealthy(asg) == [old]
    stop_slurmds(c.settings, ["st-1"])
    assert c.run_agent("maintain") == 0
    (new,) = node_instances(moto.url, CLUSTER)["st-1"]
    assert new != old
    st1 = c.nodes()["st-1"]
    assert not st1.has("DRAIN") and st1.reason is None, c.debug()
    start_slurmd(c.settings, "st-1", agent_env(c.settings))  # the replacement boots as st-1
    job = c.sbatch("-p", "st", "-N", "1", "--output=job-%j.out", "--wrap", "echo ran-on-$SLURMD_NODENAME")
    info = c.wait_job(job, timeout=60)
    assert info["JobState"] == "COMPLETED" and info["NodeList"] == "st-1", c.debug()
    assert proxy.actions()["CreateFleet"] == 0 and proxy.actions()["TerminateInstances"] == 0
    assert [r["InstanceId"] for r in proxy.requests("SetInstanceHealth")] == [old]
    assert_no_unowned_instance(c, moto.url)


def test_protected_mode_after_boot_failures_until_cleared(
    impatient_cluster: SlurmCluster, moto: MotoServer, proxy: FaultProxy
) -> None:
    c = impatient_cluster
    c.agent_config["repair"] = {"protect_after_failures": 2}
    c.agent_config_path.write_text(json.dumps(c.agent_config, indent=1))
    settings_path = c.dir / "etc" / "programs.json"
    c.settings["never_boot"] = ["p5"]
    settings_path.write_text(json.dumps(c.settings, indent=1))

    # p5 (higher PriorityTier) gets the job first; its nodes never register: ResumeTimeout (BOOT_FAILURE_TIMEOUT)
    job = c.sbatch("-p", "p5,g6e", "-N", "2", "--output=job-%j.out", "--wrap", "echo ran-on-$SLURMD_NODENAME")
    info = c.wait_job(job, timeout=300)
    assert info["JobState"] == "COMPLETED" and info["Partition"] == "g6e", c.debug()
    agent_log = Path(c.agent_config["log_file"]).read_text()
    assert "decision protect group=p5: 2 consecutive boot failures" in agent_log, c.debug()
    assert c.run_agent("maintain") == 0
    for n in ("p5-1", "p5-2"):
        st = c.nodes()[n]
        assert st.has("DOWN") and (st.reason or "").startswith("gpucluster: ProtectedMode p5.48xlarge"), c.debug()
    status = subprocess.run(
        [c.settings["python"], "-m", "gpucluster_agents", "status"],
        env=agent_env(c.settings),
        cwd=str(REPO),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "group p5: PROTECTED after 2 boot failures (nodes p5-1,p5-2)" in status
    p5_fleets = [r for r in proxy.requests("CreateFleet") if r["TagSpecification.1.Tag.2.Value"] == "p5"]
    assert len(p5_fleets) == 1

    # the operator fixes the image and clears protected mode: p5 launches and runs jobs again
    c.settings["never_boot"] = []
    settings_path.write_text(json.dumps(c.settings, indent=1))
    subprocess.run(
        [c.settings["python"], "-m", "gpucluster_agents", "clear-protect", "p5"],
        env=agent_env(c.settings),
        cwd=str(REPO),
        check=True,
    )
    wait_for("p5 nodes handed back", lambda: not any(c.nodes()[n].has("DOWN") for n in ("p5-1", "p5-2")), c)
    job = c.sbatch("-p", "p5", "-N", "1", "--output=job-%j.out", "--wrap", "echo ran-on-$SLURMD_NODENAME")
    info = c.wait_job(job, timeout=150)
    assert info["JobState"] == "COMPLETED" and info["Partition"] == "p5", c.debug()
    assert_no_unowned_instance(c, moto.url)
