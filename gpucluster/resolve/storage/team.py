"""Each team's own space on the shared Lustre file system: ``/teams/<team>``, owned by the team's first UID and its
GID, mode 2770, created by the storage setup host and mounted alone by the team's PersistentVolume.

The file system squashes root (FSx root squash, :class:`~gpucluster.config.storage.LustreSpec`), so a team's root
pod cannot read or change what another team's directory holds; the directory's mode keeps every other UID out.
Root squash does not stop a root that switches to another team's UID (Lustre trusts the client's UIDs): keeping
team pods non-root is the Kubernetes side's job (Pod Security and the admission policy of the team namespaces).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.effective import head_node_mounts_lustre
from gpucluster.config.kubernetes import TeamSpec
from gpucluster.config.storage import TEAMS_DIRECTORY, LustreSpec

TEAM_DIRECTORY_MODE = "2770"
"""rwx for the owner and the team's group, nothing for anyone else; setgid, so what a member creates belongs to the
team's group and the rest of the team can read it."""


def team_directory(team_name: str) -> str:
    """The team's directory, from the file system's root: ``/teams/<team>``."""
    return f"{TEAMS_DIRECTORY}/{team_name}"


def team_owner(team: TeamSpec) -> tuple[int, int]:
    """``(uid, gid)`` that own the team's directory: the team's first UID and its GID (``teams[].posix``, derived
    from the team's name unless set; :mod:`gpucluster.config.kubernetes.team_posix`)."""
    posix = team.effective_posix
    return posix.uid_first, posix.gid


@dataclass(frozen=True)
class TeamDirectory:
    """One directory as the setup host creates it: a team's, or one of ``storage.lustre.directories``."""

    team: str | None
    """The team whose directory it is; None for a declared one."""
    path: str
    """From the file system's root, e.g. ``/teams/research``."""
    uid: int
    gid: int
    mode: str = TEAM_DIRECTORY_MODE
    """Octal, without leading zeros, as ``stat -c %a`` prints it."""


def team_directories(teams: Iterable[TeamSpec]) -> tuple[TeamDirectory, ...]:
    """The directories of the teams that mount shared storage, in team-name order."""
    out = []
    for team in sorted(teams, key=lambda t: t.name):
        if team.mount_shared_storage:
            uid, gid = team_owner(team)
            out.append(TeamDirectory(team.name, team_directory(team.name), uid, gid))
    return tuple(out)


SLURM_TEAM_OWNER = 0
"""A Slurm team's directory belongs to root and the team's group: its members get in through the group (2770)."""


def slurm_team_directories(teams: Iterable[str], groups: Iterable[tuple[str, int]]) -> tuple[TeamDirectory, ...]:
    """The directories of Slurm teams ``teams`` (names) on Lustre, made by the head node (its no-squash client):
    ``/teams/<team>``, root and the team's group (``groups``: ``(name, gid)`` of the cluster's declared groups, where
    each team has one named like it), 2770, in team-name order. A team without a group (a directory's people) has
    none: its group lives in the directory."""
    gid = dict(groups)
    return tuple(
        TeamDirectory(team, team_directory(team), SLURM_TEAM_OWNER, gid[team]) for team in sorted(set(teams)) if team in gid
    )


def setup_directories(fs: LustreSpec, teams: Iterable[TeamSpec]) -> tuple[TeamDirectory, ...]:
    """What the setup host creates: ``fs.directories`` (in the order given), then the teams' directories."""
    declared = []
    for d in fs.directories:
        uid, gid = (int(i) for i in d.owner.split(":"))
        declared.append(TeamDirectory(None, d.path, uid, gid, d.mode))
    return (*declared, *team_directories(teams))


@dataclass(frozen=True)
class LustreAdmins:
    """Which hosts keep root on the stack's Lustre file system (its no-squash clients besides ``noSquashClients``)."""

    head_node: bool
    """The Slurm head node, where the stack has one and it mounts the file system: the admin host of a Slurm stack."""
    setup_host: bool
    """The storage setup host: where there are directories to create (``directories``, the teams')."""
    directories: tuple[TeamDirectory, ...]
    """What the setup host creates."""


def lustre_admins_of(spec: ClusterSpec, lustre: LustreSpec) -> LustreAdmins:
    """The admin hosts of ``lustre``, the Lustre file system of ``spec`` (resolved)."""
    head = head_node_mounts_lustre(spec)
    teams = spec.kubernetes.teams if spec.kubernetes is not None else ()
    directories = setup_directories(lustre, teams)
    return LustreAdmins(head, bool(directories), directories)
