"""The estimate worked out from a plan's resources (for a program of your own, which exports none) gives, for every
shipped stack, what the stack's own estimate (from its resolved config) says: the same node groups, sizes, capacity,
prices, power and fixed items."""

from __future__ import annotations

import json

import pytest

from gpucluster.tools.plan.run.stackfile import stack_names
from gpucluster.tools.plan.show.program_estimate import estimate_from_resources, plan_estimate
from gpucluster.tools.plan.show.summary import summarize
from tests.conftest import GOLDEN

GROUP_KEYS = (
    "nodeGroup",
    "instanceType",
    "desired",
    "max",
    "capacityType",
    "reserved",
    "usdPerNodeHour",
    "usdPerHour",
    "usdPerHourAtMax",
    "usdPerMonth",
    "kwPerNode",
    "kw",
    "kwAtMax",
    "acceleratorsPerNode",
)
FIXED_KEYS = ("key", "name", "usdPerHour", "usdPerMonth", "usdPerHourAtMax", "usdPerMonthAtMax", "kw")
BURST_ONLY = {"hybrid-slurm"}
"""Stacks whose GPU groups only a site's own node agent launches: their sizes are in the site's bundle, not the plan."""


def _plan(stack: str) -> dict:
    return json.loads((GOLDEN / "plans" / f"{stack}.json").read_text())


@pytest.mark.parametrize("stack", stack_names())
def test_the_estimate_from_the_resources_is_the_stacks_own(stack):
    doc = _plan(stack)
    own = doc["outputs"]["estimate"]
    worked_out = estimate_from_resources(doc).as_dict()
    if stack in BURST_ONLY:
        # the groups' sizes are in the site's bundle: monitoring is the same now, its size at max unknown to the plan
        assert worked_out["nodeGroups"] == [] and own["nodeGroups"]
        mine, theirs = worked_out["fixed"].pop(), own["fixed"][-1]
        assert mine["key"] == theirs["key"] == "monitoring" and mine["usdPerHour"] == theirs["usdPerHour"]
        assert [[f[k] for k in FIXED_KEYS] for f in worked_out["fixed"]] == [
            [f[k] for k in FIXED_KEYS] for f in own["fixed"][:-1]
        ]
        return
    assert [[f[k] for k in FIXED_KEYS] for f in worked_out["fixed"]] == [[f[k] for k in FIXED_KEYS] for f in own["fixed"]]
    groups = sorted(([g[k] for k in GROUP_KEYS] for g in worked_out["nodeGroups"]), key=str)
    assert groups == sorted(([g[k] for k in GROUP_KEYS] for g in own["nodeGroups"]), key=str)
    for total in ("usdPerHour", "usdPerHourAtMax", "usdPerMonth", "usdPerMonthAtMax", "kw", "kwAtMax"):
        assert worked_out[total] == own[total], total


def test_a_plan_without_its_estimate_summarizes_the_same():
    doc = _plan("slurm-p5")
    bare = {**doc, "outputs": {k: v for k, v in doc["outputs"].items() if k != "estimate"}}
    assert plan_estimate(doc) == doc["outputs"]["estimate"]  # the stack's own, where it has one
    full, worked_out = summarize(doc), summarize(bare)
    assert [(g.name, g.desired, g.max, g.gpus_per_node, g.efa_per_node, g.zones) for g in worked_out.groups] == [
        (g.name, g.desired, g.max, g.gpus_per_node, g.efa_per_node, g.zones) for g in full.groups
    ]
    assert (worked_out.usd_per_hour, worked_out.kw_at_max) == (full.usd_per_hour, full.kw_at_max) != (None, None)


def test_nothing_priced_is_no_estimate():
    assert plan_estimate({"stack": "s", "resources": [], "outputs": {}}) == {}
    assert plan_estimate({"stack": "s", "error": "bad", "resources": []}) == {}
