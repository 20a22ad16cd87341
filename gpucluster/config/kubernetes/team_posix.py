"""A team's POSIX identity (``gpucluster:kubernetes.teams[].posix``): the user IDs its pods may run as and
its group ID. The admission policy of the team namespaces holds every pod of a team to them
(:mod:`gpucluster.render.kubernetes.tenancy`), and the team's storage directory is owned by the group.

Every field is optional. The defaults are decided from the team's **name alone** (a SHA-256 of it picks
one slot of :data:`SLOT_SIZE` IDs in a reserved band), so they do not move when teams are added, removed
or reordered, and the same team gets the same IDs in every stack and every plan; the group ID is the first
user ID of the range. Two names can hash to the same slot: the load check refuses that and names a free
``uidFirst`` to set (:mod:`gpucluster.config.checks.kubernetes.tenancy`). Making the fields required
instead would break every stack written before them for no gain: a plan shows the derived values.

The band sits above the ranges other ID allocators use by default (system accounts below 1000, people
1000–60000, systemd's 60001–65519, nobody/nogroup 65534, rootless-container subordinate IDs from 100000,
systemd-nspawn up to 1879048191, SSSD's AD ID mapping up to 2000200000) and ends below systemd's
foreign-UID range (from 2147352576) and the largest ID Kubernetes accepts (2147483647).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from pydantic import Field, model_validator

from gpucluster.config.base import FIX_MARK, SpecModel
from gpucluster_agents.contract import users as users_contract

BAND_FIRST = 2_000_200_000
"""First ID of the band the default ranges come from."""
SLOT_SIZE = 10_000
"""IDs per default slot, and the default ``uidCount``."""
SLOTS = 14_715
"""Slots in the band: the last ends at 2147350000, below systemd's foreign range."""
KUBERNETES_MAX_ID = 2_147_483_647
"""``runAsUser``, ``runAsGroup`` and ``fsGroup`` above this are refused by the API server."""
LOWEST_ID = users_contract.LOWEST_ID
"""IDs below this belong to the system (root, daemons); the users contract every node reads holds the rule."""
UNUSABLE_IDS = users_contract.UNUSABLE_IDS


@dataclass(frozen=True)
class TeamPosix:
    """A team's resolved POSIX identity: its pods run as a user in ``uid_first`` …
    ``uid_first + uid_count - 1`` with primary group ``gid``."""

    gid: int
    uid_first: int
    uid_count: int

    @property
    def uid_last(self) -> int:
        return self.uid_first + self.uid_count - 1

    def overlaps(self, other: TeamPosix) -> bool:
        return self.uid_first <= other.uid_last and other.uid_first <= self.uid_last


def default_slot(team_name: str) -> int:
    """The slot of ``team_name`` in the band: the first 8 bytes of SHA-256(name) modulo :data:`SLOTS`."""
    return int.from_bytes(hashlib.sha256(team_name.encode()).digest()[:8], "big") % SLOTS


def slot_first(slot: int) -> int:
    return BAND_FIRST + slot * SLOT_SIZE


def _unusable(first: int, last: int) -> list[str]:
    return [f"{i} ({what})" for i, what in UNUSABLE_IDS.items() if first <= i <= last]


class TeamPosixSpec(SpecModel):
    """The user IDs a team's pods may run as and the team's group. Default: a range of 10000 IDs picked
    from the team's name in a reserved band (2000200000–2147349999), the group being its first ID."""

    gid: int | None = Field(default=None, ge=LOWEST_ID, le=KUBERNETES_MAX_ID)
    """Group ID of the team: every pod's ``runAsGroup`` (and ``fsGroup`` when set), and the group of the
    team's storage directory. Default: ``uidFirst``. At least 1000, not 65534 or 65535, at most 2147483647."""

    uid_first: int | None = Field(default=None, ge=LOWEST_ID, le=KUBERNETES_MAX_ID)
    """First user ID the team's pods may run as. Default: derived from the team's name (the same in every
    stack), in the band 2000200000–2147349999. At least 1000."""

    uid_count: int | None = Field(default=None, ge=1, le=KUBERNETES_MAX_ID)
    """How many user IDs the team has, from ``uidFirst``. Default 10000."""

    @model_validator(mode="after")
    def _usable(self) -> TeamPosixSpec:
        if self.gid is not None and self.gid in UNUSABLE_IDS:
            raise ValueError(
                f"gid {self.gid} is {UNUSABLE_IDS[self.gid]}: files of that group are everybody's{FIX_MARK}"
                "give the team a group ID of its own (1000 or more, not 65534/65535), or leave gid out"
            )
        if self.uid_first is None:
            return self
        last = self.uid_first + (self.uid_count or SLOT_SIZE) - 1
        if last > KUBERNETES_MAX_ID:
            raise ValueError(
                f"uidFirst {self.uid_first} + uidCount {self.uid_count or SLOT_SIZE} ends at {last}, above "
                f"{KUBERNETES_MAX_ID}, the largest user ID Kubernetes accepts{FIX_MARK}lower uidFirst or uidCount"
            )
        bad = _unusable(self.uid_first, last)
        if bad:
            raise ValueError(
                f"user IDs {self.uid_first}–{last} include {', '.join(bad)}{FIX_MARK}choose a range that "
                "leaves out 65534 and 65535 (e.g. start above 65535)"
            )
        return self

    def resolve(self, team_name: str) -> TeamPosix:
        """The identity with every default decided."""
        first = self.uid_first if self.uid_first is not None else slot_first(default_slot(team_name))
        return TeamPosix(
            gid=self.gid if self.gid is not None else first,
            uid_first=first,
            uid_count=self.uid_count if self.uid_count is not None else SLOT_SIZE,
        )
