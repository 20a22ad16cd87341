"""Quarantine with a brake (docs/health.md, "What happens on a failure"), against moto behind the fault proxy and the
fake scontrol, with a stepped clock: the share of a group in repair is taken of its running nodes and a
repair counts until its share window has passed (not only until power-down); more than ``brake_percent``
of a group drained by health within ``brake_window_seconds`` stops every repair of the group (the nodes
stay drained, their reasons and ``status`` say so) until ``release-brake``; the repair record is on disk
before RebootInstances and the drain, so a SIGKILL anywhere in between leaves a node the next pass
finishes, and a ``rebooted`` drain without a record is rechecked and handed back."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.agents.conftest import Harness
from tests.agents.power.test_faults import assert_clean
from tests.agents.repair.test_quarantine import REBOOT, REPLACE, power_downs, up
from tests.agents.test_orphans import crash

NOTE = "(brake: 16 of 16 drained in 60 min)"


def reasons(harness: Harness, nodes: list[str]) -> dict[str, str | None]:
    return {n: harness.slurm.node(n)["reason"] for n in nodes}


def drained(harness: Harness, node: str) -> bool:
    return "DRAIN" in harness.slurm.node(node)["state"]


@pytest.mark.parametrize(
    ("n", "m", "percent", "expected"),
    [(16, 16, 20, True), (4, 16, 20, True), (3, 16, 20, False), (1, 1, 20, False), (2, 4, 20, True), (16, 16, 0, False)],
)
def test_the_brake_trips_above_its_share_and_never_for_a_single_node(n: int, m: int, percent: int, expected: bool) -> None:
    from gpucluster_agents.repair.brake import trips

    assert trips(n, m, percent) is expected


# ---------------------------------------------------------------------------- the share
def test_the_share_is_of_running_nodes_and_a_repair_counts_past_power_down(harness: Harness) -> None:
    # 100 nodes configured, 10 running, all 10 drained "(replace)"; the brake off to see the share alone
    harness.group("p5")["max_nodes"] = 100
    harness.config["repair"] = {"brake_percent": 0}
    real = time.time()
    harness.now = real
    up(harness, "p5-[1-10]")
    harness.slurm.set("p5-[1-10]", "IDLE+CLOUD+DRAIN", REPLACE)
    assert harness.run("maintain") == 0
    assert power_downs(harness) == ["p5-1"]  # 10 % of 10 running, not 10 % of 100 configured
    assert "1 of group p5 in repair (limit 1 of 10 running)" in harness.log_text()
    assert harness.slurm_suspend("p5-1") == 0  # powered down: the repair is over, the node not back yet
    harness.now = real + 60
    assert harness.run("maintain") == 0
    assert power_downs(harness) == ["p5-1"]  # it still counts for share_window_seconds
    harness.now = real + 60 + 901
    assert harness.run("maintain") == 0
    assert power_downs(harness) == ["p5-1", "p5-2"]
    assert harness.slurm_suspend("p5-2") == 0
    assert all(drained(harness, f"p5-{i}") for i in range(3, 11))  # the rest wait, drained, no job killed


# ---------------------------------------------------------------------------- the brake
def test_a_group_wide_drain_trips_the_brake_until_an_operator_releases_it(
    harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = [f"p5-{i}" for i in range(1, 17)]
    real = time.time()
    harness.now = real
    up(harness, "p5-[1-16]")
    harness.slurm.set("p5-[1-16]", "IDLE+CLOUD+DRAIN", REPLACE)  # e.g. a driver update, or a forged XID line
    assert harness.run("maintain") == 0
    assert power_downs(harness) == [] and harness.proxy.actions()["RebootInstances"] == 0
    assert reasons(harness, nodes) == dict.fromkeys(nodes, f"{REPLACE} {NOTE}")
    assert all(drained(harness, n) for n in nodes)
    log = harness.log_text()
    assert "ERROR decision brake group=p5: 16 of 16 nodes drained by health in 60 min (more than 20 %)" in log
    assert "release-brake p5" in log
    assert harness.run("status") == 0
    out = capsys.readouterr().out
    assert "group p5: BRAKE on: 16 of 16 drained in 60 min" in out and "gpucluster-agent release-brake p5" in out
    # later passes keep it: no replacement, no second note
    harness.now = real + 120
    assert harness.run("maintain") == 0
    assert power_downs(harness) == []
    assert reasons(harness, nodes) == dict.fromkeys(nodes, f"{REPLACE} {NOTE}")

    # the operator looked (and fixed the cause): release; repairs resume at the share, notes go
    assert harness.run("release-brake", "p5") == 0
    harness.now = real + 180
    assert harness.run("maintain") == 0
    assert power_downs(harness) == ["p5-1"]  # 10 % of 16, the drains seen before the release do not re-trip it
    assert reasons(harness, nodes[1:]) == dict.fromkeys(nodes[1:], REPLACE)
    assert harness.run("status") == 0
    assert "BRAKE on" not in capsys.readouterr().out
    assert harness.slurm_suspend("p5-1") == 0
    assert_clean(harness)


def test_the_brake_trips_on_the_drain_that_crosses_the_line(harness: Harness) -> None:
    real = time.time()
    harness.now = real
    up(harness, "p5-[1-16]")
    harness.slurm.set("p5-[1-3]", "IDLE+CLOUD+DRAIN", REPLACE)  # 3 of 16: under 20 %
    assert harness.run("maintain") == 0
    assert power_downs(harness) == ["p5-1"]
    harness.slurm.set("p5-4", "MIXED+CLOUD+DRAIN", REPLACE)  # the 4th within the hour, a job still runs on it
    harness.now = real + 60
    assert harness.run("maintain") == 0
    assert "decision brake group=p5: 4 of 16" in harness.log_text()
    note = "(brake: 4 of 16 drained in 60 min)"
    assert reasons(harness, ["p5-2", "p5-3", "p5-4"]) == dict.fromkeys(["p5-2", "p5-3", "p5-4"], f"{REPLACE} {note}")
    assert harness.slurm.node("p5-4")["state"] == "MIXED+CLOUD+DRAIN"  # its job runs on
    assert harness.slurm_suspend("p5-1") == 0
    harness.now = real + 60 + 901
    assert harness.run("maintain") == 0
    assert power_downs(harness) == ["p5-1"]  # braked: nothing more


def test_reasons_are_left_as_the_health_program_wrote_them_while_no_brake_is_on(harness: Harness) -> None:
    up(harness, "p5-[1-2]")
    long_reason = "gpucluster: " + "x" * 230 + " (replace)"  # longer than the agent's own reasons may be
    harness.slurm.set("p5-1", "MIXED+CLOUD+DRAIN", long_reason)  # its job runs on: no repair yet
    before = len(harness.slurm.updates())
    assert harness.run("maintain") == 0 and harness.run("maintain") == 0
    assert harness.slurm.updates()[before:] == [] and harness.slurm.node("p5-1")["reason"] == long_reason


# ---------------------------------------------------------------------------- a crash mid-repair
@pytest.mark.parametrize(
    ("where", "reboots"),
    [("RebootInstances before", 1), ("RebootInstances after", 2), ("drain after", 1)],
)
def test_a_crash_inside_a_reboot_repair_leaves_a_node_the_next_pass_finishes(harness: Harness, where: str, reboots: int) -> None:
    harness.config["repair"] = {"reboot_settle_seconds": 0}
    before = up(harness, "p5-1")
    harness.slurm.set("p5-1", "IDLE+CLOUD+DRAIN", REBOOT)
    call, when = where.split()
    if call == "drain":  # SIGKILL right after scontrol set the "rebooted" drain
        harness.slurm.set_flag("kill_parent_on", "reason=gpucluster: rebooted")
        proc = harness.spawn("maintain")
        assert proc.wait(timeout=60) == -signal.SIGKILL
        harness.slurm.set_flag("kill_parent_on", None)
    else:
        crash(harness, call, when, "maintain", "")
    record = json.loads((harness.tmp / "state" / "quarantine.json").read_text())["active"]["p5-1"]
    assert record["action"] == "reboot" and record["instance"] == before["p5-1"]  # written before the effects
    assert harness.run("maintain") == 0  # finishes the repair (the reboot again if it may not have happened)
    assert harness.run("maintain") == 0  # settled: handed back
    assert harness.slurm.node("p5-1")["state"] == "IDLE+CLOUD" and harness.slurm.node("p5-1")["reason"] is None
    done = [c for c in harness.proxy.calls if c.action == "RebootInstances" and c.status == 200]
    assert len(done) == reboots  # that reached EC2 (a crash "before" kills the agent as it sends one)
    assert power_downs(harness) == [] and harness.nodes() == {"p5-1": [before["p5-1"]]}
    assert_clean(harness)


def test_a_rebooted_drain_without_a_record_is_rechecked_and_handed_back(harness: Harness) -> None:
    harness.config["repair"] = {"reboot_settle_seconds": 300, "brake_percent": 0}  # 2 of 2 would trip it
    real = time.time()
    harness.now = real
    before = up(harness, "p5-[1-2]")
    marker = f"gpucluster: rebooted {before['p5-1']} for: row-remap pending 1 (reboot)"
    harness.slurm.set("p5-1", "IDLE+CLOUD+DRAIN", marker)  # quarantine.json lost (or from an older agent)
    harness.slurm.set("p5-2", "DOWN+CLOUD+DRAIN+NOT_RESPONDING", marker.replace(before["p5-1"], before["p5-2"]))
    assert harness.run("maintain") == 0
    assert "decision quarantine-recheck node=p5-1" in harness.log_text()
    assert drained(harness, "p5-1")  # it settles first, like any reboot
    harness.now = real + 301
    assert harness.run("maintain") == 0
    assert harness.slurm.node("p5-1")["state"] == "IDLE+CLOUD"  # responding, not drained again: handed back
    assert "replace" in harness.slurm.node("p5-2")["reason"]  # never came back: to be replaced
    assert harness.run("maintain") == 0
    assert power_downs(harness) == ["p5-2"]
    assert harness.proxy.actions()["RebootInstances"] == 0
    assert harness.slurm_suspend("p5-2") == 0


def test_a_brake_ends_when_the_config_turns_it_off_and_drains_from_ahead_of_the_clock_count_from_now(tmp_path: Path) -> None:
    from gpucluster_agents.contract import parse
    from gpucluster_agents.repair.brake import Brake
    from tests.agents.test_config import MINIMAL

    (tmp_path / "brake.json").write_text(
        json.dumps({"tripped": {"p5": {"since": 1.0, "drained": 4, "of": 4, "minutes": 60}}, "seen": {"p5-1": 9e9}})
    )
    off = parse({**MINIMAL, "repair": {"brake_percent": 0}})
    b = Brake(off, str(tmp_path), now=1000.0)
    assert b.seen == {"p5-1": 1000.0}  # a time ahead of now (clock stepped back) counts from now
    assert b.update("p5", running={"p5-1", "p5-2"}, repaired={}) is False and not b.on("p5")
    b.save()
    assert "p5" not in json.loads((tmp_path / "brake.json").read_text())["tripped"]
    on = parse(MINIMAL)
    b = Brake(on, str(tmp_path), now=1000.0)
    assert b.update("p5", running={"p5-1", "p5-2"}, repaired={"p5-2": 990.0}) is True  # 2 of 2 in the window
