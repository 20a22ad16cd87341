"""Teams on Slurm (``gpucluster:slurm.teams``) and the slurm.conf escape hatch (``gpucluster:slurm.settings``).

A team is a Slurm account under ``root`` with the same meaning as a ``kubernetes.teams`` entry where the concepts
meet: its members, the GPUs it is guaranteed per GPU flavor (``GrpTRES`` on the account), its fair-share weight,
a maximum job time and whether it may borrow idle GPUs beyond its guarantee (jobs in the preemptable ``borrow``
QOS, requeued when a guaranteed job needs their GPUs). The head node's agent keeps slurmdbd in step with them
(``/etc/gpucluster/accounts.json``, docs/teams.md).

The models hold shapes; the rules that need the whole spec (accounting, declared users, a directory, flavors
and the partitions' GPUs) are the checks of :mod:`gpucluster.config.checks.slurm.teams`.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from gpucluster.config.base import SpecModel, check_name
from gpucluster.config.kubernetes.team_posix import TeamPosixSpec
from gpucluster.config.slurm.identity import SlurmIdentitySpec
from gpucluster.facts.catalog import InstanceFacts

SLURM_TIME_RE = re.compile(r"^(?:(?P<days>\d+)-)?(?P<a>\d+)(?::(?P<b>\d+))?(?::(?P<c>\d+))?$")
DURATION_RE = re.compile(r"^(?P<n>\d+)(?P<unit>[mhdw])$")
UNIT_MINUTES = {"m": 1, "h": 60, "d": 1440, "w": 10080}
MAX_WALL_MINUTES = 365 * 1440
"""A year: longer is a typo (Slurm's own limit is far larger, and ``INFINITE`` is what no ``maxJobTime`` means)."""


def parse_job_time(text: str) -> int:
    """Minutes in a Slurm time (``90``, ``1:30:00``, ``7-0``, ``2-12:00``) or a duration (``90m``, ``12h``, ``7d``,
    ``1w``); seconds round up to a whole minute. Raises ValueError naming the accepted forms."""
    text = text.strip()
    minutes: int | None = None
    if m := DURATION_RE.fullmatch(text):
        minutes = int(m["n"]) * UNIT_MINUTES[m["unit"]]
    elif m := SLURM_TIME_RE.fullmatch(text):
        minutes = _slurm_minutes(m)
    if minutes is None or minutes < 1 or minutes > MAX_WALL_MINUTES:
        raise ValueError(
            f"maxJobTime {text!r} is not a job time between 1 minute and a year: write a duration (90m, 12h, 7d, 1w) "
            "or a Slurm time (minutes, hours:minutes:seconds, days-hours[:minutes[:seconds]])"
        )
    return minutes


def _slurm_minutes(m: re.Match[str]) -> int | None:
    """slurm.conf(5)/sbatch(1) time forms: with days ``d-h[:m[:s]]``, without ``m``, ``m:s``, ``h:m:s``."""
    a = int(m["a"])
    b, c = (int(x) if x is not None else None for x in (m["b"], m["c"]))
    if m["days"] is not None:
        seconds = int(m["days"]) * 86400 + a * 3600 + (b or 0) * 60 + (c or 0)
    elif b is None:
        seconds = a * 60
    elif c is None:
        seconds = a * 60 + b
    else:
        seconds = a * 3600 + b * 60 + c
    if (b is not None and b > 59) or (c is not None and c > 59):
        return None
    return -(-seconds // 60)


def team_group_gid(identity: SlurmIdentitySpec, team: str) -> int:
    """The gid of Slurm team ``team``'s POSIX group (declared users): the declared group of that name when there is
    one (the author's choice), else the team's default ``kubernetes.teams[].posix`` gid, derived from its name alone
    (:mod:`gpucluster.config.kubernetes.team_posix`: the same team has the same gid on EKS and Slurm, in every stack)."""
    declared = {g.name: g.gid for g in identity.groups}
    return declared[team] if team in declared else TeamPosixSpec().resolve(team).gid


def gpu_type(facts: InstanceFacts) -> str:
    """A GPU's Slurm GRES type: its model in lower case, letters and digits only (``H100`` → ``h100``), so
    ``--gres=gpu:h100:8`` and the TRES ``gres/gpu:h100``."""
    return re.sub(r"[^a-z0-9]", "", (facts.accelerator_model or "").lower())


class SlurmTeamSpec(SpecModel):
    """A team: a Slurm account (under ``root``) with its people, GPU guarantee, fair share and job time limit."""

    name: str
    """Short name, unique in the cluster (``research``): the Slurm account. Same rules as ``kubernetes.teams``
    names. Required."""

    gpu_quota: dict[str, int] = Field(default_factory=dict)
    """GPUs guaranteed per GPU flavor (the lower-case GPU model of a Slurm node group: ``h100``, ``l40s``), as
    ``kubernetes.teams[].gpuQuota``: ``{h100: 40}`` sets ``GrpTRES=gres/gpu=40`` on the account, or
    ``gres/gpu:h100=40`` when the Slurm partitions hold several GPU models. The team's jobs in the ``normal`` QOS
    never hold more; a flavor some team has a quota of is 0 for the teams without one (they may only borrow it).
    The quotas of a flavor may not add up to more than the partitions hold. Default: none."""

    fair_share: int | None = Field(default=None, ge=1, le=1_000_000)
    """The account's ``Fairshare`` (its share of the cluster against the other teams'). Default: the team's
    guaranteed GPUs (all flavors together), at least 1 — so shares follow the guarantees."""

    max_job_time: str | None = None
    """Longest job of the team (``MaxWall`` on its account): a duration (``90m``, ``12h``, ``7d``, ``1w``) or a
    Slurm time (``7-0``, ``48:00:00``). Default: none (the partition's limit, ``INFINITE``)."""

    borrow: bool = False
    """May run opportunistic jobs (``sbatch --qos=borrow``) on idle GPUs beyond its guarantee; they are requeued
    when a guaranteed job needs the GPUs (``PreemptType=preempt/qos``, ``PreemptMode=REQUEUE``). Default false."""

    users: tuple[str, ...] = ()
    """Members: names of ``slurm.identity.users``. A user in several teams belongs to each (``sbatch -A``); the
    first team listing them is their default account. Default: none."""

    directory_groups: tuple[str, ...] = ()
    """Members: directory groups (``slurm.identity.directory``) whose members, as ``getent group`` lists them on the
    head node, join the team when the accounts are reconciled. Default: none."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value, "team name")

    @field_validator("gpu_quota")
    @classmethod
    def _quota(cls, value: dict[str, int]) -> dict[str, int]:
        for flavor, gpus in value.items():
            if gpus < 0:
                raise ValueError(f"gpuQuota {flavor!r} is {gpus}; a quota is a number of GPUs, 0 or more")
        return value

    @field_validator("max_job_time", mode="before")
    @classmethod
    def _time_text(cls, value: object) -> object:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("max_job_time")
    @classmethod
    def _time(cls, value: str | None) -> str | None:
        if value is not None:
            parse_job_time(value)
        return value
