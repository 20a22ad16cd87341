"""``gpucluster plan diff`` as one review: the classified change, the cost and power delta and the head plan's
summary together, in every format ("the diff names each replacement …, flags data loss …, and shows
the cost delta in $/h and $/month")."""

from __future__ import annotations

import json

import pytest

from gpucluster.tools.plan.diff.review import exit_status, render, review
from tests.tools.plan import prcases


def _month_at_max(est: dict) -> float:
    """The sum of an estimate's lines' months at max size."""
    return sum(i["usdPerMonthAtMax"] for i in [*est["nodeGroups"], *est["fixed"]])


def _money(v: float) -> str:
    return f"{'+' if v >= 0 else '-'}${abs(v):,.2f}"


def test_a_bigger_group_shows_its_cost_in_every_format():
    old = prcases.plan_json("slurm-p5", prcases.without_people)  # every cost priced (no OpenZFS /home)
    new = prcases.plan_json("slurm-p5", lambda c: (prcases.without_people(c), prcases.grow_slurm_p5(c)))
    r = review(old, new)
    before, after = old["outputs"]["estimate"], new["outputs"]["estimate"]
    per_hour = round(after["usdPerHourAtMax"] - before["usdPerHourAtMax"], 2)
    per_month = round(after["usdPerMonthAtMax"] - before["usdPerMonthAtMax"], 2)
    assert per_hour > 400  # the issue's ≈ +$330k a month
    # a month at max is the sum of the lines' months (monitoring grows with the group too, by fractions of a cent an
    # hour, so 730 × the rounded hourly total is not it to the dollar)
    months = _month_at_max(after) - _month_at_max(before)
    assert per_month == pytest.approx(months, abs=0.02) and per_month > 8 * 55 * 730
    text = render(r, "text")
    assert f"({_money(per_hour)})" in text and f"({_money(per_month)})" in text
    assert "Summary" in text and "p5.48xlarge" in text.split("Summary", 1)[1]
    md = render(r, "markdown")
    assert f"({_money(per_month)})" in md and "| **total** |" in md
    doc = json.loads(render(r, "json"))
    assert doc["cost"] is not None and not doc["dataLoss"]
    assert exit_status(r.comparison, exit_code=True, allow_data_loss=False, expect_no_changes=False)[0] == 2
    # slurm.conf names 24 nodes now: the head node's bundle is a new object, its user data points at it, and the head
    # node restarts for it (render/slurm/headfiles.py; docs/slurm.md "Changing the Slurm layer reaches the head node")
    steps = {s.name: s for s in r.comparison.steps}
    bundle, head = steps["slurm-p5-slurm-head-files"], steps["slurm-p5-slurm-head"]
    assert (bundle.op, bundle.replace_reasons) == ("replace", ["key"])
    assert head.op == "update" and "userDataBase64./etc/gpucluster/head-files.json" in head.changed
    assert head.disruption and head.disruption[0].startswith("restarts the head node slurm-p5-slurm-head")
    changed = {f.path for f in r.comparison.files if f.op == "update"}
    assert "slurm-p5-slurm-head-files/etc/slurm/slurm.conf" in changed


def _quotas(c: dict) -> None:
    teams = c["gpucluster:slurm"]["teams"]
    teams[0]["gpuQuota"] = {"h100": 80}
    teams[1]["maxJobTime"] = "2-0"


def test_a_quota_change_is_not_a_controller_outage():
    """A team's quota, fair share and job time change: only the head node's live bundle changes (in place, same key);
    the user data, the hashed bundle and the head node stay, so slurmctld keeps running (before: a new bundle key, a
    new user data and a stop and start of the head node for every quota tweak). A member change also changes the
    team's POSIX group on every node (its /fsx directory's group), so it still reaches them as new files."""
    r = review(prcases.plan_json("slurm-p5"), prcases.plan_json("slurm-p5", _quotas))
    steps = {s.name: s for s in r.comparison.steps if s.op != "same"}
    assert set(steps) == {"slurm-p5-slurm-head-live"}, {n: (s.op, s.changed) for n, s in steps.items()}
    assert steps["slurm-p5-slurm-head-live"].op == "update" and not steps["slurm-p5-slurm-head-live"].disruption
    assert [f.path for f in r.comparison.files if f.op == "update"] == [
        "slurm-p5-slurm-head-live/etc/gpucluster/accounts.json",
        "slurm-p5-slurm-head-live/files-bundle.list",  # its listing: the new sha256
    ]
    text = render(r, "text")
    assert "restarts the head node" not in text and "research: 85 → 80 guaranteed h100 GPUs" in text
    assert "applied: longest job no limit → 2d" in text


def test_data_loss_exits_3_and_is_named_before_the_cost():
    old = prcases.plan_json("p5-training")
    new = prcases.plan_json("p5-training", prcases.efa_off)
    r = review(old, new)
    status, message = exit_status(r.comparison, exit_code=True, allow_data_loss=False, expect_no_changes=False)
    assert status == 3 and message and "p5-training-lustre-fs" in message
    text = render(r, "text")
    assert text.index("DATA LOSS") < text.index("Changes")


def test_no_change_is_short_and_exits_0():
    plan = prcases.plan_json("dev")
    r = review(plan, plan)
    assert render(r, "text").splitlines()[-1] == "no changes"
    assert exit_status(r.comparison, exit_code=True, allow_data_loss=False, expect_no_changes=True) == (0, None)
