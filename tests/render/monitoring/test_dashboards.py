"""The Grafana dashboards: the shipped JSON files equal what the code builds, and each is a well-formed
dashboard whose every query names the ``datasource`` variable. (Every query is run against a real Prometheus in
tests/e2e/test_alerts_e2e.py, which answers a parse error for a broken one.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpucluster.render.monitoring.dashboards import DATASOURCE, WIDTH, dashboards, queries
from tests.conftest import ROOT, check_golden

SHIPPED = ROOT / "gpucluster" / "render" / "monitoring" / "dashboards"
NAMES = {"overview", "gpu-health", "fabric", "storage", "scheduler", "team-usage"}


def test_shipped_files_are_current(update_golden: bool) -> None:
    built = dashboards()
    assert {name.removeprefix("gpucluster-").removesuffix(".json") for name in built} == NAMES
    for name, board in built.items():
        check_golden(SHIPPED / name, json.dumps(board, indent=2, sort_keys=True) + "\n", update_golden)
    assert {p.name for p in SHIPPED.glob("*.json")} == set(built), "a shipped dashboard no longer built"


@pytest.mark.parametrize("name", sorted(dashboards()))
def test_dashboard_is_well_formed(name: str) -> None:
    board = dashboards()[name]
    assert board["uid"] == name.removesuffix(".json") and len(board["uid"]) <= 40  # Grafana's uid limit
    var, *variables = board["templating"]["list"]
    assert (var["name"], var["type"], var["query"]) == ("datasource", "datasource", "prometheus")
    for v in variables:  # query variables: read through the data source, all values by default
        assert (v["type"], v["datasource"], v["allValue"], v["includeAll"]) == ("query", DATASOURCE, ".*", True), v
        assert v["definition"] == v["query"]["query"] and v["definition"].startswith("label_values(")
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= WIDTH and pos["h"] > 0
        if panel["type"] == "text":
            assert panel["options"]["content"]
            continue
        assert panel["datasource"] == DATASOURCE and panel["targets"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE and target["expr"].strip()
            expr = target["expr"]
            for v in variables:
                expr = expr.replace(f"${v['name']}", "")
            assert "$" not in expr, "a Grafana variable the dashboard does not declare: Prometheus cannot run it"


def test_usage_dashboard_prices_gpu_hours_when_given_a_price() -> None:
    plain = dashboards()["gpucluster-team-usage.json"]
    priced = dashboards(gpu_hour_price_usd=4.1)["gpucluster-team-usage.json"]
    assert len(priced["panels"]) == len(plain["panels"]) + 1
    cost = [q for title, q in queries(priced) if title.startswith("Cost")]
    assert cost and cost[0].endswith("* 4.1")
    assert any("gpucluster-usage" in p["options"]["content"] for p in plain["panels"] if p["type"] == "text")
    with pytest.raises(ValueError, match="gpu_hour_price_usd"):
        dashboards(gpu_hour_price_usd=float("nan"))


def test_shipped_dashboards_are_package_data() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert '"gpucluster.render.monitoring" = ["dashboards/*.json"]' in text
    assert Path(SHIPPED).is_dir()
