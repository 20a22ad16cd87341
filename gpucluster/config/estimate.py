"""``gpucluster:estimate``: the plan's cost estimate, where the price file's figures are not what you pay.

Each line of the estimate beside the node groups has a stable key; ``pricePerHour`` sets the USD per hour of any of
them (a negotiated rate, a region the price file lacks, a deployment type it has no figure for), as a node group's
own ``pricePerHour`` does for its nodes. An overridden line costs the same at the desired and at the maximum size.
"""

from __future__ import annotations

import difflib

from pydantic import Field, field_validator

from gpucluster.config.base import FIX_MARK, SpecModel

LINE_KEYS = (
    "nat-gateways",
    "interface-endpoints",
    "hybrid-vpn",
    "hybrid-tgw-attachments",
    "hybrid-resolver",
    "fsx-lustre",
    "slurm-head-node",
    "slurm-login-nodes",
    "slurm-login-nlb",
    "slurm-home-openzfs",
    "secrets",
    "image-builds",
    "eks-control-plane",
    "eks-system-nodes",
    "monitoring",
)
"""The keys of the estimate's lines beside the node groups, in the order the plan lists them."""


class EstimateSpec(SpecModel):
    """The plan's cost estimate (``gpucluster:estimate``)."""

    price_per_hour: dict[str, float] = Field(default_factory=dict)
    """USD per hour of an estimate line beside the node groups, by the line's key (``slurm-home-openzfs``,
    ``slurm-login-nlb``, ``monitoring``, ``secrets``, ``image-builds``, ``nat-gateways``, ``fsx-lustre``,
    ``slurm-head-node``, ``slurm-login-nodes``, ``eks-control-plane`` …); it replaces the price file's figure at the
    desired and at the maximum size. A node group's price is its own ``pricePerHour``. Default: none."""

    @field_validator("price_per_hour")
    @classmethod
    def _known_lines(cls, value: dict[str, float]) -> dict[str, float]:
        for key, usd in value.items():
            if usd < 0:
                raise ValueError(f"{key!r} is priced {usd:g} USD per hour, below 0{FIX_MARK}write USD per hour, 0 or more")
            if key not in LINE_KEYS:
                close = difflib.get_close_matches(key, LINE_KEYS, n=1)
                meant = f"did you mean {close[0]!r}? " if close else ""
                raise ValueError(
                    f"{key!r} is not a line of the estimate; {meant}a node group's price is its own pricePerHour"
                    f"{FIX_MARK}use one of: {', '.join(LINE_KEYS)}"
                )
        return value
