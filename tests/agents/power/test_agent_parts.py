"""The pure pieces the agent's subcommands are built from, tested without EC2 or Slurm: the
inventory's view of instances per node, which instance a node keeps, how nodes split into node
groups, and the DOWN reason a resume-fail gives. The end-to-end tests (moto, fake and real
scontrol) cover the same code through the subcommands; these pin the rules themselves."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from gpucluster_agents.contract import TAG_NODE_GROUP, TAG_NODE_NAME
from gpucluster_agents.contract import parse as parse_config
from gpucluster_agents.power.ec2 import Instance
from gpucluster_agents.power.holds import Holds, resume_timeout_reason
from gpucluster_agents.power.inventory import Inventory, best_instance, is_dynamic, split_by_group
from tests.agents.test_config import MINIMAL


def _inst(iid: str, state: str = "running", minute: int = 0, node: str | None = None) -> Instance:
    tags = {TAG_NODE_GROUP: "p5"}
    if node is not None:
        tags[TAG_NODE_NAME] = node
    return Instance(iid, state, datetime(2026, 1, 1, 0, minute, tzinfo=timezone.utc), None, "p5.48xlarge", tags)


def test_inventory_follows_tags_and_terminations() -> None:
    inv = Inventory([_inst("i-2", node="p5-1"), _inst("i-1", node="p5-1"), _inst("i-3", state="stopped", node="p5-1")])
    assert [i.id for i in inv.of_node("p5-1")] == ["i-1", "i-2", "i-3"]
    assert [i.id for i in inv.live_of_node("p5-1")] == ["i-1", "i-2"]
    inv.tag_node("i-2", "p5-2")
    assert [i.id for i in inv.of_node("p5-1")] == ["i-1", "i-3"]
    assert [i.id for i in inv.of_node("p5-2")] == ["i-2"]
    assert inv.by_id["i-2"].node == "p5-2"
    inv.drop(["i-1", "i-unknown"])
    assert [i.id for i in inv.all()] == ["i-2", "i-3"]
    inv.tag_node("i-gone", "p5-3")  # an instance the inventory no longer has is not resurrected
    assert inv.of_node("p5-3") == []


def test_a_node_keeps_its_running_instance_then_the_oldest() -> None:
    assert best_instance([_inst("i-a", "pending", minute=0), _inst("i-b", "running", minute=5)]).id == "i-b"
    assert best_instance([_inst("i-b", minute=5), _inst("i-c", minute=1), _inst("i-a", minute=1)]).id == "i-a"


def test_nodes_split_by_group_in_hostlist_order_without_repeats() -> None:
    cfg = parse_config(MINIMAL)
    by_group, unknown = split_by_group(cfg, ["p5-10", "p5-2", "x-1", "p5-2", "p5-1"])
    assert by_group == {"p5": ["p5-1", "p5-2"]}  # p5-10 is past max_nodes 4
    assert unknown == ["p5-10", "x-1"]
    assert is_dynamic(cfg, "p5") and not is_dynamic(cfg, "other") and not is_dynamic(cfg, None)


def test_resume_fail_keeps_a_live_hold_reason_and_holds_anew_otherwise() -> None:
    cfg = parse_config(MINIMAL)
    held = "gpucluster: InsufficientInstanceCapacity p5.48xlarge: no capacity"
    holds: Holds = {
        "groups": {},
        "nodes": {
            "p5-1": {"since": 0.0, "until": 2000.0, "code": "InsufficientInstanceCapacity", "reason": held},
            "p5-2": {"since": 0.0, "until": 500.0, "code": "InsufficientInstanceCapacity", "reason": held},
        },
    }
    assert resume_timeout_reason(cfg, holds, "p5-1", "no instance", now=1000.0) == held
    assert holds["nodes"]["p5-1"]["until"] == 2000.0
    timeout = "gpucluster: ResumeTimeout, node did not register (i-1)"
    assert resume_timeout_reason(cfg, holds, "p5-2", "i-1", now=1000.0) == timeout
    assert resume_timeout_reason(cfg, holds, "p5-3", "i-1", now=1000.0) == timeout
    for node in ("p5-2", "p5-3"):
        assert holds["nodes"][node] == {
            "since": 1000.0,
            "until": 1000.0 + cfg.failure_hold_seconds,
            "seconds": cfg.failure_hold_seconds,
            "code": "ResumeTimeout",
            "reason": timeout,
            "applied": True,  # the caller records whether its DOWN reached Slurm (mark_applied)
        }


def test_state_files_root_writes_keep_the_state_dirs_owner(tmp_path: Path) -> None:
    # an operator's `release-brake` or `clear-protect` run as root by hand: the agent (slurm) must still read it
    import os

    from gpucluster_agents.power.state import read_json, write_json_atomic

    if os.geteuid() != 0:
        write_json_atomic(str(tmp_path / "x.json"), {"a": 1})  # not root: nothing to hand over
        assert read_json(str(tmp_path / "x.json")) == {"a": 1}
        return
    os.chown(tmp_path, 4321, 4321)
    write_json_atomic(str(tmp_path / "brake.json"), {"tripped": {}})
    st = os.stat(tmp_path / "brake.json")
    assert (st.st_uid, st.st_gid) == (4321, 4321)
