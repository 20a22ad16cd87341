"""EC2 network nodes -> topology.conf lines (pure), and the atomic write."""

from __future__ import annotations

import os
from pathlib import Path

from gpucluster_agents.contract.topology import HEADER, render_topology
from gpucluster_agents.power.topology import write_if_changed

P5 = [f"p5-{i}" for i in range(1, 7)]


def test_three_layer_tree_exact_lines() -> None:
    placements = {
        "p5-1": ["nn-a", "nn-b", "nn-c"],
        "p5-2": ["nn-a", "nn-b", "nn-c"],
        "p5-3": ["nn-a", "nn-b", "nn-d"],
        "p5-4": ["nn-a", "nn-e", "nn-f"],
    }
    assert render_topology(placements, [("p5", P5)]) == [
        *HEADER,
        "SwitchName=nn-c Nodes=p5-[1-2]",
        "SwitchName=nn-d Nodes=p5-3",
        "SwitchName=nn-f Nodes=p5-4",
        "SwitchName=nn-b Switches=nn-c,nn-d",
        "SwitchName=nn-e Switches=nn-f",
        "SwitchName=nn-a Switches=nn-b,nn-e",
        "SwitchName=unplaced-p5 Nodes=p5-[5-6]",
        "SwitchName=root Switches=nn-a,unplaced-p5",
    ]


def test_all_placed_under_one_top_has_no_root() -> None:
    placements = {n: ["nn-a", "nn-b", f"nn-c{int(n[-1]) % 2}"] for n in ["p5-1", "p5-2", "p5-3"]}
    assert render_topology(placements, [("p5", ["p5-1", "p5-2", "p5-3"])]) == [
        *HEADER,
        "SwitchName=nn-c0 Nodes=p5-2",
        "SwitchName=nn-c1 Nodes=p5-[1,3]",
        "SwitchName=nn-b Switches=nn-c0,nn-c1",
        "SwitchName=nn-a Switches=nn-b",
    ]


def test_four_layers_two_tops_and_two_groups() -> None:
    placements = {
        "p5-1": ["t1", "s1", "m1", "l1"],
        "p5-2": ["t2", "s2", "m2", "l2"],
        "g6e-1": ["t1", "s1", "m1", "l3"],
    }
    lines = render_topology(placements, [("p5", ["p5-1", "p5-2"]), ("g6e", ["g6e-1", "g6e-2"])])
    assert lines == [
        *HEADER,
        "SwitchName=l1 Nodes=p5-1",
        "SwitchName=l2 Nodes=p5-2",
        "SwitchName=l3 Nodes=g6e-1",
        "SwitchName=m1 Switches=l1,l3",
        "SwitchName=m2 Switches=l2",
        "SwitchName=s1 Switches=m1",
        "SwitchName=s2 Switches=m2",
        "SwitchName=t1 Switches=s1",
        "SwitchName=t2 Switches=s2",
        "SwitchName=unplaced-g6e Nodes=g6e-2",
        "SwitchName=root Switches=t1,t2,unplaced-g6e",
    ]


def test_switch_with_nodes_and_switches_gets_a_node_leaf() -> None:
    # p5-1 reports 3 layers, p5-2 four: nn-c would list both a switch and a node, which Slurm rejects.
    placements = {"p5-1": ["nn-a", "nn-b", "nn-c"], "p5-2": ["nn-a", "nn-b", "nn-c", "nn-d"]}
    assert render_topology(placements, [("p5", ["p5-1", "p5-2"])]) == [
        *HEADER,
        "SwitchName=nn-c-nodes Nodes=p5-1",
        "SwitchName=nn-d Nodes=p5-2",
        "SwitchName=nn-c Switches=nn-c-nodes,nn-d",
        "SwitchName=nn-b Switches=nn-c",
        "SwitchName=nn-a Switches=nn-b",
    ]


def test_nothing_placed() -> None:
    assert render_topology({}, [("p5", P5), ("g6e", ["g6e-1"])]) == [
        *HEADER,
        "SwitchName=unplaced-g6e Nodes=g6e-1",
        "SwitchName=unplaced-p5 Nodes=p5-[1-6]",
        "SwitchName=root Switches=unplaced-g6e,unplaced-p5",
    ]
    assert render_topology({"p5-1": []}, [("p5", ["p5-1"])]) == [*HEADER, "SwitchName=unplaced-p5 Nodes=p5-1"]


def test_write_if_changed_is_atomic_and_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "topology.conf"
    lines = ["SwitchName=s Nodes=p5-1"]
    assert write_if_changed(str(path), lines) is True
    assert path.read_text() == "SwitchName=s Nodes=p5-1\n"
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    inode = path.stat().st_ino
    assert write_if_changed(str(path), lines) is False
    assert path.stat().st_ino == inode  # untouched
    assert write_if_changed(str(path), ["SwitchName=s Nodes=p5-[1-2]"]) is True
    assert path.stat().st_ino != inode  # replaced by rename, never rewritten in place
    assert sorted(os.listdir(tmp_path)) == ["topology.conf"]  # no temp file left behind
