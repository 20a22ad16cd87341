"""Grafana dashboards (JSON model, schema version 39) built from the panel lists in :mod:`.panels`.

Each dashboard has one variable, ``datasource`` (any Prometheus data source: the AMP workspace in Managed
Grafana, or a user's own Grafana), and every query names it, so a dashboard imports anywhere unchanged. The
shipped copies are ``gpucluster/render/monitoring/dashboards/<name>.json`` (package data; a test keeps them equal to
:func:`dashboards`): Managed Grafana gets them provisioned, and without a workspace they are the files to import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 39
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
WIDTH = 24  # Grafana's grid


@dataclass(frozen=True)
class Panel:
    """A time series (or ``stat``) panel of PromQL ``queries`` — (expr, legend) — or a ``text`` panel (markdown)."""

    title: str
    queries: tuple[tuple[str, str], ...] = ()
    unit: str = "short"
    kind: str = "timeseries"  # timeseries | stat | text
    text: str = ""
    width: int = 12
    height: int = 8
    description: str = ""


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    description: str
    panels: tuple[Panel, ...] = field(default_factory=tuple)


def _panel(panel: Panel, pid: int, x: int, y: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": pid,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
    }
    if panel.kind == "text":
        out["options"] = {"mode": "markdown", "content": panel.text}
        return out
    out["datasource"] = DATASOURCE
    out["targets"] = [
        {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend}
        for i, (expr, legend) in enumerate(panel.queries)
    ]
    out["fieldConfig"] = {"defaults": {"unit": panel.unit}, "overrides": []}
    if panel.kind == "stat":
        out["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}}
    return out


def grafana_json(board: Dashboard) -> dict[str, Any]:
    """The dashboard's JSON model; panels flow left to right in rows of 24 grid units."""
    panels: list[dict[str, Any]] = []
    x = y = row_height = 0
    for pid, panel in enumerate(board.panels, start=1):
        if x + panel.width > WIDTH:
            x, y, row_height = 0, y + row_height, 0
        panels.append(_panel(panel, pid, x, y))
        x += panel.width
        row_height = max(row_height, panel.height)
    return {
        "uid": board.uid,
        "title": board.title,
        "description": board.description,
        "tags": ["gpucluster"],
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "timezone": "utc",
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "1m",
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Prometheus",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                    "hide": 0,
                    "refresh": 1,
                }
            ]
        },
        "annotations": {"list": []},
        "panels": panels,
    }


def dashboards(gpu_hour_price_usd: float | None = None) -> dict[str, dict[str, Any]]:
    """``{file name: Grafana dashboard JSON}``: cluster overview, GPU health, fabric, storage, scheduler, usage per
    team. ``gpu_hour_price_usd`` (the plan's price of a GPU-hour) adds a cost panel to the usage dashboard; the
    shipped files have none (prices differ per stack)."""
    from gpucluster.render.monitoring.panels import all_dashboards  # panels builds on this module's types

    if gpu_hour_price_usd is not None and not gpu_hour_price_usd >= 0:
        raise ValueError(f"gpu_hour_price_usd {gpu_hour_price_usd!r} must be a price in dollars, 0 or more")
    return {f"{board.uid}.json": grafana_json(board) for board in all_dashboards(gpu_hour_price_usd)}


def queries(board: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (panel title, PromQL) of a dashboard's JSON model."""
    return [(p["title"], t["expr"]) for p in board["panels"] for t in p.get("targets", [])]
