"""The cost delta of a change (gpucluster.tools.plan.diff.cost): a real pull-request case planned twice, and
the matching rules on small hand-written estimates."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from gpucluster.config.storage.sizing import USD_PER_GB_MONTH
from gpucluster.facts.prices import load_prices
from gpucluster.resolve.cost.estimate import HOURS_PER_MONTH
from gpucluster.tools.plan.diff.cost import FIGURES, compare, markdown, text_lines, to_json
from gpucluster.tools.plan.run.engine import run_plan
from gpucluster.tools.plan.run.json import dumps
from tests.conftest import ROOT

WORKLOAD = {"readMbPerSecondPerGpu": 100, "checkpointSizeGib": 920, "checkpointWriteSeconds": 90, "checkpointsKept": 3}


def _slurm_p5(max_size: int, dataset_tib: int) -> dict[str, Any]:
    """The shipped slurm-p5 stack with the p5 group's maxSize (and its reservation's size: a maxSize above it is
    refused) and a file system sized for a dataset."""
    config = yaml.safe_load((ROOT / "stacks" / "Pulumi.slurm-p5.yaml").read_text())["config"]
    groups = copy.deepcopy(config["gpucluster:nodeGroups"])
    p5 = next(g for g in groups if g["name"] == "p5")
    p5["maxSize"] = p5["capacity"]["instanceCount"] = max_size
    storage = {
        "workload": {**WORKLOAD, "datasetSizeTib": dataset_tib},
        "lustre": {"throughputPerUnitStorage": 250},
    }
    slurm = {k: v for k, v in config["gpucluster:slurm"].items() if k not in ("identity", "loginNodes", "home")}
    slurm["teams"] = [{k: v for k, v in t.items() if k != "users"} for t in slurm.get("teams", [])]  # members are people
    overrides = {"gpucluster:nodeGroups": groups, "gpucluster:storage": storage, "gpucluster:slurm": slurm}
    plan = run_plan("slurm-p5", config_overrides=overrides)  # without its people: every cost priced (no OpenZFS)
    assert plan.ok, plan.error
    return json.loads(dumps(plan))


@pytest.fixture(scope="module")
def pr_case() -> tuple[dict[str, Any], dict[str, Any]]:
    return _slurm_p5(16, 30), _slurm_p5(24, 60)


def test_pr_case_max_size_16_to_24_and_dataset_30_to_60_tib(pr_case):
    old, new = pr_case
    delta = compare(old, new)
    rows = {r.key: r for r in delta.rows}
    # independently: the catalog's p5 price, the FSx list price of the sized tier and the sized capacities
    p5 = load_prices().on_demand("p5.48xlarge", "us-east-1")
    assert p5 is not None
    gib_before, gib_after = old["outputs"]["storageSizing"]["capacityGiB"], new["outputs"]["storageSizing"]["capacityGiB"]
    assert gib_after > gib_before
    per_gib_month = USD_PER_GB_MONTH["PERSISTENT_2"][250]
    fsx_hour = round(gib_after * per_gib_month / HOURS_PER_MONTH, 2) - round(gib_before * per_gib_month / HOURS_PER_MONTH, 2)

    group = rows["p5"]
    assert group.status == "changed"
    assert group.delta("usdPerHour") == pytest.approx(8 * p5, abs=0.01)  # a reservation bills whether used or not
    assert group.delta("kw") == 0  # but its idle instances draw nothing
    assert group.delta("usdPerHourAtMax") == pytest.approx(8 * p5, abs=0.01)
    assert group.delta("usdPerMonthAtMax") == pytest.approx(8 * p5 * HOURS_PER_MONTH, abs=0.01)
    assert group.delta("kwAtMax") == pytest.approx(8 * 10.2, abs=0.1)

    fsx = rows["fsx-lustre"]  # one row although its name carries the size
    assert fsx.status == "changed" and fsx.label_before != fsx.label_after
    assert fsx.delta("usdPerHour") == pytest.approx(fsx_hour, abs=0.01)
    assert fsx.delta("usdPerMonth") == pytest.approx(fsx_hour * HOURS_PER_MONTH, abs=0.01)

    total = delta.total
    assert total.delta("usdPerHour") == pytest.approx(8 * p5 + fsx_hour, abs=0.02)
    assert total.delta("usdPerMonth") == pytest.approx((8 * p5 + fsx_hour) * HOURS_PER_MONTH, abs=0.05)
    # monitoring follows the node groups: 8 more p5 nodes' samples and logs at max size, nothing more now
    monitoring = rows["monitoring"]
    grown = monitoring.delta("usdPerHourAtMax") or 0
    assert monitoring.status == "changed" and monitoring.delta("usdPerHour") == 0 and grown > 0.1
    assert total.delta("usdPerHourAtMax") == pytest.approx(8 * p5 + fsx_hour + grown, abs=0.02)
    months = 8 * p5 * HOURS_PER_MONTH + (fsx.delta("usdPerMonth") or 0) + (monitoring.delta("usdPerMonthAtMax") or 0)
    assert total.delta("usdPerMonthAtMax") == pytest.approx(months, abs=0.05)
    assert {r.key for r in delta.rows if r.status == "same"} == {
        "dev",
        "nat-gateways",
        "interface-endpoints",
        "slurm-head-node",
        "secrets",
        "image-builds",
    }
    assert delta.storage["before"]["capacityGiB"] == gib_before and delta.storage["after"]["capacityGiB"] == gib_after

    text = "\n".join(text_lines(delta))
    assert (
        f"+${8 * p5 * HOURS_PER_MONTH:,.2f}" in text
        and "node group p5: 0–16 × p5.48xlarge capacity-reservation, 16 reserved → 0–24" in text
    )
    assert f"{gib_before:,} GiB → {gib_after:,} GiB" in text
    md = markdown(delta)
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 4  # header, rule, p5, fsx, monitoring (at max), total
    assert all(line.count("|") == len(FIGURES) + 2 for line in table)
    assert table[-1].startswith("| **total** |") and f"(+${(8 * p5 + fsx_hour) * HOURS_PER_MONTH:,.0f}" in table[-1]
    doc = to_json(delta)
    assert json.loads(json.dumps(doc)) == doc and doc["changed"] is True
    assert doc["rows"][-1]["delta"]["usdPerHourAtMax"] == total.delta("usdPerHourAtMax")


def test_the_same_plan_has_no_cost_change(pr_case):
    old, _ = pr_case
    delta = compare(old, old)
    assert not delta.changed and all(r.delta(f) == 0 for r in delta.rows for f in FIGURES)
    assert text_lines(delta)[-1] == "  no change"


def _plan(groups: list[dict[str, Any]], fixed: list[dict[str, Any]], **totals: Any) -> dict[str, Any]:
    return {"outputs": {"estimate": {"nodeGroups": groups, "fixed": fixed, **totals}}}


def _group(name: str, hour: float | None, hour_max: float | None, **more: Any) -> dict[str, Any]:
    return {
        "nodeGroup": name,
        "instanceType": "p5.48xlarge",
        "desired": 1,
        "max": 2,
        "usdPerHour": hour,
        "usdPerHourAtMax": hour_max,
        **more,
    }


def test_added_and_removed_groups_count_from_and_to_zero():
    old = _plan([_group("a", 10.0, 20.0, kw=1.0, kwAtMax=2.0)], [], usdPerHour=10.0, usdPerHourAtMax=20.0)
    new = _plan([_group("b", 5.0, 5.0, kw=0.5, kwAtMax=0.5)], [], usdPerHour=5.0, usdPerHourAtMax=5.0)
    rows = {r.key: r for r in compare(old, new).rows}
    assert rows["a"].status == "removed" and rows["a"].delta("usdPerHour") == -10.0 and rows["a"].delta("kwAtMax") == -2.0
    assert rows["b"].status == "added" and rows["b"].delta("usdPerMonth") == 5.0 * 730
    assert rows["total"].delta("usdPerHourAtMax") == -15.0
    text = "\n".join(text_lines(compare(old, new)))
    assert "node group a (removed)" in text and "— → $5.00 (+$5.00)" in text and "$10.00 → — (−$10.00)" in text


def test_an_old_plan_without_keys_or_monthly_figures_still_compares():
    old = _plan([], [{"name": "FSx for Lustre 4800 GiB", "usdPerHour": 1.38, "kw": 0}], usdPerHour=1.38, usdPerHourAtMax=1.38)
    new = _plan(
        [],
        [{"key": "fsx-lustre", "name": "FSx for Lustre 9600 GiB", "usdPerHour": 2.76, "usdPerMonth": 2014.8, "kw": 0}],
        usdPerHour=2.76,
        usdPerHourAtMax=2.76,
        usdPerMonth=2014.8,
    )
    (fsx, total) = compare(old, new).rows
    assert fsx.key == "fsx-lustre" and fsx.before is not None and fsx.before["usdPerMonth"] == round(1.38 * 730, 2)
    assert fsx.delta("usdPerMonth") == round(2014.8 - 1.38 * 730, 2) and total.delta("usdPerHour") == 1.38


def test_an_unknown_price_makes_the_delta_unknown_not_zero():
    old = _plan([_group("a", None, None)], [], usdPerHour=None, usdPerHourAtMax=None)
    new = _plan([_group("a", 10.0, 20.0, desired=2)], [], usdPerHour=10.0, usdPerHourAtMax=20.0)
    row = compare(old, new).rows[0]
    assert row.delta("usdPerHour") is None and row.delta("usdPerMonthAtMax") is None
    assert "(unknown)" in markdown(compare(old, new))
