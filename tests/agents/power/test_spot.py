"""Spot and capacity warnings (``gpucluster_agents/power/spot.py``) through moto's SQS and the fake scontrol: events
shaped like AWS's documented EventBridge events (EventBridge's delivery into the queue is not simulated by moto: the
test puts the event's JSON in the queue as the rule's target would). An interruption warning powers the node down at once (Slurm
requeues its jobs: ``tests/e2e/test_roll_e2e.py`` shows it with the real slurmctld), a rebalance recommendation
drains it for replacement, a capacity block's end drains every node of the groups in that reservation; events of
instances that are not the cluster's, and of a stray second instance carrying a node's name, leave the nodes alone;
every handled message is deleted."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from gpucluster_agents.power.spot import BLOCK_REASON, REBALANCE_REASON, SPOT_REASON, queue_account, read_event
from gpucluster_agents.repair.quarantine import drain_action
from tests.agents.conftest import CLUSTER, Harness
from tests.agents.moto_env import REGION, ec2_client
from tests.agents.test_orphans import launch_raw

ACCOUNT = "123456789012"  # moto's account: the queue URL's


def event(detail_type: str, detail: dict[str, Any], **envelope: str) -> str:
    """An EventBridge event as AWS documents it (EC2 spot instance interruptions / capacity blocks pages)."""
    return json.dumps(
        {
            "version": "0",
            "id": "12345678-1234-1234-1234-123456789012",
            "detail-type": detail_type,
            "source": "aws.ec2",
            "account": ACCOUNT,
            "time": "2026-11-26T20:00:00Z",
            "region": REGION,
            "resources": [],
            "detail": detail,
            **envelope,
        }
    )


def interruption(iid: str) -> str:
    return event("EC2 Spot Instance Interruption Warning", {"instance-id": iid, "instance-action": "terminate"})


def read(body: str) -> tuple[str, str, str] | None:
    return read_event(body, ACCOUNT, REGION)


def test_read_event() -> None:
    assert read(interruption("i-0abc")) == ("EC2 Spot Instance Interruption Warning", "instance", "i-0abc")
    assert read(event("EC2 Instance Rebalance Recommendation", {"instance-id": "i-1"}))[2] == "i-1"  # type: ignore[index]
    block = event("Capacity Block Reservation Expiration Warning", {"capacity-reservation-id": "cr-0123"})
    assert read(block) == ("Capacity Block Reservation Expiration Warning", "reservation", "cr-0123")
    assert read("not json") is None and read(event("EC2 Instance State-change Notification", {})) is None


WARNING = {"instance-id": "i-0abc", "instance-action": "terminate"}


@pytest.mark.parametrize(
    "envelope",
    [
        {"source": "my.app"},  # anything but EC2's own events
        {"source": "aws.ec2 "},
        {"account": "210987654321"},  # another account's event
        {"region": "eu-west-1"},  # another region's
        {"source": ""},
    ],
)
def test_l3_a_warning_not_from_ec2_of_the_clusters_account_and_region_is_refused(envelope: dict[str, str]) -> None:
    body = event("EC2 Spot Instance Interruption Warning", WARNING, **envelope)
    assert read(body) is None
    assert read_event(interruption("i-0abc"), None, REGION) is None  # no account known: nothing is trusted


def test_l3_the_account_comes_from_the_queue_url() -> None:
    assert queue_account(f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/c-spot") == ACCOUNT
    assert queue_account(f"http://127.0.0.1:5000/{ACCOUNT}/c-spot") == ACCOUNT
    assert queue_account("https://sqs.us-east-1.amazonaws.com/c-spot") is None
    assert queue_account("https://sqs.us-east-1.amazonaws.com/12345/c-spot") is None


def test_a_rebalance_drain_is_replaced_by_the_repair_pass_a_capacity_block_drain_waits_for_the_end() -> None:
    assert drain_action(REBALANCE_REASON) == "replace" and drain_action(BLOCK_REASON) is None


@pytest.fixture
def queue(harness: Harness) -> tuple[Any, str]:
    import boto3

    sqs = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION).client(
        "sqs", endpoint_url=harness.moto.url
    )
    url = sqs.create_queue(QueueName="gpucluster-testcl-spot")["QueueUrl"]
    harness.config["spot_queue_url"] = url
    return sqs, url


def test_warnings_set_down_drain_and_are_deleted(harness: Harness, queue: tuple[Any, str]) -> None:
    sqs, url = queue
    h = harness
    g6e = h.group("g6e")
    g6e["capacity"] = {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}
    assert h.slurm_resume("p5-[1-3]") == 0 and h.slurm_resume("g6e-[1-2]") == 0
    h.slurm.set("p5-[1-3],g6e-[1-2]", "ALLOCATED+CLOUD")
    ids = {n: v[0] for n, v in h.nodes().items()}
    stranger = ec2_client(h.moto.url).run_instances(ImageId="ami-0a1b2c3d4e5f60718", MinCount=1, MaxCount=1)["Instances"][0]
    for body in (
        interruption(ids["p5-1"]),
        event("EC2 Instance Rebalance Recommendation", {"instance-id": ids["p5-2"]}),
        event("Capacity Block Reservation Expiration Warning", {"capacity-reservation-id": "cr-0123456789abcdef0"}),
        interruption(stranger["InstanceId"]),  # not the cluster's
        "garbage",
    ):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    h.proxy.clear()
    assert h.run("spot-watch", "once") == 0
    assert "POWERING_DOWN" in h.slurm.node("p5-1")["state"] and h.slurm.node("p5-1")["reason"] == SPOT_REASON
    assert "DRAIN" in h.slurm.node("p5-2")["state"] and h.slurm.node("p5-2")["reason"] == REBALANCE_REASON
    for n in ("g6e-1", "g6e-2"):
        assert "DRAIN" in h.slurm.node(n)["state"] and h.slurm.node(n)["reason"] == BLOCK_REASON
    assert h.slurm.node("p5-3") == {"state": "ALLOCATED+CLOUD", "reason": None, "addr": h.slurm.node("p5-3")["addr"]}
    assert "not a node of this cluster" in h.log_text()
    left = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0, WaitTimeSeconds=0).get("Messages", [])
    assert left == []  # every message handled and deleted
    assert h.proxy.actions()["DescribeInstances"] == 1  # one for the whole batch of messages, none per node


def test_l3_forged_warnings_in_the_queue_power_nothing_down(harness: Harness, queue: tuple[Any, str]) -> None:
    """Messages in the cluster's queue that EC2 did not send (another source, account or region): the node keeps its
    job, the messages are dropped, no instance is even looked up; EC2's own warning beside them still acts."""
    sqs, url = queue
    h = harness
    assert h.slurm_resume("p5-[1-2]") == 0
    h.slurm.set("p5-[1-2]", "ALLOCATED+CLOUD")
    ids = {n: v[0] for n, v in h.nodes().items()}
    kind = "EC2 Spot Instance Interruption Warning"
    for envelope in ({"source": "ci.script"}, {"account": "210987654321"}, {"region": "eu-west-1"}):
        sqs.send_message(QueueUrl=url, MessageBody=event(kind, {"instance-id": ids["p5-1"]}, **envelope))
    h.proxy.clear()
    assert h.run("spot-watch", "once") == 0
    assert h.slurm.node("p5-1")["state"] == "ALLOCATED+CLOUD" and h.slurm.node("p5-1")["reason"] is None
    assert h.proxy.actions().get("DescribeInstances", 0) == 0
    left = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0, WaitTimeSeconds=0).get("Messages", [])
    assert left == []
    sqs.send_message(QueueUrl=url, MessageBody=interruption(ids["p5-2"]))
    assert h.run("spot-watch", "once") == 0
    assert "POWERING_DOWN" in h.slurm.node("p5-2")["state"] and h.slurm.node("p5-2")["reason"] == SPOT_REASON


def test_a_message_stays_in_the_queue_when_slurm_cannot_be_updated(harness: Harness, queue: tuple[Any, str]) -> None:
    sqs, url = queue
    h = harness
    assert h.slurm_resume("p5-1") == 0
    h.slurm.set("p5-1", "ALLOCATED+CLOUD")
    sqs.send_message(QueueUrl=url, MessageBody=interruption(h.nodes()["p5-1"][0]))
    h.slurm.set_flag("unreachable", True)
    assert h.run("spot-watch", "once") == 0
    h.slurm.set_flag("unreachable", False)
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    assert sum(int(attrs[a]) for a in names) == 1  # kept: received, not deleted, back after its visibility timeout


def test_fault_spot_stray_duplicate(harness: Harness, queue: tuple[Any, str]) -> None:
    """A second instance carrying a running node's name (a stray) gets the warning: the node's job runs on its own
    instance, so the node is left alone (the sweep ends the stray); a warning for the node's instance acts."""
    sqs, url = queue
    h = harness
    assert h.slurm_resume("p5-1") == 0
    h.slurm.set("p5-1", "ALLOCATED+CLOUD")
    own = h.nodes()["p5-1"][0]
    time.sleep(1.1)  # launched later: the sweep keeps the node's older instance
    tags = {"gpucluster:cluster": CLUSTER, "gpucluster:node-group": "p5", "gpucluster:node-name": "p5-1"}
    stray = launch_raw(h, tags)[0]
    sqs.send_message(QueueUrl=url, MessageBody=interruption(stray))
    before = len(h.slurm.updates())
    assert h.run("spot-watch", "once") == 0
    assert h.slurm.updates()[before:] == [] and h.slurm.node("p5-1")["state"] == "ALLOCATED+CLOUD"
    assert f"instance {stray} carries node p5-1's name, but the node's instance is {own}" in h.log_text()
    left = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0, WaitTimeSeconds=0).get("Messages", [])
    assert left == []  # handled: the stray is the sweep's
    assert h.run("maintain") == 0
    assert h.nodes() == {"p5-1": [own]} and f"instance={stray}: second instance of node p5-1" in h.log_text()
    sqs.send_message(QueueUrl=url, MessageBody=interruption(own))
    assert h.run("spot-watch", "once") == 0
    assert "POWERING_DOWN" in h.slurm.node("p5-1")["state"] and h.slurm.node("p5-1")["reason"] == SPOT_REASON
