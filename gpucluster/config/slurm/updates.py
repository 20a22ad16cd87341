"""Rolling updates of Slurm nodes (``gpucluster:slurm.updates``): how the node agent moves running nodes onto a new
image or launch template version (``gpucluster_agents/power/roll.py``; its contract section is
``gpucluster_agents/contract/updates.py``, whose window parser this model uses so the two agree)."""

from __future__ import annotations

from pydantic import Field, field_validator

from gpucluster.config.base import SpecModel
from gpucluster_agents.contract.updates import parse_window


class RebaselineSpec(SpecModel):
    """Re-baselining after an image change: before the roll goes past its first nodes, ``nodes`` nodes of each NVIDIA
    GPU group boot the new image in a maintenance reservation and run the health program's ``deep`` mode; their
    GEMM, HBM copy and all-reduce figures are compared with the last image that passed (the cluster's artifact
    bucket, ``gpucluster baseline``). A drop past a threshold stops the roll (docs/rebaseline.md)."""

    nodes: int = Field(default=2, ge=0, le=64)
    """Nodes of a group measured on each new image. 0 turns re-baselining off. Default 2."""

    duration_minutes: int = Field(default=120, ge=10, le=1440)
    """The maintenance reservation's length and the deep job's time limit; an image not measured by then fails.
    Default 120 (DCGM's level 3 diagnostic alone takes about 15 min)."""

    gemm_max_drop_percent: float = Field(default=5.0, ge=0, lt=100)
    """Largest drop of the GEMM figure (TFLOP/s, median over the GPUs) that passes, in % of the baseline. Default 5."""

    hbm_max_drop_percent: float = Field(default=5.0, ge=0, lt=100)
    """Largest drop of the HBM copy figure (GB/s) that passes, in % of the baseline. Default 5."""

    busbw_max_drop_percent: float = Field(default=10.0, ge=0, lt=100)
    """Largest drop of the all-reduce bus bandwidth (GB/s) that passes, in % of the baseline. Default 10."""


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

    rebaseline: RebaselineSpec = RebaselineSpec()
    """Measure each new image on a group's first nodes before the roll goes on. Default: 2 nodes, 120 min, a drop of
    5 % (GEMM, HBM) or 10 % (bus bandwidth) stops the roll."""

    @field_validator("maintenance_window")
    @classmethod
    def _window(cls, value: str | None) -> str | None:
        if value is not None:
            parse_window(value)  # ValueError naming what is wrong and the form to write
        return value
