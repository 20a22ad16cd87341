"""The dashboards provisioned into the cluster's Managed Grafana workspace (through the real stack program under the
plan's mocks): the service account and its bounded, secret token, the Grafana provider on the workspace, the AMP
data source, the folder, one dashboard per provisioned render, and the dashboards' URLs as the stack output."""

from __future__ import annotations

import json
import re

import pytest

from gpucluster.components.monitoring.monitoring import DASHBOARDS_COMMAND
from gpucluster.render.monitoring.provision import AMP_DATASOURCE_UID, provisioned_dashboards
from gpucluster.tools.plan.diff.safety import safety_of
from gpucluster.tools.plan.show.describe import DESCRIBERS
from tests.conftest import TWO_ZONES, group, make_config, plan_config

DASHBOARD = "grafana:oss/dashboard:Dashboard"
GRAFANA_TYPES = (
    "aws:grafana/workspaceServiceAccount:WorkspaceServiceAccount",
    "aws:grafana/workspaceServiceAccountToken:WorkspaceServiceAccountToken",
    "grafana:oss/dataSource:DataSource",
    "grafana:oss/folder:Folder",
    DASHBOARD,
)


def _eks(**grafana):
    return make_config(group(maxSize=2), network=TWO_ZONES, kubernetes={}, monitoring={"grafana": {"enabled": True, **grafana}})


def _ok(config):
    plan = plan_config(config)
    assert plan.error is None, plan.error
    return plan


@pytest.fixture(scope="module")
def eks_plan():
    return _ok(_eks())


def test_eks_grafana_gets_the_data_source_folder_and_dashboards(eks_plan):
    plan = eks_plan
    workspace = plan.by_name("test-monitoring-grafana", "aws:grafana/workspace:Workspace")
    account = plan.by_name("test-monitoring-grafana-provisioner").inputs
    assert account["grafanaRole"] == "ADMIN" and account["workspaceId"] == workspace.id
    token = plan.by_name("test-monitoring-grafana-token").inputs
    assert 0 < token["secondsToLive"] <= 30 * 24 * 3600  # bounded: Managed Grafana allows at most 30 days
    provider = next(r for r in plan.resources if r.type == "pulumi:providers:grafana")
    assert provider.inputs["url"] == f"https://{workspace.state['endpoint']}"
    assert provider.inputs["auth"] == "[secret]"  # the token's key reaches the provider as a secret only
    source = plan.by_name("test-monitoring-grafana-amp", "grafana:oss/dataSource:DataSource").inputs
    amp = plan.by_name("test-monitoring-workspace", "aws:amp/workspace:Workspace")
    assert (source["uid"], source["type"], source["url"]) == (AMP_DATASOURCE_UID, "prometheus", amp.state["prometheusEndpoint"])
    assert json.loads(source["jsonDataEncoded"])["sigV4Region"] == "us-east-1"
    folder = plan.by_name("test-monitoring-grafana-folder", "grafana:oss/folder:Folder").inputs
    assert folder["preventDestroyIfNotEmpty"] is True  # a dashboard someone saved there is never deleted with it
    boards = {r.name: r.inputs for r in plan.of_type(DASHBOARD)}
    expected = provisioned_dashboards(("kubernetes",))
    assert {json.loads(b["configJson"])["uid"]: b["configJson"] for b in boards.values()} == expected
    assert all(b["folder"] == folder["uid"] for b in boards.values())
    # every Grafana resource goes through the explicit provider, none through an ambient GRAFANA_URL/GRAFANA_AUTH
    for r in plan.resources:
        if r.type.startswith("grafana:"):
            assert r.provider is not None and "grafana" in r.provider, r.name
    urls = plan.outputs["monitoring"]["dashboards"]
    assert urls == [f"https://{workspace.state['endpoint']}/d/{uid}" for uid in expected]
    assert any(path.endswith("test-monitoring-gpucluster-overview/dashboard.json") for path in plan.files)


def test_every_grafana_type_has_a_safety_entry_and_a_describe_line(eks_plan):
    types = {r.type for r in eks_plan.resources}
    for token in GRAFANA_TYPES:
        assert token in types, token
        assert safety_of(token) is not None and token in DESCRIBERS, token
    entry = safety_of(DASHBOARD)
    assert entry is not None and entry.holds_data is not None and "edits made in Grafana" in entry.holds_data


def test_the_token_is_made_anew_when_what_it_provisions_changes(eks_plan):
    """Its name carries a digest of the data source and dashboards: a Slurm cluster's differ, so does its token's."""
    slurm = _ok(
        make_config(
            group(desiredSize=1),
            network=TWO_ZONES,
            slurm={"nodeGroups": [{"name": "gpu", "mode": "static"}]},
            monitoring={"grafana": {"enabled": True}},
        )
    )
    names = [p.by_name("test-monitoring-grafana-token").inputs["name"] for p in (eks_plan, slurm)]
    assert all(re.fullmatch(r"test-provisioner-[0-9a-f]{10}", n) for n in names) and names[0] != names[1]
    uids = {json.loads(r.inputs["configJson"])["uid"] for r in slurm.of_type(DASHBOARD)}
    assert uids == set(provisioned_dashboards(("slurm",)))


@pytest.mark.parametrize("monitoring", [{"grafana": {"enabled": True, "provisionDashboards": False}}, {}])
def test_without_provisioning_the_output_names_the_command_that_writes_the_files(monitoring):
    plan = _ok(make_config(group(maxSize=2), network=TWO_ZONES, kubernetes={}, monitoring=monitoring))
    assert not [r.name for r in plan.resources if r.type.startswith("grafana:") or r.type in GRAFANA_TYPES]
    assert not [r for r in plan.resources if r.type == "pulumi:providers:grafana"]
    assert plan.outputs["monitoring"]["dashboards"] == [DASHBOARDS_COMMAND]
