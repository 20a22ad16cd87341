"""Rolling replacement in the maintenance pass (``gpucluster_agents/power/roll.py``), against moto (behind the fault
proxy) and the fake scontrol: the maintenance window and its parsing, what makes an instance old, the roll stopping
on boot failures of the new version or with the repair brake (its undone drains handed back, nothing more drained)
and draining only inside the window. The share, a busy node replaced only after its job, static nodes through an Auto Scaling group, no job
killed and no node stranded: with the real slurmctld in ``tests/e2e/test_roll_e2e.py``."""

from __future__ import annotations

import calendar
from typing import Any

import pytest

from gpucluster_agents.contract import ConfigError, hostlist, parse
from gpucluster_agents.contract.updates import parse_window
from gpucluster_agents.power.roll import REASON, Target
from tests.agents.conftest import CLUSTER, Harness
from tests.agents.moto_env import AMI_ID, REGION, ec2_client, instances
from tests.agents.repair.test_quarantine import REPLACE, power_downs


@pytest.mark.parametrize(
    ("window", "weekday", "minute", "inside"),
    [
        ("02:00-06:00", 3, 2 * 60, True),
        ("02:00-06:00", 3, 6 * 60, False),  # the end is not inside
        ("Sat,Sun 02:00-06:00", 4, 3 * 60, False),  # a Friday
        ("Sat,Sun 02:00-06:00", 6, 3 * 60, True),
        ("Fri 22:00-04:00", 4, 23 * 60, True),  # Friday evening
        ("Fri 22:00-04:00", 5, 3 * 60, True),  # the Saturday morning after
        ("Fri 22:00-04:00", 3, 3 * 60, False),  # a Thursday morning is Wednesday's night
        ("Fri 22:00-04:00", 5, 23 * 60, False),
    ],
)
def test_maintenance_window(window: str, weekday: int, minute: int, inside: bool) -> None:
    assert parse_window(window).contains(weekday, minute) is inside


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2-6", "is not a maintenance window; write HH:MM-HH:MM in UTC"),
        ("Sat 25:00-06:00", "'25:00' in 'Sat 25:00-06:00' is not a time of day"),
        ("Sam 02:00-06:00", "'Sam' in 'Sam 02:00-06:00' is not a day"),
        ("02:00-02:00", "is an empty window"),
    ],
)
def test_bad_maintenance_window_is_a_config_error_naming_the_key(text: str, message: str) -> None:
    doc = {"cluster_name": "c", "region": REGION, "updates": {"maintenance_window": text}, "node_groups": []}
    with pytest.raises(ConfigError) as err:
        parse(doc)
    assert any(e.startswith("updates.maintenance_window: ") and message in e for e in err.value.errors), err.value.errors


def test_an_instance_is_old_by_its_image_or_its_launch_template_version() -> None:
    from datetime import datetime, timezone

    from gpucluster_agents.power.ec2 import Instance

    t = Target("3", "ami-new")
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    v = "aws:ec2launchtemplate:version"
    assert not t.outdated(Instance("i-1", "running", at, None, "p5.48xlarge", {v: "3"}, "ami-new"))
    assert t.outdated(Instance("i-2", "running", at, None, "p5.48xlarge", {v: "3"}, "ami-old"))
    assert t.outdated(Instance("i-3", "running", at, None, "p5.48xlarge", {v: "2"}, "ami-new"))  # new user data
    assert not t.outdated(Instance("i-4", "running", at, None, "p5.48xlarge", {}, ""))  # unknown: never rolled
    named = Target("", "ami-new")  # the config names the image (NodeGroup.image_id): the image alone decides
    assert not named.outdated(Instance("i-5", "running", at, None, "p5.48xlarge", {v: "9"}, "ami-new"))


# ---------------------------------------------------------------------------- against moto
def up(harness: Harness, nodes: str) -> dict[str, str]:
    assert harness.slurm_resume(nodes) == 0
    harness.slurm.set(nodes, "IDLE+CLOUD")
    return {n: ids[0] for n, ids in harness.nodes().items()}


def new_version(harness: Harness, group_lt: str) -> str:
    """A new image in a new launch template version, made the default (what ``pulumi up`` does); its AMI id."""
    ec2 = ec2_client(harness.moto.url)
    ami = ec2.copy_image(SourceImageId=AMI_ID, SourceRegion=REGION, Name="gpucluster-test-next")["ImageId"]
    lt = harness.world.launch_templates[group_lt]
    v = ec2.create_launch_template_version(LaunchTemplateId=lt, LaunchTemplateData={"ImageId": ami})["LaunchTemplateVersion"]
    ec2.modify_launch_template(LaunchTemplateId=lt, DefaultVersion=str(v["VersionNumber"]))
    return ami


def drained(harness: Harness) -> list[str]:
    return sorted(n for n, s in harness.slurm.data()["nodes"].items() if s["reason"] == REASON and "DRAIN" in s["state"])


def image_of(harness: Harness) -> dict[str, str]:
    return {
        i["tags"]["gpucluster:node-name"]: i["ImageId"]
        for i in instances(harness.moto.url, CLUSTER)
        if "gpucluster:node-name" in i["tags"]
    }


@pytest.fixture
def rolling(harness: Harness) -> Harness:
    harness.config["updates"] = {"max_drained_percent": 25}  # 4 of p5's 16 nodes
    for g in harness.config["node_groups"]:
        g["launch_template_version"] = "$Default"
    return harness


def power_downs_pending(h: Harness) -> list[str]:
    return sorted(n for n, s in h.slurm.data()["nodes"].items() if "POWERING_DOWN" in s["state"])


def test_the_roll_stops_on_boot_failures_of_the_new_version_and_hands_its_nodes_back(rolling: Harness, capsys: Any) -> None:
    h = rolling
    h.config["updates"] = {"max_drained_percent": 13}  # 2 of p5's 16 nodes
    up(h, "p5-[1-4]")
    h.slurm.set("p5-1", "MIXED+CLOUD")  # a job runs on p5-1
    new_version(h, "p5")
    assert h.run("maintain") == 0
    assert drained(h) == ["p5-2", "p5-3"]  # idle ones first, the share at most
    assert h.run("maintain") == 0  # idle and drained: powered down, the next drained
    assert power_downs_pending(h) == ["p5-2", "p5-3"] and drained(h) == []
    assert h.slurm_suspend("p5-[2-3]") == 0
    assert h.run("maintain") == 0
    assert drained(h) == ["p5-1", "p5-4"]  # p5-1 waits for its job
    # the new image never boots: the next two resumes time out
    assert h.slurm_resume("p5-[2-3]") == 0
    assert h.run("resume-fail", "p5-[2-3]") == 0
    assert h.run("maintain") == 0
    assert "decision roll-stop group=p5: 2 consecutive boot failures since the roll began" in h.log_text()
    assert h.run("maintain") == 0
    assert drained(h) == []  # the undone drains are handed back, nothing more is drained
    assert "DRAIN" not in h.slurm.node("p5-1")["state"] and h.slurm.node("p5-4")["state"] == "IDLE+CLOUD"
    assert "p5-4" not in [n for e in power_downs(h) for n in hostlist.expand(e)]  # stays in service on the old image
    capsys.readouterr()
    assert h.run("status") == 0
    out = capsys.readouterr().out
    assert "roll group p5: target 2/ami-" in out and "STOPPED: 2 consecutive boot failures since the roll began" in out, out


def test_outside_the_maintenance_window_nothing_is_drained(rolling: Harness) -> None:
    h = rolling
    up(h, "p5-[1-2]")
    new_version(h, "p5")
    h.config["updates"]["maintenance_window"] = "Sat 02:00-04:00"
    h.now = calendar.timegm((2026, 11, 26, 12, 0, 0))  # a Thursday noon
    assert h.run("maintain") == 0
    assert drained(h) == [] and "outside the maintenance window" in h.log_text()
    h.now = calendar.timegm((2026, 11, 28, 3, 0, 0))  # Saturday 03:00
    assert h.run("maintain") == 0
    assert drained(h) == ["p5-1", "p5-2"]


def test_fault_roll_stops_with_brake(rolling: Harness, capsys: Any) -> None:
    """The first replacements come back unhealthy and trip the repair brake: the roll stops with it (its drained,
    not yet replaced nodes handed back, no more drained) and goes on only once an operator releases the brake."""
    h = rolling  # a share of 4
    up(h, "p5-[1-12]")
    new_version(h, "p5")
    assert h.run("maintain") == 0 and drained(h) == ["p5-1", "p5-2", "p5-3", "p5-4"]
    assert h.run("maintain") == 0 and power_downs_pending(h) == ["p5-1", "p5-2", "p5-3", "p5-4"]
    assert h.slurm_suspend("p5-[1-4]") == 0
    assert h.run("maintain") == 0 and drained(h) == ["p5-5", "p5-6", "p5-7", "p5-8"]
    # the replacements boot and health drains every one of them: 4 of 12 running, more than 20 %
    up(h, "p5-[1-4]")
    h.slurm.set("p5-[1-4]", "IDLE+CLOUD+DRAIN", REPLACE)
    before = len(power_downs(h))
    assert h.run("maintain") == 0
    assert "decision brake group=p5: 4 of 12" in h.log_text()
    assert power_downs(h)[before:] == []  # the drained healthy nodes are not replaced by the bad image
    assert drained(h) == [] and all(h.slurm.node(f"p5-{i}")["state"] == "IDLE+CLOUD" for i in range(5, 13))
    assert "decision roll-stop group=p5: the group's repair brake is on (brake: 4 of 12 drained in 60 min)" in h.log_text()
    assert h.run("maintain") == 0 and drained(h) == []  # nothing more drained while it lasts
    capsys.readouterr()
    assert h.run("status") == 0
    assert "STOPPED: the group's repair brake is on (brake: 4 of 12 drained in 60 min)" in capsys.readouterr().out
    # the operator fixed the cause and released the brake: the roll goes on
    assert h.run("release-brake", "p5") == 0
    assert h.run("maintain") == 0
    assert "decision roll-go-on group=p5: the repair brake is off again" in h.log_text()
    assert drained(h) != []
