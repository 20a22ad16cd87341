"""The spot warnings' path under mocks (``components/slurm/_spot_events.py``): a Slurm stack with a spot group gets an
EventBridge rule for the warnings, an encrypted queue only that rule may send to, a head node role that may only
receive and delete there, the queue's URL in the agent's config and the ``spot-watch`` service; an on-demand stack
gets none of it."""

from __future__ import annotations

import json

from gpucluster.policy.iam_eval import DENY, Request, evaluate
from gpucluster_agents.contract import parse as parse_config
from gpucluster_agents.contract.spot import DETAIL_TYPES
from gpucluster_agents.power.spot import queue_account
from tests.components.slurm.test_slurm_cluster import build, head_files, policy, spec_of
from tests.conftest import group

QUEUE = "aws:sqs/queue:Queue"
RULE = "aws:cloudwatch/eventRule:EventRule"
UNIT = "/etc/systemd/system/gpucluster-agent-spot.service"


def test_a_spot_group_gets_the_warning_rule_an_encrypted_queue_and_the_service(run_components):
    plan = run_components(lambda: build(spec_of(group(name="p5", maxSize=4, capacity={"type": "spot"}))))
    (queue,) = plan.of_type(QUEUE)
    (rule,) = plan.of_type(RULE)
    assert queue.inputs["sqsManagedSseEnabled"] is True and queue.inputs["receiveWaitTimeSeconds"] == 20
    assert json.loads(rule.inputs["eventPattern"]) == {"source": ["aws.ec2"], "detail-type": list(DETAIL_TYPES)}
    (target,) = plan.of_type("aws:cloudwatch/eventTarget:EventTarget")
    assert target.inputs["arn"] == queue.state["arn"] and target.inputs["rule"] == rule.state["name"]
    send, _, tls = json.loads(plan.of_type("aws:sqs/queuePolicy:QueuePolicy")[0].inputs["policy"])["Statement"]
    assert send["Principal"] == {"Service": "events.amazonaws.com"} and send["Action"] == "sqs:SendMessage"
    assert send["Resource"] == queue.state["arn"] and send["Condition"] == {"ArnEquals": {"aws:SourceArn": rule.state["arn"]}}
    assert tls["Effect"] == "Deny" and tls["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    (read,) = policy(plan, "s-slurm-head-spot-events")["Statement"]
    assert read == {
        "Sid": "ReadSpotWarnings",
        "Effect": "Allow",
        "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage"],
        "Resource": queue.state["arn"],
    }
    files = head_files(plan)
    assert parse_config(json.loads(files["/etc/gpucluster/agent.json"])).spot_queue_url == queue.state["url"]
    assert "ExecStart=/usr/bin/python3 -E -s -m gpucluster_agents spot-watch" in files[UNIT] and "Restart=always" in files[UNIT]
    assert "systemctl enable --now gpucluster-agent-spot.service" in files["/usr/local/sbin/gpucluster-slurm-head"]


def test_l3_nobody_but_the_rule_may_send_not_even_the_accounts_own_principals(run_components):
    """A forged interruption warning powers a node down: the queue's policy denies SendMessage to every principal
    unless it comes from the cluster's rule, so an identity policy granting sqs:* (an admin, a CI role) cannot send.
    The agent learns the account its events must carry from the queue URL the stack gives it."""
    plan = run_components(lambda: build(spec_of(group(name="p5", maxSize=4, capacity={"type": "spot"}))))
    (queue,) = plan.of_type(QUEUE)
    (rule,) = plan.of_type(RULE)
    doc = json.loads(plan.of_type("aws:sqs/queuePolicy:QueuePolicy")[0].inputs["policy"])
    arn, account = queue.state["arn"], queue.state["arn"].split(":")[4]
    admin = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}]}
    tls = {"aws:SecureTransport": True}
    events = {"Service": "events.amazonaws.com"}
    from_rule = Request("sqs:SendMessage", arn, {**tls, "aws:SourceArn": rule.state["arn"]}, events)
    other_rule = f"arn:aws:events:us-east-1:{account}:rule/someone-elses"
    assert evaluate([doc], from_rule).allowed
    assert evaluate([doc], Request("sqs:SendMessage", arn, {**tls, "aws:SourceArn": other_rule}, events)).result == DENY
    caller = {"AWS": f"arn:aws:iam::{account}:role/ci"}
    forged = evaluate([doc, admin], Request("sqs:SendMessage", arn, tls, caller))
    assert forged.result == DENY and forged.denied_by == ("NoSenderButTheRule",)
    assert evaluate([doc, admin], Request("sqs:ReceiveMessage", arn, tls, caller)).allowed  # only sending is the rule's
    assert queue_account(queue.state["url"]) == account


def test_an_on_demand_stack_has_no_spot_warnings(run_components):
    plan = run_components(lambda: build(spec_of(group(name="p5", maxSize=4))))
    assert plan.of_type(QUEUE) == [] and plan.of_type(RULE) == []
    files = head_files(plan)
    assert UNIT not in files and "spot_queue_url" not in files["/etc/gpucluster/agent.json"]
    assert "gpucluster-agent-spot" not in files["/usr/local/sbin/gpucluster-slurm-head"]
