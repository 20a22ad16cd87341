"""Declared users at a lab's scale, through the real stack program: slurm-p5 with 500 more declared users (all in a
team) plans, every node role's user data (head instance, login and compute launch templates) stays under EC2's limit,
and a user added, a team's members and quota changed leave every user data byte for byte as it was — the plan diff
names no restart and no roll, only the users' object and the teams' accounts updated in place; a team added (with its
directory on Lustre) is the same: the live list of the teams' directories changes, no user data."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from gpucluster.render.core import USER_DATA_LIMIT
from gpucluster.tools.plan.diff.changes import compare
from gpucluster.tools.plan.diff.teams import team_lines
from gpucluster.tools.plan.diff.text import render
from tests.tools.plan import prcases

USER_DATA = {"aws:ec2/instance:Instance": "userDataBase64", "aws:ec2/launchTemplate:LaunchTemplate": "userData"}


def lab(users: int, change=None) -> dict[str, Any]:
    """slurm-p5's plan with ``users`` more declared users (uids from 20000), all members of team applied."""

    def edit(config: dict[str, Any]) -> None:
        slurm = config["gpucluster:slurm"]
        slurm["identity"]["users"] += [{"name": f"u{i:04d}", "uid": 20000 + i, "groups": ["llm"]} for i in range(users)]
        slurm["teams"][1]["users"] += [f"u{i:04d}" for i in range(users)]
        if change:
            change(slurm)

    return prcases.plan_json("slurm-p5", edit)


def user_data(plan: dict[str, Any]) -> dict[str, bytes]:
    """Every instance's and launch template's user data as EC2 receives it (base64-decoded: gzip bytes)."""
    out = {}
    for r in plan["resources"]:
        key = USER_DATA.get(r["type"])
        if key and isinstance(r["inputs"].get(key), str):
            out[r["name"]] = base64.b64decode(r["inputs"][key])
    return out


def one_more_and_a_team_change(slurm: dict[str, Any]) -> None:
    slurm["identity"]["users"].append({"name": "u0500", "uid": 20500, "groups": ["vision"]})
    slurm["teams"][0]["users"].append("u0500")
    slurm["teams"][0]["users"].remove("bob")
    slurm["teams"][0]["gpuQuota"] = {"h100": 80}


@pytest.mark.slow  # plans a 500-user cluster twice
def test_500_users_plan_and_a_users_change_restarts_nothing():
    big = lab(500)
    assert not [f for f in big.get("findings", []) if "user-data" in str(f)]
    data = user_data(big)
    assert {"slurm-p5-slurm-head", "slurm-p5-slurm-login-lt", "slurm-p5-slurm-p5-lt", "slurm-p5-slurm-dev-lt"} <= set(data)
    sizes = {name: len(raw) for name, raw in data.items()}
    assert max(sizes.values()) <= USER_DATA_LIMIT, sizes
    assert user_data(prcases.plan_json("slurm-p5")) == data  # 500 users more: not one byte more

    changed = lab(500, one_more_and_a_team_change)
    assert user_data(changed) == data
    c = compare(big, changed)
    assert sorted((s.op, s.name) for s in c.steps if s.op != "same") == [
        ("update", "slurm-p5-slurm-head-live"),  # the teams' accounts (the head node's reconcile)
        ("update", "slurm-p5-slurm-home-volume"),  # the new user's /home quota
        ("update", "slurm-p5-slurm-users"),  # the users file every node fetches
    ]
    assert not [d for s in c.steps for d in s.disruption]
    text = render(c)
    assert "restarts" not in text and "roll" not in text and "Disruption" not in text
    members = [line for line in team_lines(c) if line.startswith("research: members")]
    assert len(members) == 1 and "+u0500" in members[0] and "-bob" in members[0], team_lines(c)


def test_a_team_added_restarts_nothing():
    """A new team (its POSIX group, its Slurm account and its /fsx/teams directory) reaches the head node through the
    users object and the live bundle: every user data byte stays, the diff names no restart, roll or disruption."""

    def add_team(slurm: dict[str, Any]) -> None:
        slurm["teams"].append({"name": "speech", "users": ["carol"]})

    before, after = prcases.plan_json("slurm-p5"), prcases.plan_json("slurm-p5", lambda c: add_team(c["gpucluster:slurm"]))
    assert user_data(after) == user_data(before)
    c = compare(before, after)
    assert sorted((s.op, s.name) for s in c.steps if s.op != "same") == [
        ("update", "slurm-p5-slurm-head-live"),  # the accounts and the teams' directories list
        ("update", "slurm-p5-slurm-users"),  # the team's group in the users file
    ]
    assert not [d for s in c.steps for d in s.disruption]
    live = next(r for r in after["resources"] if r["name"] == "slurm-p5-slurm-head-live")
    assert "/teams/speech" in str(live["inputs"])
