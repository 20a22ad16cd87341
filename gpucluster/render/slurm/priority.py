"""slurm.conf's accounting, priority and preemption lines: GPUs in the accounting database, multifactor priority
with fair share, and (with teams) the limits enforced and borrowed GPUs preempted. docs/teams.md explains them.

The weights (slurm.conf(5), priority_multifactor.shtml; each factor is 0.0–1.0 times its weight):

- ``PriorityWeightFairshare=10000``: the main factor — a team that used less than its share goes first.
- ``PriorityWeightAge=1000`` with ``PriorityMaxAge=7-0``: a job that waited a week gains a tenth of the fair-share
  range, so an over-served team's jobs still start eventually, but waiting never beats a team's share.
- ``PriorityWeightJobSize=500``: a little for big (multi-node) jobs, which backfill would otherwise starve behind
  small ones; small enough never to decide between teams.
- ``PriorityWeightQOS=20000``: more than the other weights together (11500), so a guaranteed job (QOS ``normal``,
  priority 100) always ranks above an opportunistic one (QOS ``borrow``, priority 0).
- ``PriorityDecayHalfLife=7-0`` (Slurm's default, stated): usage counts half after a week, so last month's big run
  stops weighing on a team within a few weeks.
- ``TRESBillingWeights="CPU=0,Mem=0,GRES/gpu=1.0"`` on every partition: fair share charges GPU-seconds only (a job
  on a CPU-only partition is free for fair share; its use is still accounted).
"""

from __future__ import annotations

from gpucluster.render.slurm.names import SlurmContext
from gpucluster.resolve.slurm.teams import accounting_tres

PRIORITY_LINES = (
    "PriorityType=priority/multifactor",
    "PriorityWeightFairshare=10000",
    "PriorityWeightAge=1000",
    "PriorityMaxAge=7-0",
    "PriorityWeightJobSize=500",
    "PriorityWeightQOS=20000",
    "PriorityDecayHalfLife=7-0",
)
BILLING = 'TRESBillingWeights="CPU=0,Mem=0,GRES/gpu=1.0"'


def accounting_lines(ctx: SlurmContext, gpu_types: list[str]) -> list[str]:
    """With accounting: GPUs as a TRES (so ``sreport`` and fair share see them) and multifactor priority; with teams:
    limits enforced; with a team that borrows: QOS preemption that requeues. Without accounting: none."""
    if ctx.slurm.accounting is None:
        return []
    lines = [f"AccountingStorageTRES={','.join(accounting_tres(gpu_types))}"]
    teams = ctx.teams
    if teams is not None:
        # associations: a user needs an association to submit; limits: GrpTRES/MaxWall hold; qos: a job's QOS must
        # be one its association may use; safe: a job starts only if it can finish within its limits.
        lines.append("AccountingStorageEnforce=associations,limits,qos,safe")
    lines += PRIORITY_LINES
    if teams is not None and teams.borrow:
        # A guaranteed job (QOS normal, Preempt=borrow) requeues borrowed jobs; batch jobs are requeueable by default
        # (JobRequeue=1), a job submitted with --no-requeue is cancelled instead.
        lines += ["PreemptType=preempt/qos", "PreemptMode=REQUEUE"]
    return lines


def billing_part(ctx: SlurmContext) -> str | None:
    """The partitions' ``TRESBillingWeights`` (with accounting), else None."""
    return BILLING if ctx.slurm.accounting is not None else None
