"""Teardown against moto: every instance the agent launched for the cluster is terminated and waited
for; the head node, Auto Scaling instances and other clusters' instances are not touched; a second
run finds nothing."""

from __future__ import annotations

from typing import Any

import pytest

from gpucluster.components.slurm import agent_teardown as td
from tests.agents.conftest import CLUSTER, Harness
from tests.agents.moto_env import instances
from tests.agents.test_orphans import launch_raw


def test_teardown_terminates_the_agents_instances_and_is_idempotent(harness: Harness) -> None:
    assert harness.slurm_resume("p5-[1-3],g6e-1") == 0
    agent = sorted(i for ids in harness.nodes().values() for i in ids)
    untagged = launch_raw(
        harness, {"gpucluster:cluster": CLUSTER, "gpucluster:node-group": "p5", "gpucluster:launch-token": "f" * 32}
    )
    head = launch_raw(harness, {"gpucluster:cluster": CLUSTER, "Name": f"{CLUSTER}-head"})
    asg = launch_raw(harness, {"gpucluster:cluster": CLUSTER, "gpucluster:node-group": "dev"})
    other = launch_raw(harness, {"gpucluster:cluster": "othercl", "gpucluster:launch-token": "e" * 32})
    done = td.teardown(CLUSTER, "us-east-1", endpoint_url=harness.moto.url, poll=0.1, timeout=30)
    assert sorted(done) == sorted(agent + untagged)
    alive = {i["InstanceId"] for i in instances(harness.moto.url)}
    assert alive == set(head + asg + other)
    gone = {i["InstanceId"]: i["State"]["Name"] for i in instances(harness.moto.url, states=("terminated",))}
    assert set(agent + untagged) <= set(gone)
    assert td.teardown(CLUSTER, "us-east-1", endpoint_url=harness.moto.url, poll=0.1, timeout=30) == []
    from tests.agents.moto_env import ec2_client

    ec2_client(harness.moto.url).terminate_instances(InstanceIds=head + asg + other)


class SlowEc2:
    """Instances that take two polls to go from shutting-down to terminated; one relaunched meanwhile."""

    def __init__(self) -> None:
        self.states = {"i-1": "running", "i-2": "stopped"}
        self.polls = 0
        self.terminated: list[list[str]] = []

    def get_paginator(self, _name: str) -> Any:
        outer = self

        class Pages:
            def paginate(self, **_: Any) -> list[dict[str, Any]]:
                outer.polls += 1
                if outer.polls == 3:
                    outer.states["i-3"] = "pending"  # an agent still running launched one more
                if outer.polls == 5:
                    outer.states = {k: ("terminated" if v == "shutting-down" else v) for k, v in outer.states.items()}
                live = [{"InstanceId": k, "State": {"Name": v}} for k, v in outer.states.items() if v != "terminated"]
                return [{"Reservations": [{"Instances": live}]}]

        return Pages()

    def terminate_instances(self, InstanceIds: list[str]) -> None:
        self.terminated.append(InstanceIds)
        for i in InstanceIds:
            self.states[i] = "shutting-down"


def test_teardown_waits_and_catches_late_launches() -> None:
    ec2 = SlowEc2()
    sleeps: list[float] = []
    done = td.teardown("c", "us-east-1", client=ec2, poll=1.0, sleep=sleeps.append)
    assert done == ["i-1", "i-2", "i-3"] and ec2.terminated == [["i-1", "i-2"], ["i-3"]]
    assert all(v == "terminated" for v in ec2.states.values()) and sleeps == [1.0, 1.0]


def test_teardown_gives_up_at_the_deadline() -> None:
    ec2 = SlowEc2()
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    with pytest.raises(td.TeardownTimeout, match="i-1"):
        td.teardown("c", "us-east-1", client=ec2, timeout=0.5, poll=1.0, sleep=sleep, clock=lambda: now[0])
