# pyright: strict
"""The ``repair`` section of the agent config: how the maintenance pass treats unhealthy nodes.

A part of the node contract (:mod:`gpucluster_agents.contract` holds it as ``AgentConfig.repair``), kept
in its own module because it is the policy of one collaborator (``repair/quarantine.py``, ``repair/protect.py``) and
the contract module is at the size limit. Every key is optional and the renderer writes none of them
while they hold their defaults, so the rendered ``agent.json`` only grows when a stack sets one.

Defaults and where they come from:
- ``max_share_percent`` 10: at most this share of a node group's *running* nodes (those with an instance;
  at least one node) is in repair at once, a repair counting until ``share_window_seconds`` after it
  ended (a powered-down node is not back in service yet). EKS managed node groups stop repairing past
  20 % unhealthy; a training cluster loses a whole job per node, so we take half of that.
- ``share_window_seconds`` 900: how long a finished repair still counts against the share: about one
  replacement's launch, boot and boot health check on a large GPU instance (p5: 10-15 min), so the
  share bounds repairs per replacement cycle, not per ``maintain`` pass (10 % per pass drained a whole
  group in ten minutes: ``tests/agents/repair/test_brake.py``).
- ``brake_percent`` 20 and ``brake_window_seconds`` 3600: the circuit breaker (``repair/brake.py``). More than
  this share of a group's nodes (and at least two) drained by the health program within the window stops
  every repair of the group until an operator runs ``gpucluster-agent release-brake <group>``; 0 turns
  it off. 20 % is Karpenter's fixed line for node repair (more than 20 % of a NodePool unhealthy: no
  repair; EKS managed node groups set the same kind of line with ``maxUnhealthyNodeThresholdPercentage``):
  past it the cause is fleet-wide and replacing nodes does not fix it. One hour: independent
  GPU node faults run well under 1 % of nodes a day (Llama 3's 54-day run on 16k H100s: 419 unexpected
  interruptions, about 0.4 % of its ~2,000 nodes a day), so a fifth of a group within an hour is a
  common cause (a driver or image, a forged XID line, a broken check) in all but the smallest groups,
  and an hour still spans the replacement cycles a cascade needs (one node per pass took 16 minutes for
  16 nodes).
- ``reboot_window_seconds`` 86400: a reboot-class fault (row remap pending, XID 48/63/64/94/95…) gets
  one reboot; the same node drained again within this window is replaced instead.
- ``reboot_settle_seconds`` 300: after RebootInstances the node stays drained this long before the agent
  hands it back (slurmd must have re-registered and the health program run again at its start).
- ``protect_after_failures`` 10: consecutive boot failures (ResumeTimeout of a node that had an instance)
  after which a dynamic node group stops launching (ParallelCluster's ``protected_failure_count`` is 10
  too); 0 turns protected mode off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from .jsonread import Reader


@dataclass(frozen=True)
class Repair:
    max_share_percent: int = 10
    reboot_window_seconds: int = 86400
    reboot_settle_seconds: int = 300
    protect_after_failures: int = 10
    share_window_seconds: int = 900
    brake_percent: int = 20
    brake_window_seconds: int = 3600


REPAIR_KEYS = frozenset(
    (
        "max_share_percent",
        "reboot_window_seconds",
        "reboot_settle_seconds",
        "protect_after_failures",
        "share_window_seconds",
        "brake_percent",
        "brake_window_seconds",
    )
)


def parse_repair(r: Reader, raw: Any, path: str) -> Repair:
    """Read the ``repair`` object (absent: every default); problems go to ``r`` with their key path."""
    if raw is None:
        return Repair()
    if not isinstance(raw, dict):
        r.err(path, f"must be an object, got {raw!r}")
        return Repair()
    obj = cast("dict[str, Any]", raw)
    r.unknown(obj, REPAIR_KEYS, path)
    return Repair(
        max_share_percent=r.integer(obj, "max_share_percent", path, default=10, minimum=1, maximum=100),
        reboot_window_seconds=r.integer(obj, "reboot_window_seconds", path, default=86400, minimum=0, maximum=30 * 86400),
        reboot_settle_seconds=r.integer(obj, "reboot_settle_seconds", path, default=300, minimum=0, maximum=86400),
        protect_after_failures=r.integer(obj, "protect_after_failures", path, default=10, minimum=0, maximum=10000),
        share_window_seconds=r.integer(obj, "share_window_seconds", path, default=900, minimum=0, maximum=86400),
        brake_percent=r.integer(obj, "brake_percent", path, default=20, minimum=0, maximum=100),
        brake_window_seconds=r.integer(obj, "brake_window_seconds", path, default=3600, minimum=60, maximum=7 * 86400),
    )
