"""The dashboards as the stack provisions them into the cluster's Managed Grafana workspace, and the data source
they read.

The shipped files (:mod:`.dashboards`) serve any Grafana: every query reads the ``datasource`` variable. The
provisioned copy is the same render bound to the workspace's AMP data source (uid :data:`AMP_DATASOURCE_UID`, the
variable removed, the others reading it), keeping only the queries whose series have a source on the cluster's schedulers
(:mod:`.sources`); a panel left with no query goes, and a dashboard left with no panel of data is not provisioned.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

from gpucluster.render.monitoring.dashboards import DATASOURCE, dashboards
from gpucluster.render.monitoring.sources import has_sources

AMP_DATASOURCE_UID = "gpucluster-amp"
AMP_DATASOURCE_NAME = "gpucluster AMP"
FOLDER_UID = "gpucluster"
TOKEN_SECONDS = 30 * 24 * 3600
"""The Grafana token's life: 30 days, the most Amazon Managed Grafana allows (CreateWorkspaceServiceAccountToken's
``secondsToLive``). It is only needed while ``pulumi up`` changes or refreshes the Grafana resources, and it is made
anew whenever what it provisions changes (its name carries a digest of that)."""


def amp_datasource_json(region: str) -> str:
    """The data source's ``jsonData``: SigV4 signed with the workspace's own IAM role (``ec2_iam_role`` is what
    Amazon Managed Grafana calls its workspace role), POST queries."""
    return json.dumps(
        {"httpMethod": "POST", "sigV4Auth": True, "sigV4AuthType": "ec2_iam_role", "sigV4Region": region}, sort_keys=True
    )


def _metric_of(variable: dict[str, Any]) -> str:
    """The series a query variable's ``label_values(<metric>, <label>)`` reads."""
    return str(variable["definition"]).removeprefix("label_values(").split(",", 1)[0]


def _bind(board: dict[str, Any], schedulers: tuple[str, ...], datasource: dict[str, str]) -> dict[str, Any] | None:
    out = copy.deepcopy(board)
    panels = []
    for panel in out["panels"]:
        if panel["type"] == "text":
            panels.append(panel)
            continue
        targets = [t for t in panel["targets"] if has_sources(t["expr"], schedulers)]
        if not targets:
            continue
        panel["datasource"] = datasource
        panel["targets"] = [t | {"datasource": datasource} for t in targets]
        panels.append(panel)
    if all(p["type"] == "text" for p in panels):
        return None
    out["panels"] = panels
    variables = [v for v in out["templating"]["list"] if v["type"] == "query" and has_sources(_metric_of(v), schedulers)]
    out["templating"] = {"list": [v | {"datasource": datasource} for v in variables]}
    return out


def provisioned_dashboards(schedulers: Iterable[str], gpu_hour_price_usd: float | None = None) -> dict[str, str]:
    """``{uid: config_json}`` of the dashboards a cluster running ``schedulers`` gets in its Grafana, bound to the AMP
    data source; only the queries whose series that cluster collects."""
    kinds = tuple(schedulers)
    datasource = {"type": DATASOURCE["type"], "uid": AMP_DATASOURCE_UID}
    out: dict[str, str] = {}
    for board in dashboards(gpu_hour_price_usd).values():
        bound = _bind(board, kinds, datasource)
        if bound is not None:
            out[bound["uid"]] = json.dumps(bound, indent=2, sort_keys=True) + "\n"
    return out


def dashboard_url(workspace_endpoint: str, uid: str) -> str:
    """Where a provisioned dashboard opens: the workspace's endpoint (a host name) and ``/d/<uid>``."""
    return f"https://{workspace_endpoint}/d/{uid}"
