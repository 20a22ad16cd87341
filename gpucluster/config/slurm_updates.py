"""Rolling updates of Slurm nodes (``gpucluster:slurm.updates``): how the node agent moves running nodes onto a new
image or launch template version (``gpucluster_agents/power/roll.py``; its contract section is
``gpucluster_agents/contract/updates.py``, whose window parser this model uses so the two agree)."""

from __future__ import annotations

from pydantic import Field, field_validator

from gpucluster.config.base import SpecModel
from gpucluster_agents.contract.updates import parse_window


class SlurmUpdatesSpec(SpecModel):
    """Rolling replacement: after the compute nodes' launch template changes (a new image, new user data), the node
    agent drains nodes still running the old version a share at a time and replaces each once its jobs have ended
    (dynamic nodes are powered down, so the next job launches the new version; static ones are replaced by their
    Auto Scaling group). No job is killed; a new version whose nodes fail to boot stops the roll."""

    max_drained_percent: int = Field(default=10, ge=0, le=100)
    """At most this share of a node group's nodes is drained or being replaced for the roll at once (at least one
    node). 0 turns rolling off: running nodes keep their version until they are powered down. Default 10."""

    maintenance_window: str | None = None
    """Drain nodes for the roll only inside this window: ``HH:MM-HH:MM`` in UTC, optionally after days
    (``Sat,Sun 02:00-06:00``); an end before the start runs past midnight. Nodes already drained are still
    replaced once idle. Default: none (any time)."""

    stop_after_boot_failures: int = Field(default=2, ge=1, le=1000)
    """Consecutive boot failures of a node group (a launched node that never registered) since its roll began that
    stop the roll; the nodes still on the old version stay in service. Default 2."""

    @field_validator("maintenance_window")
    @classmethod
    def _window(cls, value: str | None) -> str | None:
        if value is not None:
            parse_window(value)  # ValueError naming what is wrong and the form to write
        return value
