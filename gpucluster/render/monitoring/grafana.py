"""The Grafana dashboard types and their JSON model (schema version 39); the panel lists are in :mod:`.panels`,
the dashboards in :mod:`.dashboards`."""

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
class Variable:
    """A query variable: the values of ``label`` on ``metric`` (Grafana's ``label_values``), several or all at once.
    Queries name it as ``$<name>`` in a regex matcher (``{account=~"$team"}``); "All" is :data:`ALL`."""

    name: str
    label: str
    metric: str
    label_name: str

    @property
    def query(self) -> str:
        return f"label_values({self.metric}, {self.label_name})"


ALL = ".*"


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    description: str
    panels: tuple[Panel, ...] = field(default_factory=tuple)
    variables: tuple[Variable, ...] = ()


def variable_json(v: Variable, datasource: dict[str, str]) -> dict[str, Any]:
    """A variable's JSON model, its values read through ``datasource``."""
    return {
        "name": v.name,
        "label": v.label,
        "type": "query",
        "datasource": datasource,
        "definition": v.query,
        "query": {"query": v.query, "refId": f"{v.name}-values"},
        "multi": True,
        "includeAll": True,
        "allValue": ALL,
        "current": {},
        "refresh": 2,
        "sort": 1,
        "hide": 0,
    }


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
                },
                *(variable_json(v, DATASOURCE) for v in board.variables),
            ]
        },
        "annotations": {"list": []},
        "panels": panels,
    }
