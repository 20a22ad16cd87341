"""The accounts contract parser (gpucluster_agents/contract/accounts.py): reads what config22's renderer writes,
refuses what the reconcile could not apply safely, and names each problem's key."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpucluster_agents.contract import ConfigError
from gpucluster_agents.contract.accounts import load, parse, stored_description

CONTRACT: dict[str, Any] = {
    "schema": 1,
    "cluster": "slurm-p5",
    "qos": [
        {"name": "normal", "description": "gpucluster: guaranteed jobs", "priority": 100, "preempt": ["borrow"],
         "preempt_mode": "cluster", "grp_tres": {}, "max_wall_minutes": None},
        {"name": "borrow", "description": "gpucluster: opportunistic jobs beyond a team's guarantee, requeued when needed",
         "priority": 0, "preempt": [], "preempt_mode": "requeue", "grp_tres": {"gres/gpu": 64}, "max_wall_minutes": None},
    ],
    "accounts": [
        {"name": "research", "description": "gpucluster: team research", "fairshare": 40, "grp_tres": {"gres/gpu": 40},
         "max_wall_minutes": 10080, "qos": ["normal", "borrow"], "default_qos": "normal", "users": ["alice", "bob"],
         "groups": ["ml-research"]},
    ],
    "gpu_prices": [{"partition": "p5", "gpus_per_node": 8, "usd_per_gpu_hour": 12.2875}],
    "usage": {"bucket": "my-bucket", "prefix": "usage/"},
}  # fmt: skip


def errors(doc: Any) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        parse(doc)
    return exc.value.errors


def changed(path: str, value: Any) -> dict[str, Any]:
    """CONTRACT with one key path (``accounts.0.fairshare``) set; ``...`` removes it."""
    doc = copy.deepcopy(CONTRACT)
    *parents, last = path.split(".")
    obj: Any = doc
    for p in parents:
        obj = obj[int(p)] if p.isdigit() else obj[p]
    if value is ...:
        del obj[last]
    else:
        obj[last] = value
    return doc


def test_the_contract_example_reads_back_whole():
    c = parse(CONTRACT)
    assert c.cluster == "slurm-p5"
    assert [q.name for q in c.qos] == ["normal", "borrow"]
    borrow = c.qos[1]
    assert (borrow.preempt_mode, borrow.grp_tres, borrow.max_wall_minutes) == ("requeue", {"gres/gpu": 64}, None)
    (team,) = c.accounts
    assert (team.fairshare, team.grp_tres, team.max_wall_minutes) == (40, {"gres/gpu": 40}, 10080)
    assert (team.qos, team.default_qos, team.users, team.groups) == (
        ("normal", "borrow"),
        "normal",
        ("alice", "bob"),
        ("ml-research",),
    )
    assert c.gpu_prices[0].usd_per_gpu_hour == 12.2875 and c.usage is not None and c.usage.prefix == "usage/"
    assert parse(changed("usage", ...)).usage is None  # no daily file


def test_the_shipped_stack_s_rendered_contract_parses():
    from tests.e2e.teams_files import render_teams

    c = parse(render_teams("slurm-p5").contract)
    assert {a.name for a in c.accounts} == {"research", "applied"}
    assert all(k.startswith("gres/gpu") for a in c.accounts for k in a.grp_tres)


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("surprise", 1, "surprise: unknown key"),
        ("schema", 2, "schema: this agent reads schema 1"),
        ("accounts.0.description", "team research", "must start with 'gpucluster:'"),
        ("accounts.0.description", "gpucluster: a|b", "none of |"),
        ("accounts.0.name", "Research", "'Research' is not valid"),
        ("accounts.0.name", "root", "Slurm's own account"),
        ("accounts.0.fairshare", 0, "accounts[0].fairshare: must be between 1"),
        ("accounts.0.fairshare", ..., "accounts[0].fairshare: required key is missing"),
        ("accounts.0.grp_tres", {"gpu": 4}, "not a TRES name"),
        ("accounts.0.grp_tres", {"gres/gpu": -1}, "accounts[0].grp_tres.gres/gpu: must be an integer >= 0"),
        ("accounts.0.default_qos", "borrow2", "not in this account's qos list"),
        ("accounts.0.qos", ["normal", "fast"], "'fast' is not a QOS of this file"),
        ("accounts.0.users", ["alice", "alice"], "listed twice"),
        ("accounts.0.users", ["alice;rm"], "not valid: a POSIX user name"),
        ("qos.1.preempt_mode", "suspend", "'suspend' is not one of cluster, requeue, cancel, off"),
        ("qos.0.preempt", ["normal"], "cannot preempt itself"),
        ("usage.prefix", "/usage", "no leading /"),
    ],
)
def test_a_bad_contract_is_refused_naming_the_key(path: str, value: Any, message: str):
    found = errors(changed(path, value))
    assert any(message in e for e in found), found


def test_every_problem_is_reported_at_once():
    doc = changed("accounts.0.fairshare", 0)
    doc["qos"][1]["preempt_mode"] = "x"
    assert len(errors(doc)) == 2


def test_an_apostrophe_is_accepted_and_compared_as_sacctmgr_stores_it():
    assert stored_description(CONTRACT["qos"][1]["description"]).endswith("team`s guarantee, requeued when needed")


def test_load_reports_an_unreadable_file_as_a_config_error(tmp_path: Path):
    with pytest.raises(ConfigError, match="cannot read"):
        load(str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match="cannot read"):
        load(str(tmp_path / "bad.json"))
    (tmp_path / "ok.json").write_text(json.dumps(CONTRACT))
    assert load(str(tmp_path / "ok.json")).cluster == "slurm-p5"
