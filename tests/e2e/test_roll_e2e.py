"""Rolling replacement end to end with the real Slurm (Debian 22.05, the harness of ``test_slurm_e2e``) and moto:
8 dynamic nodes and 2 static ones (a moto Auto Scaling group) run launch template version 1; version 2, with a new
image, becomes the default (what ``pulumi up`` does after an image change). The agent's maintenance pass (the head node's
timer, run here by hand) drains at most the configured share of each group, replaces drained nodes once idle
(dynamic: slurmctld's SuspendProgram terminates the instance; static: Unhealthy, the Auto Scaling group replaces
it), and hands nodes back. A job running on one node is never killed: the node is replaced after the job ends.
At the end no node is drained, down or left without a way back, no instance is left unowned, and every instance
runs the new image. First, a spot interruption warning for one node requeues its job (``spot_warning_requeues_the_job``).
(Boot failures stopping the roll: ``tests/agents/power/test_roll.py``, whose boot failures need no
ResumeTimeout to pass.)"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster_agents.contract import hostlist
from gpucluster_agents.power.roll import REASON
from gpucluster_agents.power.spot import SPOT_REASON
from tests.agents.conftest import CLUSTER
from tests.agents.ec2_fault_proxy import FaultProxy
from tests.agents.moto_env import AMI_ID, REGION, MotoServer, ec2_client, instances
from tests.agents.power.test_spot import interruption
from tests.agents.repair.test_quarantine import asg_replaces_unhealthy
from tests.e2e import slurm_e2e
from tests.e2e.slurm_e2e import REPO, GroupSpec, SlurmCluster
from tests.e2e.slurm_programs import agent_env, start_slurmd, stop_slurmds
from tests.e2e.test_slurm_e2e import assert_no_unowned_instance, shim, start_cluster  # noqa: F401

pytestmark = pytest.mark.slow

GROUPS = [
    GroupSpec("p5", "p5.48xlarge", nodes=8, priority_tier=10),
    GroupSpec("g6e", "g6e.12xlarge", nodes=2, priority_tier=1, mode="static"),
]
P5 = [f"p5-{i}" for i in range(1, 9)]


@pytest.fixture
def roll_cluster(
    moto: MotoServer,
    proxy: FaultProxy,
    aws_env: None,
    shim: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[SlurmCluster]:
    """SuspendTime longer than the test: idle nodes are powered down by the roll only, not by Slurm's power saving."""
    timers = {**slurm_e2e.LOCAL_TIMERS, "SuspendTime": "600", "SuspendTimeout": "2"}  # a power-down takes 2 s here
    monkeypatch.setattr(slurm_e2e, "LOCAL_TIMERS", timers)
    yield from start_cluster(GROUPS, moto, proxy, shim)


def images(moto_url: str) -> dict[str, str]:
    """node -> image of the named instances (a replacement the Auto Scaling group just launched is named by the next pass)."""
    return {
        i["tags"]["gpucluster:node-name"]: i["ImageId"]
        for i in instances(moto_url, CLUSTER)
        if "gpucluster:node-name" in i["tags"]
    }


def test_a_spot_warning_requeues_then_nodes_roll_onto_the_new_version_a_share_at_a_time_without_killing_a_job(
    roll_cluster: SlurmCluster, moto: MotoServer, proxy: FaultProxy
) -> None:
    import boto3

    c = roll_cluster
    c.agent_config["updates"] = {"max_drained_percent": 50}  # 4 of p5's 8 nodes, 1 of g6e's 2
    c.agent_config_path.write_text(json.dumps(c.agent_config, indent=1))
    lts = c.world.launch_templates  # type: ignore[attr-defined]
    asg = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION).client(
        "autoscaling", endpoint_url=moto.url
    )
    asg.create_auto_scaling_group(
        AutoScalingGroupName="g6e",
        LaunchTemplate={"LaunchTemplateId": lts["g6e"], "Version": "$Default"},
        MinSize=2,
        MaxSize=2,
        DesiredCapacity=2,
        VPCZoneIdentifier=c.world.subnet_ids[0],  # type: ignore[attr-defined]
        Tags=[
            {"Key": "gpucluster:cluster", "Value": CLUSTER, "PropagateAtLaunch": True},
            {"Key": "gpucluster:node-group", "Value": "g6e", "PropagateAtLaunch": True},
        ],
    )
    assert c.run_agent("maintain") == 0  # names the static instances
    for n in ("g6e-1", "g6e-2"):
        start_slurmd(c.settings, n, agent_env(c.settings))
    # all 8 dynamic nodes up on version 1 (the agent's resume), then a job that runs until the test lets it end
    # (powered up by hand, not by an 8-node job: a job on powering-up nodes waits for slurmctld's 30 s periodic check)
    c.scontrol("update", "nodename=p5-[1-8]", "state=power_up")
    up = lambda: all(c.nodes()[n].flags == ("IDLE", "CLOUD") for n in P5)  # noqa: E731
    c.wait("p5 nodes up", up, 60)
    go = c.dir / "go"
    long_job = c.sbatch("-p", "p5", "-w", "p5-1", "--output=job-%j.out", "--wrap", f"while [ ! -e {go} ]; do sleep 0.2; done")
    c.wait("long job running", lambda: c.scontrol("-o", "show", "job", str(long_job)).count("JobState=RUNNING"), 30)
    c.wait("static nodes idle", lambda: all(c.nodes()[n].flags == ("IDLE", "CLOUD") for n in ("g6e-1", "g6e-2")), 30)
    spot_iid = spot_warning_requeues_the_job(c, moto)  # p5-8 goes first, by its spot warning
    old = {n: ids[0] for n, ids in _owned(moto.url).items()}
    assert set(images(moto.url).values()) == {AMI_ID} and len(old) == 9

    ec2 = ec2_client(moto.url)
    ami = ec2.copy_image(SourceImageId=AMI_ID, SourceRegion=REGION, Name="gpucluster-test-next")["ImageId"]
    for g in ("p5", "g6e"):  # a new image: a new version, made the default
        v = ec2.create_launch_template_version(LaunchTemplateId=lts[g], SourceVersion="1", LaunchTemplateData={"ImageId": ami})
        ec2.modify_launch_template(LaunchTemplateId=lts[g], DefaultVersion=str(v["LaunchTemplateVersion"]["VersionNumber"]))

    most = {"p5": 0, "g6e": 0}
    booting: set[str] = set()  # static nodes whose instance the Auto Scaling group replaced
    for passes in range(1, 16):
        assert c.run_agent("maintain") == 0
        states = c.nodes()
        for g, limit in (("p5", 4), ("g6e", 1)):
            held = [
                n
                for n, s in states.items()
                if n.startswith(f"{g}-") and ((s.has("DRAIN") and s.reason == REASON) or s.has("POWERING_DOWN"))
            ]
            assert len(held) <= limit, (held, c.debug())
            most[g] = max(most[g], len(held))
        if passes == 4:
            go.touch()  # the long job ends
        for n in sorted(booting & set(_owned(moto.url))):  # the agent named the replacement: it boots as its node
            start_slurmd(c.settings, n, agent_env(c.settings))
            booting.discard(n)
        replaced = set(asg_replaces_unhealthy(asg))  # the Auto Scaling group acts: the old slurmd goes with it
        for n in ("g6e-1", "g6e-2"):
            if replaced & set(old_ids(old, n)):
                stop_slurmds(c.settings, [n])
                booting.add(n)
        c.wait("no node powering down", lambda: not any(s.has("POWERING_DOWN") for s in c.nodes().values()), 30)
        now = c.nodes()
        settled = all(not s.has("DRAIN") and not s.has("DOWN") for s in now.values())
        current = all(v == ami for v in images(moto.url).values())
        if settled and current and all(now[n].powered_down for n in P5 if n not in _owned(moto.url)):
            break
    assert most == {"p5": 4, "g6e": 1}, (most, c.debug())
    info = json.loads(json.dumps(c.wait_job(long_job, timeout=30)))
    assert info["JobState"] == "COMPLETED", c.debug()  # never killed, never requeued
    assert "Restarts=0" in c.scontrol("-o", "show", "job", str(long_job))
    after = _owned(moto.url)
    assert all(v == ami for v in images(moto.url).values()), images(moto.url)
    assert {"g6e-1", "g6e-2"} <= set(after) and not set(i for ids in after.values() for i in ids) & set(old.values())
    assert not set(after) & set(P5)  # every old dynamic node was powered down; none is stranded:
    assert all(c.nodes()[n].powered_down and not c.nodes()[n].has("DRAIN") for n in P5), c.debug()
    log = Path(c.agent_config["log_file"]).read_text()
    assert "decision roll-replace group=p5 mode=dynamic nodes=p5-1" in log  # p5-1 last, once its job had ended
    gone = {i["InstanceId"] for i in instances(moto.url, CLUSTER, states=("shutting-down", "terminated"))}
    assert gone == set(old.values()) | {spot_iid}  # by the agent (dynamic ones) and the Auto Scaling group (static ones)
    assert proxy.actions()["SetInstanceHealth"] == 2 and proxy.actions()["CreateFleet"] == 1  # the roll launches nothing
    assert_no_unowned_instance(c, moto.url)


def spot_warning_requeues_the_job(c: SlurmCluster, moto: MotoServer) -> str:
    """A spot interruption warning for p5-8 while a requeueable job runs there, shaped like AWS's documented EventBridge
    event and put in the queue as the rule's target would (moto does not deliver EventBridge events to SQS): the
    ``spot-watch`` service powers p5-8 down at once, Slurm requeues the job, the agent terminates the instance, the
    node is back in service and the message is deleted. (In this test to share its cluster: the budget of CI time.)"""
    import boto3

    sqs = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION).client(
        "sqs", endpoint_url=moto.url
    )
    url = sqs.create_queue(QueueName=f"{CLUSTER}-spot-events")["QueueUrl"]
    c.agent_config["spot_queue_url"] = url
    c.agent_config_path.write_text(json.dumps(c.agent_config, indent=1))
    job = c.sbatch("-p", "p5", "-w", "p5-8", "--requeue", "--output=job-%j.out", "--wrap", "sleep 600")
    c.wait("spot job running", lambda: "JobState=RUNNING" in c.scontrol("-o", "show", "job", str(job)), 30)
    (iid,) = _owned(moto.url)["p5-8"]
    sqs.send_message(QueueUrl=url, MessageBody=interruption(iid))
    watch = [c.settings["python"], "-m", "gpucluster_agents", "spot-watch", "once"]  # the service, one poll
    assert subprocess.run(watch, env=agent_env(c.settings), cwd=str(REPO), stdin=subprocess.DEVNULL, check=False).returncode == 0
    p5_8 = c.nodes()["p5-8"]
    assert p5_8.reason == SPOT_REASON and any(p5_8.has(f) for f in ("POWER_DOWN", "POWERING_DOWN", "POWERED_DOWN")), c.debug()
    shown = c.scontrol("-o", "show", "job", str(job))
    assert "Restarts=1" in shown and "JobState=RUNNING" not in shown, shown  # requeued, not lost with the node
    c.run("/usr/bin/scancel", str(job), check=True)  # before it could start again (its requeue waits cred_expire)
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0, VisibilityTimeout=0).get("Messages", []) == []  # deleted
    gone = lambda: c.nodes()["p5-8"].powered_down and "p5-8" not in _owned(moto.url)  # noqa: E731
    c.wait("p5-8 powered down, its instance terminated", gone, 30)
    assert not c.nodes()["p5-8"].has("DOWN") and not c.nodes()["p5-8"].has("DRAIN"), c.debug()  # back in service
    return str(iid)


def old_ids(old: dict[str, str], node: str) -> list[str]:
    return [old[node]] if node in old else []


def _owned(moto_url: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for i in instances(moto_url, CLUSTER):
        if "gpucluster:node-name" in i["tags"]:
            out.setdefault(i["tags"]["gpucluster:node-name"], []).append(i["InstanceId"])
    return {n: sorted(v) for n, v in out.items() if hostlist.order_key(n)}
