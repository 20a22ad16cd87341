"""Checks of ``gpucluster:slurm.teams`` and ``gpucluster:slurm.settings`` (pure: spec and catalog in, findings out).

Teams need the accounting database (their accounts, limits and usage live in slurmdbd); their members must be
people the cluster knows (declared users, or groups of a directory); a flavor's guarantees may not add up to
more GPUs than the Slurm partitions of that flavor hold at their ``maxSize``. The settings escape hatch takes only
the keys on its allow list (``config/slurm/settings.py``): a key gpucluster owns is refused naming the section to use
instead, a key that names code, a user or an authentication method as not settable, any other key as not on the list;
values that would break the file's lines are refused too.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpucluster.config.checks.slurm.identity import PRIVILEGED_GROUPS, name_problem
from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.effective import slurm_groups
from gpucluster.config.errors import Finding, error, warning
from gpucluster.config.kubernetes import flavor_name
from gpucluster.config.slurm import SlurmSpec
from gpucluster.config.slurm.teams import gpu_type, team_group_gid
from gpucluster.facts.catalog import Catalog
from gpucluster.facts.slurm_settings import key_refusal, value_problem

TEAMS = "gpucluster:slurm.teams"
SETTINGS = "gpucluster:slurm.settings"


def slurm_gpu_flavors(spec: ClusterSpec, catalog: Catalog) -> dict[str, tuple[str, int]]:
    """``{flavor: (Slurm GPU type, GPUs of the Slurm groups of that flavor at maxSize)}``, config order. A flavor is
    named as ``kubernetes.teams`` names it (``h100``, ``l40s``); its Slurm GRES type is the same model letters."""
    out: dict[str, tuple[str, int]] = {}
    for _, g, facts in slurm_groups(spec, catalog):
        if facts is not None and facts.gpu_count:
            name = flavor_name(facts)
            _, before = out.get(name, ("", 0))
            out[name] = (gpu_type(facts), before + facts.gpu_count * g.max_size)
    return out


def check_teams(slurm: SlurmSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    if not slurm.teams:
        return
    if spec.hybrid is not None and spec.hybrid.controller is not None:
        yield error(
            TEAMS,
            "the site's slurmctld and slurmdbd are the controller and the accounting database: its accounts are the site's",
            "remove slurm.teams and give the cloud partitions' users accounts at the site (sacctmgr there)",
            [t.name for t in slurm.teams],
            "teams-hybrid",
        )
        return
    if slurm.accounting is None:
        yield error(
            TEAMS,
            "teams are Slurm accounts with limits and fair share, which live in the accounting database (slurmdbd), "
            "and this cluster has none",
            "add accounting: {} to gpucluster:slurm (slurmdbd and MariaDB on the head node)",
            [t.name for t in slurm.teams],
            "teams-need-accounting",
        )
    yield from _names(slurm)
    yield from _members(slurm)
    yield from _teamless(slurm)
    yield from _groups(slurm)
    yield from _quotas(slurm, spec, catalog)


def _names(slurm: SlurmSpec) -> Iterator[Finding]:
    seen: set[str] = set()
    for j, team in enumerate(slurm.teams):
        if team.name in seen:
            yield error(
                f"{TEAMS}[{j}].name",
                f"two teams are named {team.name!r}; a team is one Slurm account",
                "give each team its own name, or merge the two entries",
                team.name,
                "team-duplicate",
            )
        elif team.name == "root":
            yield error(
                f"{TEAMS}[{j}].name", "'root' is Slurm's own top account", "choose another team name", team.name, "team-reserved"
            )
        seen.add(team.name)


def _groups(slurm: SlurmSpec) -> Iterator[Finding]:
    """With declared users each team gets a POSIX group named like it (its ``/fsx/teams/<team>`` directory's group):
    the name must be free for a group, and not the admin group; the gid taken from the name must be free."""
    identity = slurm.identity
    if identity is None or identity.directory is not None:
        return
    declared = {g.name: g.gid for g in identity.groups}
    private = {u.name: u.uid for u in identity.users if u.gid is None}
    taken = {gid: f"group {name!r}" for name, gid in declared.items()}
    taken.update({uid: f"user {name!r}'s private group" for name, uid in private.items()})
    for j, team in enumerate(slurm.teams):
        at, name = f"{TEAMS}[{j}].name", team.name
        problem = name_problem(name)
        if name == identity.admin_group:
            yield error(at, f"team {name!r} would get a group named like the admin group {name!r}: every member of the "
                        "team would have sudo on every node", "rename the team", name, "team-group-admin")  # fmt: skip
        elif problem is not None or name in PRIVILEGED_GROUPS:
            why = problem[1] if problem is not None else "a group that gives root"
            yield error(at, f"team {name!r} gets a POSIX group of that name (its /fsx/teams directory's), and {why}",
                        "rename the team", name, "team-group-reserved")  # fmt: skip
        elif name in private:
            yield error(at, f"team {name!r} gets a POSIX group of that name, but user {name!r}'s private group has it",
                        f"rename the team, or give user {name!r} a declared group as gid", name,
                        "team-group-taken")  # fmt: skip
        elif name not in declared:
            gid = team_group_gid(identity, name)
            if gid in taken:
                yield error(at, f"team {name!r}'s group would get gid {gid} (derived from the name), which "
                            f"{taken[gid]} has", f"declare a group named {name!r} with a free gid in "
                            "slurm.identity.groups: the team's group takes its gid", name, "team-group-gid")  # fmt: skip
            taken.setdefault(gid, f"team {name!r}'s group")


def _members(slurm: SlurmSpec) -> Iterator[Finding]:
    identity = slurm.identity
    declared = {u.name for u in identity.users} if identity is not None else set()
    directory = identity is not None and identity.directory is not None
    for j, team in enumerate(slurm.teams):
        for user in team.users:
            if user not in declared:
                known = ", ".join(sorted(declared)) or "none"
                yield error(
                    f"{TEAMS}[{j}].users",
                    f"team {team.name!r} lists user {user!r}, who is not a declared user of slurm.identity (declared: {known})",
                    f"declare {user!r} under slurm.identity.users, or remove them from the team"
                    + (" (directory people join through directoryGroups)" if directory else ""),
                    user,
                    "team-unknown-user",
                )
        if team.directory_groups and not directory:
            yield error(
                f"{TEAMS}[{j}].directoryGroups",
                f"team {team.name!r} takes its members from directory groups, but slurm.identity has no directory",
                "set slurm.identity.directory (LDAP or Active Directory), or list declared users in users",
                list(team.directory_groups),
                "team-groups-need-directory",
            )
        for group in team.directory_groups:
            if not group or any(c in group for c in ":\n\r\t,'\"#"):
                yield error(
                    f"{TEAMS}[{j}].directoryGroups",
                    f"directory group {group!r} of team {team.name!r} is not a group name",
                    "use the group's name as getent group prints it (no ':', ',', quotes or line breaks)",
                    group,
                    "team-group-name",
                )


def _teamless(slurm: SlurmSpec) -> Iterator[Finding]:
    """A declared user in no team has no Slurm association, and with teams the associations are enforced: their first
    ``sbatch`` is refused. A warning, since someone who only administers need not submit."""
    if slurm.accounting is None or slurm.identity is None or slurm.identity.directory is not None:
        return
    members = {user for team in slurm.teams for user in team.users}
    for j, user in enumerate(slurm.identity.users):
        if user.name not in members:
            yield warning(
                f"gpucluster:slurm.identity.users[{j}]",
                f"user {user.name!r} is in no team: with slurm.teams Slurm enforces associations "
                f"(AccountingStorageEnforce=associations), so {user.name} cannot submit a job",
                f"add {user.name!r} to the users of a team in slurm.teams (leave it so only for someone who never submits)",
                user.name,
                "user-in-no-team",
            )


def _quotas(slurm: SlurmSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    flavors = slurm_gpu_flavors(spec, catalog)
    promised: dict[str, list[str]] = {}
    for j, team in enumerate(slurm.teams):
        for flavor, gpus in team.gpu_quota.items():
            if flavor not in flavors:
                known = ", ".join(flavors) or "none (no Slurm node group has NVIDIA GPUs)"
                yield error(
                    f"{TEAMS}[{j}].gpuQuota",
                    f"team {team.name!r} has a quota of {gpus} {flavor!r} GPUs, but no Slurm node group has {flavor!r} GPUs",
                    f"use a GPU flavor of the Slurm node groups: {known}",
                    flavor,
                    "team-quota-unknown-flavor",
                )
                continue
            promised.setdefault(flavor, []).append(f"{team.name} {gpus}")
    for flavor, parts in promised.items():
        total = sum(int(p.rsplit(" ", 1)[1]) for p in parts)
        capacity = flavors[flavor][1]
        if total > capacity:
            yield error(
                TEAMS,
                f"teams are guaranteed {total} {flavor} GPUs ({', '.join(parts)}), but the Slurm partitions hold at "
                f"most {capacity} {flavor} GPUs (maxSize x GPUs per instance): a guarantee that cannot be met",
                f"lower the {flavor} quotas to {capacity} in total, or raise the {flavor} node groups' maxSize",
                total,
                "team-quota-above-capacity",
            )


def check_settings(slurm: SlurmSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    if slurm.settings and spec.hybrid is not None and spec.hybrid.controller is not None:
        yield error(
            SETTINGS,
            "the site's slurmctld reads its own slurm.conf; gpucluster renders only the cloud partitions' lines for it",
            "set the keys in the site's slurm.conf and remove slurm.settings",
            sorted(slurm.settings),
            "settings-hybrid",
        )
        return
    for key, value in slurm.settings.items():
        path = f"{SETTINGS}.{key}"
        refusal = key_refusal(key)
        if refusal is not None:
            yield error(path, refusal.message, refusal.fix, value, refusal.code)
        elif problem := value_problem(value):
            yield error(
                path,
                f"the value of {key} cannot go into slurm.conf: {problem}",
                "give a one-word value without '#', spaces, '=' or quotes (slurm.conf(5) syntax)",
                value,
                "slurm-setting-value",
            )
