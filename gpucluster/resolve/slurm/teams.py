"""Resolution of ``gpucluster:slurm.teams``: each team's Slurm limits (TRES names and counts), fair share, QOS list,
and the QOS gpucluster manages — everything the head node's accounts contract and slurm.conf need, decided here
from the catalog so the renderers never read it.

The TRES rule (one place): GPUs are counted as ``gres/gpu``; when the Slurm partitions hold several GPU models each
model is also its own TRES (``gres/gpu:h100``) and the teams' guarantees name the model. A flavor some team has a
quota of is limited for every team (0 for a team without a quota of it: it may only borrow it); a flavor no team
names is not limited.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpucluster.config.checks.slurm.teams import slurm_gpu_flavors
from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.slurm import SlurmSpec
from gpucluster.config.slurm.teams import parse_job_time
from gpucluster.facts.catalog import Catalog

GPU_TRES = "gres/gpu"
NORMAL_QOS = "normal"
BORROW_QOS = "borrow"
NORMAL_PRIORITY = 100
"""The ``normal`` QOS's priority: with ``PriorityWeightQOS`` every guaranteed job outranks every borrowed one."""
DESCRIPTION = "gpucluster: "
"""What marks an account or QOS gpucluster manages (the reconcile leaves every other one alone)."""


def accounting_tres(gpu_types: list[str]) -> list[str]:
    """``AccountingStorageTRES``: ``gres/gpu``, and ``gres/gpu:<type>`` per model when there are several."""
    types = sorted(set(gpu_types))
    return [GPU_TRES] + ([f"{GPU_TRES}:{t}" for t in types] if len(types) > 1 else [])


@dataclass(frozen=True)
class ResolvedQos:
    name: str
    description: str
    priority: int
    preempt: tuple[str, ...]
    preempt_mode: str
    """``cluster`` (the cluster's ``PreemptMode``), ``requeue``, ``cancel`` or ``off``."""
    grp_tres: dict[str, int] = field(default_factory=dict[str, int])
    max_wall_minutes: int | None = None


@dataclass(frozen=True)
class ResolvedTeam:
    name: str
    fairshare: int
    grp_tres: dict[str, int]
    """The guarantee: ``GrpTRES`` of the team's account (``{"gres/gpu:h100": 85}``)."""
    max_wall_minutes: int | None
    qos: tuple[str, ...]
    users: tuple[str, ...]
    groups: tuple[str, ...]
    borrow: bool

    @property
    def default_qos(self) -> str:
        return NORMAL_QOS


@dataclass(frozen=True)
class ResolvedTeams:
    """The teams of a Slurm cluster with every limit decided, and the QOS they use."""

    teams: tuple[ResolvedTeam, ...]
    qos: tuple[ResolvedQos, ...]

    @property
    def borrow(self) -> bool:
        """Some team may borrow: preemption (``preempt/qos``, ``REQUEUE``) is on."""
        return any(t.borrow for t in self.teams)


def resolve_teams(slurm: SlurmSpec, spec: ClusterSpec, catalog: Catalog) -> ResolvedTeams | None:
    """``slurm.teams`` resolved; None without teams. ``spec`` must be valid (flavors known, quotas within capacity)."""
    if not slurm.teams:
        return None
    flavors = slurm_gpu_flavors(spec, catalog)
    typed = len({gpu for gpu, _ in flavors.values()}) > 1

    def tres(flavor: str) -> str:
        return f"{GPU_TRES}:{flavors[flavor][0]}" if typed else GPU_TRES

    limited = [f for f in flavors if any(f in t.gpu_quota for t in slurm.teams)]
    any_borrow = any(t.borrow for t in slurm.teams)
    teams: list[ResolvedTeam] = []
    for t in slurm.teams:
        grp: dict[str, int] = {}
        for flavor in limited:
            grp[tres(flavor)] = grp.get(tres(flavor), 0) + t.gpu_quota.get(flavor, 0)
        qos = (NORMAL_QOS, BORROW_QOS) if t.borrow else (NORMAL_QOS,)
        # fairShare's default: the team's guaranteed GPUs (all flavors together), at least 1
        fairshare = t.fair_share if t.fair_share is not None else max(1, sum(t.gpu_quota.values()))
        wall = parse_job_time(t.max_job_time) if t.max_job_time is not None else None
        teams.append(
            ResolvedTeam(
                t.name,
                fairshare,
                grp,
                wall,
                qos,
                t.users,
                t.directory_groups,
                t.borrow,
            )
        )
    capacity: dict[str, int] = {}
    for flavor, (_, gpus) in flavors.items():
        capacity[tres(flavor)] = capacity.get(tres(flavor), 0) + gpus
    qos = [
        ResolvedQos(NORMAL_QOS, DESCRIPTION + "guaranteed jobs", NORMAL_PRIORITY, (BORROW_QOS,) if any_borrow else (), "cluster")
    ]
    if any_borrow:
        # Its own GrpTRES (every GPU the partitions hold) is the limit its jobs meet instead of their account's
        # guarantee: Slurm uses a limit set on the job's QOS before the association's.
        qos.append(
            ResolvedQos(
                BORROW_QOS,
                DESCRIPTION + "opportunistic jobs beyond a team's guarantee, requeued when needed",
                0,
                (),
                "requeue",
                {k: capacity[k] for k in sorted(capacity)},
            )
        )
    return ResolvedTeams(tuple(teams), tuple(qos))
