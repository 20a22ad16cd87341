# pyright: strict
"""The EC2 events the spot watcher (:mod:`gpucluster_agents.power.spot`) acts on, and how long it long-polls its queue:
the control plane's EventBridge rule and SQS queue (components/slurm/_spot_events.py) are made from the same values,
so the rule forwards exactly the events the watcher reads."""

from __future__ import annotations

INTERRUPTION = "EC2 Spot Instance Interruption Warning"
REBALANCE = "EC2 Instance Rebalance Recommendation"
# AWS's page shows both spellings of the capacity block's warning; the rule matches either.
BLOCK_ENDING = ("Capacity Block Reservation Expiration Warning", "Capacity Block Expiration Warning")
DETAIL_TYPES = (INTERRUPTION, REBALANCE, *BLOCK_ENDING)
WAIT_SECONDS = 20  # SQS long polling, its maximum
