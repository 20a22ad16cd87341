"""The dashboards as the stack provisions them into Managed Grafana: the shipped render bound to the AMP data source,
only the queries whose series the cluster's schedulers collect; pinned per scheduler by golden files."""

from __future__ import annotations

import json

import pytest

from gpucluster.render.monitoring.dashboards import dashboards, queries
from gpucluster.render.monitoring.provision import (
    AMP_DATASOURCE_UID,
    amp_datasource_json,
    dashboard_url,
    provisioned_dashboards,
)
from tests.conftest import GOLDEN, check_golden

SCHEDULERS = {"slurm": ("slurm",), "kubernetes": ("kubernetes",), "both": ("slurm", "kubernetes")}


def _titles(board: dict) -> list[str]:
    return [p["title"] for p in board["panels"]]


@pytest.mark.parametrize("kind", sorted(SCHEDULERS))
def test_provisioned_dashboards_are_bound_to_the_amp_data_source(kind, update_golden):
    boards = provisioned_dashboards(SCHEDULERS[kind])
    shipped = {b["uid"]: b for b in dashboards().values()}
    folder = GOLDEN / "monitoring" / "grafana" / kind
    for stale in folder.glob("*.json"):
        if stale.stem not in boards:
            assert update_golden, f"{stale} is no longer provisioned"
            stale.unlink()
    for uid, text in boards.items():
        check_golden(folder / f"{uid}.json", text, update_golden)
        board = json.loads(text)
        assert "${datasource}" not in text  # no data source variable: every query and variable reads AMP
        assert all(v["type"] == "query" and v["datasource"]["uid"] == AMP_DATASOURCE_UID for v in board["templating"]["list"])
        assert board["uid"] == uid and board["title"] == shipped[uid]["title"]
        for panel in board["panels"]:
            if panel["type"] == "text":
                continue
            assert panel["datasource"] == {"type": "prometheus", "uid": AMP_DATASOURCE_UID}
            assert all(t["datasource"]["uid"] == AMP_DATASOURCE_UID for t in panel["targets"])
        # the same queries as the shipped file (which the end-to-end test runs against a real Prometheus), fewer
        assert set(queries(board)) <= set(queries(shipped[uid]))


def test_what_each_scheduler_leaves_out():
    slurm, eks, both = (provisioned_dashboards(SCHEDULERS[k]) for k in ("slurm", "kubernetes", "both"))
    # EKS runs no EFA, Lustre, node or Slurm exporter: no storage dashboard, the fabric one keeps the GPU's PCIe panel
    assert "gpucluster-storage" not in eks and "gpucluster-storage" in slurm
    assert _titles(json.loads(eks["gpucluster-fabric"])) == ["PCIe replays (GPU)"]
    eks_scheduler = json.loads(eks["gpucluster-scheduler"])
    assert _titles(eks_scheduler) == ["Kueue pending workloads", "Exporters answering"]
    assert [t["expr"] for t in eks_scheduler["panels"][1]["targets"]] == ["sum by (job) (up)"]
    # Slurm has no Kueue and NVML no profiling counters
    overview = _titles(json.loads(slurm["gpucluster-overview"]))
    assert "Kueue pending workloads" not in overview and not any(t.startswith("Busy or waiting") for t in overview)
    # the usage dashboard: each Slurm team's panels (the head node's loopback exporter) and its team variable on
    # Slurm; the cluster queues' and no variable on EKS, which has no Slurm accounts
    slurm_usage, eks_usage = json.loads(slurm["gpucluster-team-usage"]), json.loads(eks["gpucluster-team-usage"])
    slurm_data = [p["title"] for p in slurm_usage["panels"] if p["type"] != "text"]
    assert slurm_data and all(t.startswith("Slurm: ") for t in slurm_data)
    assert "Slurm: GPUs in use and guaranteed" in slurm_data
    (team,) = slurm_usage["templating"]["list"]
    assert (team["name"], team["datasource"]["uid"]) == ("team", AMP_DATASOURCE_UID)
    assert _titles(eks_usage) and not any(t.startswith("Slurm") for t in _titles(eks_usage))
    assert eks_usage["templating"]["list"] == []
    # a cluster with both keeps every panel of data of the shipped files
    for board in dashboards().values():
        data = [p["title"] for p in board["panels"] if p["type"] != "text"]
        assert [t for t in _titles(json.loads(both[board["uid"]])) if t in data] == data


def test_data_source_and_urls():
    assert json.loads(amp_datasource_json("eu-west-1")) == {
        "httpMethod": "POST",
        "sigV4Auth": True,
        "sigV4AuthType": "ec2_iam_role",
        "sigV4Region": "eu-west-1",
    }
    assert dashboard_url("g-1.grafana-workspace.us-east-1.amazonaws.com", "gpucluster-overview") == (
        "https://g-1.grafana-workspace.us-east-1.amazonaws.com/d/gpucluster-overview"
    )
