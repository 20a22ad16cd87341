# pyright: strict
"""EC2 error codes the agent decides on, in one place, each set with the reason it exists.

``ICE_CODES`` is ParallelCluster's fast insufficient-capacity fail-over set ("Slurm cluster fast
insufficient capacity fail-over", https://docs.aws.amazon.com/parallelcluster/latest/ug/slurm-short-capacity-fail-mode-v3.html):
each one means "this node group gets no instance now", so the whole group is held and queued jobs go
to another partition at once instead of each node failing on its own."""

from __future__ import annotations

ICE_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "SpotMaxPriceTooLow",  # the spot price asked is below the current minimum
        "Unsupported",  # the instance type is not offered in this region or zone
    }
)

# EC2 does not know the instance id (yet: its API is eventually consistent right after a launch).
NOT_FOUND = ("InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed")

# Failures after which EC2 may still have launched the fleet (the answer, not the request, was lost).
UNCERTAIN_CODES = frozenset({"InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable", "RequestTimeout"})
