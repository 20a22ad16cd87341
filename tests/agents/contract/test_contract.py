"""The node contract: what the renderer writes, the agent parses back equal, and every field is read."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path

from gpucluster_agents import contract
from gpucluster_agents.contract import AgentConfig, Capacity, NodeGroup
from gpucluster_agents.contract.repair import Repair

PACKAGE = Path(contract.__file__).parent.parent  # gpucluster_agents/ (the contract is a subpackage)

FULL = AgentConfig(
    cluster_name="demo",
    region="eu-west-1",
    node_groups=(
        NodeGroup(
            name="p5",
            node_prefix="gpu",
            max_nodes=3,
            instance_type="p5.48xlarge",
            launch_template_id="lt-0123456789abcdef0",
            launch_template_version="7",
            subnet_ids=("subnet-0a",),
            efa_enabled=True,
            placement_group="pg",
            capacity=Capacity("capacity-reservation", "cr-0123", "arn:aws:resource-groups:eu-west-1:1:group/g"),
            tags=(("cost-center", "42"), ("team", "ml")),
            mode="static",
        ),
        NodeGroup("cpu", "cpu", 1, "c7i.large", "lt-0b", "$Latest", ("subnet-0b", "subnet-0c")),
    ),
    endpoint_url="http://127.0.0.1:5000",
    log_file="/l.log",
    state_dir="/s",
    slurm_bin_dir="/opt/slurm/bin",
    topology_conf=None,
    insufficient_capacity_hold_seconds=1,
    failure_hold_seconds=2,
    orphan_grace_seconds=3,
    lock_timeout_seconds=4,
    max_instances_per_fleet=5,
    api_retry_mode="standard",
    api_max_attempts=6,
    api_concurrency=7,
    repair=Repair(
        max_share_percent=25,
        reboot_window_seconds=8,
        reboot_settle_seconds=9,
        protect_after_failures=3,
        share_window_seconds=10,
        brake_percent=30,
        brake_window_seconds=600,
    ),
)


def test_every_field_round_trips_through_json() -> None:
    assert contract.parse(json.loads(contract.to_json(FULL))) == FULL


def test_defaults_are_left_out_and_come_back() -> None:
    small = AgentConfig("demo", "us-east-1", (NodeGroup("p5", "p5", 2, "p5.48xlarge", "lt-0a", "$Default", ("subnet-0a",)),))
    doc = contract.to_dict(small)
    assert "endpoint_url" not in doc and "api_concurrency" not in doc and "repair" not in doc
    assert "node_prefix" not in doc["node_groups"][0] and "tags" not in doc["node_groups"][0]
    assert doc["node_groups"][0]["capacity"] == {"type": "on-demand"}
    assert contract.parse(doc) == small


def _attribute_reads() -> str:
    """The agent's code, less the contract's parser and writer: where a field must be used to count as read."""
    contract_text = (PACKAGE / "contract" / "__init__.py").read_text()
    text = contract_text[contract_text.index("class ConfigError") : contract_text.index("def _fields_dict")]
    parser_and_writer = {"contract/__init__.py", "contract/repair.py", "contract/jsonread.py", "config.py"}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name not in parser_and_writer and not name.startswith("health/"):  # the agent's code, not the health program's
            text += path.read_text()
    return text


def test_every_field_of_the_contract_is_read_by_the_agent() -> None:
    """Fails when a key is added (or kept) that nothing on the node uses: the dead ``partition`` key was one."""
    code = _attribute_reads()
    unread = [
        f"{cls.__name__}.{f.name}"
        for cls in (AgentConfig, NodeGroup, Capacity, Repair)
        for f in fields(cls)
        if not re.search(rf"\.{f.name}\b(?!\()", code)
    ]
    assert unread == []


def test_every_key_the_renderer_writes_is_a_field() -> None:
    doc = contract.to_dict(FULL)
    assert set(doc) <= contract.TOP_KEYS
    for g in doc["node_groups"]:
        assert set(g) <= contract.GROUP_KEYS and set(g["capacity"]) <= contract.CAPACITY_KEYS
    assert "partition" not in contract.GROUP_KEYS


def test_node_name_rule() -> None:
    assert contract.node_names("train-a", 3) == ["train-a-1", "train-a-2", "train-a-3"]
    assert contract.hostrange("p5", 16) == "p5-[1-16]" and contract.hostrange("p5", 1) == "p5-1"
    g = FULL.node_groups[0]
    assert g.node_names() == ["gpu-1", "gpu-2", "gpu-3"] and FULL.group_of_node("gpu-2") is g


def test_repair_section_is_checked_key_by_key() -> None:
    doc = contract.to_dict(FULL)
    assert doc["repair"] == {
        "max_share_percent": 25,
        "reboot_window_seconds": 8,
        "reboot_settle_seconds": 9,
        "protect_after_failures": 3,
        "share_window_seconds": 10,
        "brake_percent": 30,
        "brake_window_seconds": 600,
    }
    doc["repair"] = {"max_share_percent": 0, "protect_after_failures": -1, "reboot_windw_seconds": 1, "brake_percent": 101}
    try:
        contract.parse(doc)
    except contract.ConfigError as exc:
        assert exc.errors == [
            "repair.reboot_windw_seconds: unknown key (allowed: brake_percent, brake_window_seconds, max_share_percent, "
            "protect_after_failures, reboot_settle_seconds, reboot_window_seconds, share_window_seconds)",
            "repair.max_share_percent: must be between 1 and 100, got 0",
            "repair.protect_after_failures: must be between 0 and 10000, got -1",
            "repair.brake_percent: must be between 0 and 100, got 101",
        ]
    else:
        raise AssertionError("a bad repair section parsed")
    doc["repair"] = [1]
    try:
        contract.parse(doc)
    except contract.ConfigError as exc:
        assert exc.errors == ["repair: must be an object, got [1]"]


def test_the_cluster_name_grammar_is_written_once_and_a_newline_is_no_name() -> None:
    """The config's name rule is the contract's object (not a copy), and both ends refuse what the other refuses:
    an upper-case name, one too long, one with a trailing newline (which ``$`` alone would let through)."""
    import pytest

    from gpucluster.config import base
    from gpucluster.config.cluster import ClusterSpec  # noqa: F401  (the config side imports the grammar)
    from gpucluster_agents.contract import grammar

    assert base.NAME_RE is grammar.NAME_RE
    good = json.loads(contract.to_json(FULL))
    assert contract.parse(good).cluster_name == "demo"
    for bad in ("demo\n", "Demo", "d" * 33, "demo-", "1demo"):
        with pytest.raises(ValueError, match=re.escape(grammar.NAME_HINT)):
            base.check_name(bad, "cluster name")
        with pytest.raises(contract.ConfigError, match="cluster_name"):
            contract.parse({**good, "cluster_name": bad})
