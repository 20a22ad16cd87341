"""``gpucluster:slurm.health``: how Slurm runs the node health program (``python -m
gpucluster_agents.health``) on the compute nodes of NVIDIA GPU groups.

Slurm gives the two hooks hard limits, so the bounds below are Slurm's, not taste:

- ``HealthCheckProgram`` is killed by slurmd after 60 s, so the sweep's own budget stays below that
  and the wrapper, not slurmd, decides what a hung check means (it drains the node itself).
- a ``Prolog`` delays every job start (a multi-node job waits for its slowest node; a prolog that ran DCGM level 2 on p5
  made every job wait minutes: aws/aws-parallelcluster#6777), so its budget is short and Slurm's own
  ``PrologEpilogTimeout`` sits a fixed margin above it: the wrapper times out first and reports why.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpucluster.config.base import SpecModel
from gpucluster.facts.catalog import InstanceFacts

# What slurmd allows HealthCheckProgram before it kills it (slurm.conf(5), 22.05 and 23.11).
SLURM_HEALTH_CHECK_KILL_SECONDS = 60
# Seconds PrologEpilogTimeout leaves above the prolog's own budget (the wrapper's kill grace and
# slurmd's bookkeeping), so the wrapper, which names the cause, always ends first.
PROLOG_TIMEOUT_MARGIN_SECONDS = 30

# Values slurmctld 22.05 and 23.11 both read (NONDRAINED_IDLE arrived in 23.02: 22.05 ignores it with an
# error, measured with Debian's 22.05).
NodeState = Literal["ANY", "IDLE", "ALLOC", "MIXED"]


class SlurmHealthSpec(SpecModel):
    """Node health checks in Slurm: a periodic sweep (``HealthCheckProgram``) and a check before every
    job (``Prolog``) on the nodes of node groups with NVIDIA GPUs; other nodes get wrappers that do
    nothing. A node found faulty is drained with a reason starting ``gpucluster:``, the mark the node
    agent acts on."""

    enabled: bool = True
    """Run the health checks. Default true (they act on NVIDIA GPU groups only)."""

    interval_seconds: int = Field(default=300, ge=60, le=86400)
    """``HealthCheckInterval``: seconds between two sweeps of a node. Default 300 (5 min); at least 60
    (a sweep may take up to a minute)."""

    node_state: NodeState = "ANY"
    """``HealthCheckNodeState``: which nodes a sweep runs on. Default ``ANY``: the sweep only reads
    counters (ECC, row remapping, XIDs, clocks) and never loads the GPU, so it is safe beside a job,
    and a GPU that fails during a long job is drained (the job keeps running) before the next job
    lands on it. ``IDLE`` checks only idle nodes (a node that is always busy is then only checked by
    the prolog)."""

    cycle: bool = True
    """Add ``CYCLE`` to ``HealthCheckNodeState``: spread the sweeps over the interval instead of every
    node at once, so a large cluster does not drain (and the agent does not replace) many nodes in the
    same second. Default true."""

    sweep_timeout_seconds: int = Field(default=50, ge=5, le=55)
    """The sweep's own budget; a sweep that runs longer is killed and drains its node (a hung NVML
    call is a symptom of a GPU that fell off the bus). Default 50; at most 55, under the 60 s after
    which slurmd kills HealthCheckProgram."""

    prolog: bool = True
    """Check the node before every job (``Prolog`` with ``PrologFlags=Alloc``: at allocation, on every
    node of the job). A fault drains the node and requeues the job (not held). A job opts out with
    ``gpucluster-health=off`` in its comment (``--comment``, Slurm 22.05 and later) or in ``--extra``
    (where the prolog sees it: Slurm 23.11 and later). Default true."""

    prolog_timeout_seconds: int = Field(default=60, ge=5, le=300)
    """The prolog's budget, spent before every job starts: it is killed after this and the node is
    drained. ``PrologEpilogTimeout`` is set 30 s above it. Default 60; at most 300 (DCGM level 2, about
    two minutes, belongs in the ``deep`` check of a maintenance reservation, not in a prolog)."""

    def prolog_epilog_timeout(self) -> int:
        """``PrologEpilogTimeout``: the prolog's budget plus a margin, so the wrapper ends first."""
        return self.prolog_timeout_seconds + PROLOG_TIMEOUT_MARGIN_SECONDS

    def node_state_value(self) -> str:
        """``HealthCheckNodeState`` as slurm.conf writes it (``ANY,CYCLE``)."""
        return f"{self.node_state},CYCLE" if self.cycle else self.node_state


def nvidia_gpus(facts: InstanceFacts) -> bool:
    """Whether an instance type's accelerators are NVIDIA GPUs: the nodes the health program checks."""
    return any(g.manufacturer.upper() == "NVIDIA" for g in facts.gpus)
