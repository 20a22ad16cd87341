"""Agent config: defaults, and one clear error per bad key (all of them at once)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpucluster_agents import cli
from gpucluster_agents.config import load_config
from gpucluster_agents.contract import ConfigError
from gpucluster_agents.contract import parse as parse_config
from tests.agents.conftest import REPO

MINIMAL: dict[str, Any] = {
    "cluster_name": "demo",
    "region": "us-east-1",
    "node_groups": [
        {
            "name": "p5",
            "max_nodes": 4,
            "instance_type": "p5.48xlarge",
            "launch_template_id": "lt-0123456789abcdef0",
            "subnet_ids": ["subnet-0123456789abcdef0"],
        }
    ],
}


def test_minimal_config_gets_documented_defaults() -> None:
    cfg = parse_config(MINIMAL)
    assert cfg.endpoint_url is None
    assert cfg.log_file == "/var/log/gpucluster/agent.log"
    assert cfg.state_dir == "/var/lib/gpucluster/agent"
    assert cfg.scontrol == "/usr/bin/scontrol"
    assert cfg.topology_conf == "/etc/slurm/topology.conf"
    assert cfg.insufficient_capacity_hold_seconds == 600
    assert cfg.max_instances_per_fleet == 500
    g = cfg.node_groups[0]
    assert g.node_prefix == "p5"
    assert g.launch_template_version == "$Default"
    assert g.capacity.type == "on-demand"
    assert g.node_names() == ["p5-1", "p5-2", "p5-3", "p5-4"]
    assert g.owns("p5-4") and not g.owns("p5-5") and not g.owns("p5-0") and not g.owns("p5-01") and not g.owns("p50-1")


def test_full_group_options() -> None:
    raw = copy.deepcopy(MINIMAL)
    raw["node_groups"][0].update(
        {
            "node_prefix": "p5-od",
            "launch_template_version": 3,
            "efa_enabled": True,
            "capacity": {"type": "capacity-reservation", "reservation_id": "cr-0123456789abcdef0"},
            "tags": {"team": "ml", "cost-center": "42"},
        }
    )
    cfg = parse_config(raw)
    g = cfg.node_groups[0]
    assert g.launch_template_version == "3"
    assert g.owns("p5-od-2") and not g.owns("p5-2")
    assert g.tags == (("cost-center", "42"), ("team", "ml"))
    assert cfg.group_of_node("p5-od-1") is g


def test_group_names_may_contain_dashes_and_nodes_belong_by_their_last_dash() -> None:
    """Spec node-group names are DNS-style (``train-a``); the agent keeps them as they are (tags allow
    '-') and finds a node's group by the text before the node name's last '-'."""
    raw = copy.deepcopy(MINIMAL)
    second = copy.deepcopy(raw["node_groups"][0])
    second.update({"name": "p5-od", "mode": "static"})
    raw["node_groups"].append(second)
    cfg = parse_config(raw)
    plain, dashed = cfg.node_groups
    assert (dashed.name, dashed.node_prefix, dashed.mode, dashed.static) == ("p5-od", "p5-od", "static", True)
    assert (plain.mode, plain.static) == ("dynamic", False)
    assert dashed.node_names()[:2] == ["p5-od-1", "p5-od-2"]
    assert cfg.group_of_node("p5-od-3") is dashed and cfg.group_of_node("p5-3") is plain
    assert cfg.group_of_node("p5-od") is None  # 'od' is not a node number


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        keys = path.split(".")
        cur: Any = doc
        for k in keys[:-1]:
            cur = cur[int(k)] if k.isdigit() else cur[k]
        last = keys[-1]
        if value is _DELETE:
            del cur[last]
        else:
            cur[last] = value

    return apply


_DELETE = object()

ERRORS = [
    ("cluster_name", _DELETE, "cluster_name: required key is missing"),
    ("clustr_name", "x", "clustr_name: unknown key"),
    ("cluster_name", "bad name!", "cluster_name: 'bad name!' is not valid"),
    ("region", "US-EAST", "region: 'US-EAST' is not valid: expected a region like us-east-1"),
    ("endpoint_url", "localhost:5000", "endpoint_url: 'localhost:5000' is not valid: expected an http(s) URL"),
    ("log_file", "agent.log", "log_file: must be an absolute path"),
    ("max_instances_per_fleet", 501, "max_instances_per_fleet: must be between 1 and 500, got 501"),
    ("insufficient_capacity_hold_seconds", "600", "insufficient_capacity_hold_seconds: must be an integer"),
    ("api_retry_mode", "legacy", "api_retry_mode: 'legacy' is not one of standard, adaptive"),
    ("schema_version", 2, "schema_version: this agent reads schema_version 1"),
    ("node_groups", [], "node_groups: must be a non-empty list"),
    ("node_groups.0.name", "P5-x", "node_groups[0].name: 'P5-x' is not valid"),
    ("node_groups.0.name", "p5-", "node_groups[0].name: 'p5-' is not valid: 1-32 lowercase letters, digits and '-'"),
    # the config's own grammar (contract.grammar.NAME_RE): a name the config would refuse is refused here too
    ("node_groups.0.name", "5p", "node_groups[0].name: '5p' is not valid: 1-32 lowercase letters"),
    ("node_groups.0.name", "p5_a", "node_groups[0].name: 'p5_a' is not valid: 1-32 lowercase letters"),
    ("node_groups.0.name", "p" * 33, f"node_groups[0].name: '{'p' * 33}' is not valid: 1-32 lowercase letters"),
    ("node_groups.0.name", "-p5", "node_groups[0].name: '-p5' is not valid"),
    ("node_groups.0.mode", "elastic", "node_groups[0].mode: 'elastic' is not one of dynamic, static"),
    ("node_groups.0.max_nodes", 0, "node_groups[0].max_nodes: must be between 1 and 100000, got 0"),
    ("node_groups.0.instance_typ", "p5", "node_groups[0].instance_typ: unknown key"),
    ("node_groups.0.launch_template_id", "template", "node_groups[0].launch_template_id: 'template' is not valid"),
    ("node_groups.0.launch_template_version", "latest", "node_groups[0].launch_template_version: must be $Default"),
    ("node_groups.0.subnet_ids", [], "node_groups[0].subnet_ids: must be a non-empty list"),
    ("node_groups.0.subnet_ids", ["sn-1"], "node_groups[0].subnet_ids[0]: 'sn-1' is not a subnet id"),
    ("node_groups.0.capacity", {"type": "reserved"}, "node_groups[0].capacity.type: 'reserved' is not one of on-demand"),
    (
        "node_groups.0.capacity",
        {"type": "capacity-block"},
        "node_groups[0].capacity.reservation_id: required when type is capacity-block",
    ),
    ("node_groups.0.capacity", {"type": "spot", "reservation_id": "cr-0abc"}, "only apply to capacity reservations"),
    ("node_groups.0.capacity", {"type": "on-demand", "size": 3}, "node_groups[0].capacity.size: unknown key"),
    ("node_groups.0.tags", {"gpucluster:node-name": "x"}, "node_groups[0].tags.gpucluster:node-name: keys starting with"),
    ("node_groups.0.tags", {"k": 1}, "node_groups[0].tags.k: tag value must be a string"),
]


@pytest.mark.parametrize(("path", "value", "expected"), ERRORS, ids=[e[2][:40] for e in ERRORS])
def test_errors_name_the_bad_key(path: str, value: Any, expected: str) -> None:
    doc = copy.deepcopy(MINIMAL)
    _set(path, value)(doc)
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    assert any(expected in e for e in info.value.errors), info.value.errors


def test_efa_group_needs_one_subnet_and_capacity_block_no_placement_group() -> None:
    doc = copy.deepcopy(MINIMAL)
    doc["node_groups"][0].update(
        {
            "efa_enabled": True,
            "subnet_ids": ["subnet-0a", "subnet-0b"],
            "placement_group": "pg",
            "capacity": {"type": "capacity-block", "reservation_id": "cr-0abc"},
        }
    )
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    msg = str(info.value)
    assert "node_groups[0].subnet_ids: an EFA group must stay in one availability zone" in msg
    assert "node_groups[0].placement_group: placement groups cannot be used with capacity blocks" in msg


def test_every_error_is_reported_at_once() -> None:
    doc = copy.deepcopy(MINIMAL)
    doc["region"] = "nowhere"
    doc["node_groups"].append(copy.deepcopy(doc["node_groups"][0]))  # same name and prefix twice
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    errs = info.value.errors
    assert len(errs) == 3, errs
    assert any(e.startswith("region:") for e in errs)
    assert any("node_groups[1].name: 'p5' is also used by node_groups[0]" in e for e in errs)
    assert any("node_groups[1].node_prefix: 'p5' is also used by node_groups[0]" in e for e in errs)


def test_load_config_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"cluster_name": "x",\n  oops}')
    with pytest.raises(ConfigError, match=r"bad.json: invalid JSON at line 2"):
        load_config(str(bad))


def test_env_var_selects_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "agent.json"
    p.write_text(json.dumps(MINIMAL))
    monkeypatch.setenv("GPUCLUSTER_AGENT_CONFIG", str(p))
    assert load_config().cluster_name == "demo"
    assert load_config(str(p)).cluster_name == "demo"


def test_cli_exits_2_on_config_error_and_names_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = copy.deepcopy(MINIMAL)
    doc["node_groups"][0]["capacity"] = {"type": "reserved"}
    p = tmp_path / "agent.json"
    p.write_text(json.dumps(doc))
    assert cli.main(["--config", str(p), "resume", "p5-1"]) == 2
    assert "node_groups[0].capacity.type: 'reserved'" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [[], ["launch", "p5-1"], ["resume"], ["suspend", " "]])
def test_cli_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2


def test_module_entry_point_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gpucluster_agents", "--help"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0
    assert "resume-fail" in out.stdout
