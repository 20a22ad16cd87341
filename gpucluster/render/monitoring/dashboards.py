"""Grafana dashboards (JSON model, schema version 39) built from the panel lists in :mod:`.panels`.

Each dashboard has the variable ``datasource`` (any Prometheus data source: the AMP workspace in Managed Grafana, or a
user's own Grafana), and every query names it, so a dashboard imports anywhere unchanged. The usage dashboard also has
``team`` (the Slurm accounts the series name; all of them by default). The
shipped copies are ``gpucluster/render/monitoring/dashboards/<name>.json`` (package data; a test keeps them equal to
:func:`dashboards`): Managed Grafana gets them provisioned, and without a workspace they are the files to import.
"""

from __future__ import annotations

from typing import Any

from gpucluster.render.monitoring.grafana import DATASOURCE, SCHEMA_VERSION, WIDTH, Dashboard, Panel, grafana_json
from gpucluster.render.monitoring.panels import all_dashboards

__all__ = ["DATASOURCE", "SCHEMA_VERSION", "WIDTH", "Dashboard", "Panel", "dashboards", "grafana_json", "queries"]


def dashboards(gpu_hour_price_usd: float | None = None) -> dict[str, dict[str, Any]]:
    """``{file name: Grafana dashboard JSON}``: cluster overview, GPU health, fabric, storage, scheduler, usage per
    team. ``gpu_hour_price_usd`` (the plan's price of a GPU-hour) adds a cost panel to the usage dashboard; the
    shipped files have none (prices differ per stack)."""
    if gpu_hour_price_usd is not None and not gpu_hour_price_usd >= 0:
        raise ValueError(f"gpu_hour_price_usd {gpu_hour_price_usd!r} must be a price in dollars, 0 or more")
    return {f"{board.uid}.json": grafana_json(board) for board in all_dashboards(gpu_hour_price_usd)}


def queries(board: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (panel title, PromQL) of a dashboard's JSON model, each query variable set to all its values (its
    ``allValue``): the query Prometheus runs when the dashboard shows every team."""
    variables = [v for v in board["templating"]["list"] if v["type"] == "query"]
    out: list[tuple[str, str]] = []
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            expr = str(target["expr"])
            for v in variables:
                expr = expr.replace(f"${v['name']}", str(v["allValue"]))
            out.append((panel["title"], expr))
    return out
