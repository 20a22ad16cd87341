"""The people of a Slurm cluster resolved: who they are, where they log in, where their homes live.

Frozen types with every choice made (``slurm.identity``, ``slurm.loginNodes``, ``slurm.home`` of the spec): the
renderers (users script, sssd.conf, PAM, sudoers, login user data) and the components (login nodes, Session
documents, the home file system) read these and never the spec's sections. ``None`` in a field means "decided:
not configured", never "to be decided".

Subnets are plain strings, the way :class:`~gpucluster.resolve.cluster.ResolvedSlurm` states the head node's:
a subnet id with your own VPC; with a new VPC the ids are not known before deploy, so the field is empty (or
``None``) and the zones say which of the new VPC's subnets to use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from gpucluster.config.slurm.home import HomeSpec
from gpucluster.config.slurm.identity import (
    IDMAP_RANGE,
    DirectoryServiceSpec,
    PosixUserSpec,
    SlurmIdentitySpec,
    parse_principal,
)
from gpucluster.config.slurm.teams import SlurmTeamSpec, team_group_gid
from gpucluster.facts.catalog import InstanceFacts
from gpucluster.resolve.compute.node_group import ResolvedImage

DirectorySchema = Literal["rfc2307", "rfc2307bis", "ad"]


@dataclass(frozen=True)
class SessionGrant:
    """An IAM principal allowed to open Session Manager sessions as one declared user (Run As)."""

    principal_arn: str
    """The role's or user's ARN, as configured (``sessionPrincipal``)."""
    principal_kind: Literal["role", "user"]
    principal_name: str
    """The last segment of the ARN's path (what ``iam:AttachRolePolicy``/``AttachUserPolicy`` take)."""
    attach: bool
    """Attach the generated session policy to the principal (false: only export it)."""


@dataclass(frozen=True)
class PosixGroup:
    """A group made on every node (declared identity): private groups of users included."""

    name: str
    gid: int
    members: tuple[str, ...]
    """Supplementary members (user names, sorted); a user's primary group does not list them."""


@dataclass(frozen=True)
class PosixUser:
    """A declared user: a local account made at boot on head, login and compute nodes."""

    name: str
    uid: int
    gid: int
    """The primary group's gid: the user's own (private group, gid = uid) unless ``gid`` names a declared group."""
    groups: tuple[str, ...]
    """Supplementary groups (names, sorted), the admin group included when the user is in it."""
    shell: str
    home: str
    """Always ``/home/<name>``: Session Manager's Run As sets ``HOME`` to that path."""
    ssh_public_keys: tuple[str, ...]
    """OpenSSH public key lines (``authorized_keys``), config order."""
    admin: bool
    """Member of the identity's admin group: sudo on every node."""
    home_quota_gib: int | None
    """The user's quota on ``/home``; ``None`` = decided: no quota."""
    session: SessionGrant | None
    """``None`` = decided: no principal maps to this user (no per-user Session document)."""


@dataclass(frozen=True)
class DeclaredIdentity:
    """Users and groups listed in the config (``identity.users`` / ``identity.groups``)."""

    users: tuple[PosixUser, ...]
    """Sorted by uid."""
    groups: tuple[PosixGroup, ...]
    """Declared and private groups, sorted by gid."""


@dataclass(frozen=True)
class DirectoryIdentity:
    """An LDAP or Active Directory served to every node by SSSD (``identity.directory``)."""

    domain: str
    """The SSSD domain section's name (default ``directory``)."""
    uris: tuple[str, ...]
    search_base: str
    user_search_base: str
    """Default: ``search_base``."""
    group_search_base: str
    """Default: ``search_base``."""
    schema: DirectorySchema
    bind_dn: str
    bind_password_secret_arn: str
    """Secrets Manager secret whose string is the bind password, read by root at boot (never rendered)."""
    ca_certificate_pem: str
    """PEM of the CA that signed the directory's certificate (public; goes in user data)."""
    tls_reqcert: str
    start_tls: bool
    access_filter: str
    """Who may log in (sssd ``ldap_access_filter``)."""
    id_mapping: bool
    """Derive POSIX ids from AD SIDs (default: true for ``schema: ad``)."""
    idmap_range: tuple[int, int, int]
    """``(ldap_idmap_range_min, ldap_idmap_range_max, ldap_idmap_range_size)``, rendered explicitly so every
    node maps a SID to the same id: sssd's defaults (200000, 2000200000, 200000)."""
    ssh_public_key_attribute: str | None
    """The directory attribute holding users' SSH public keys; ``None`` = decided: keys not read from it."""
    id_range: tuple[int, int]
    """SSSD's ``min_id``/``max_id``: the directory ids a node accepts (``idRange``; default the declared users' low
    range, or the id mapping's range)."""


@dataclass(frozen=True)
class ResolvedIdentity:
    """Who the people are: one source of uids per cluster, and who gets sudo."""

    source: DeclaredIdentity | DirectoryIdentity
    admin_group: str | None
    """Group whose members get sudo on every node; ``None`` = decided: nobody gets sudo."""


@dataclass(frozen=True)
class ResolvedLoginSsh:
    """SSH to the login nodes through a network load balancer."""

    allowed_cidrs: tuple[str, ...]
    """Client networks the load balancer's security group admits on the port (sorted, never empty)."""
    scheme: Literal["internal", "internet-facing"]
    subnets: tuple[str, ...]
    """The load balancer's subnet ids with your own VPC (its public subnets when internet-facing, else the login
    nodes' subnets); empty with a new VPC: that VPC's subnets of ``zones`` (public for internet-facing)."""
    zones: tuple[str, ...] = ()
    """The load balancer's zones (the login nodes' zones), sorted."""
    port: int = 22


@dataclass(frozen=True)
class ResolvedLogin:
    """Login nodes: an Auto Scaling group of client-only Slurm nodes people log in to."""

    asg_name: str
    """``<cluster>-login``."""
    count: int
    instance_type: str
    facts: InstanceFacts
    image: ResolvedImage
    """``imageId`` when set, else the head node's default (Ubuntu 24.04 from SSM for the instance's architecture)."""
    subnets: tuple[str, ...]
    """Subnet ids with your own VPC (``subnetIds``, else the head node's); empty with a new VPC: that VPC's private
    subnets of ``zones``."""
    root_volume_gib: int
    grace_seconds: int
    """Scale-in waits this long for users (``gracePeriodMinutes`` × 60): the terminating lifecycle hook's heartbeat."""
    srun_ports: tuple[int, int]
    """``SrunPortRange`` (first, last): (60001, 63000)."""
    ssh: ResolvedLoginSsh | None
    """``None`` = decided: no SSH (Session Manager only)."""
    zones: tuple[str, ...] = ()
    """The zones of the login nodes' subnets, sorted."""


@dataclass(frozen=True)
class ResolvedHome:
    """The shared ``/home``: a child volume of an FSx for OpenZFS file system in the head node's zone."""

    deployment_type: str
    storage_gib: int
    throughput: int
    """MB/s, valid for the deployment type."""
    zone: str
    subnet: str | None
    """The head node's subnet id with your own VPC; ``None`` with a new VPC: that VPC's private subnet of ``zone``."""
    quotas: tuple[tuple[int, int], ...]
    """``(uid, GiB)`` per declared user with a quota, sorted by uid; a directory's uids are unknown at deploy: ``()``."""
    default_user_quota_gib: int | None
    backup_days: int
    kms_key_id: str | None
    """``None`` = decided: the account's ``aws/fsx`` key."""
    protect: bool
    """Protected and retained (the ``slurm.protectData`` rule)."""
    volume_path: str = "/fsx/home"
    mount_point: str = "/home"
    mount_options: str = "nfsvers=4.1,nosuid,nodev,_netdev"


SRUN_PORTS = (60001, 63000)
DEFAULT_DOMAIN = "directory"


def resolve_identity(identity: SlurmIdentitySpec, home: HomeSpec | None, teams: Sequence[SlurmTeamSpec] = ()) -> ResolvedIdentity:
    """``identity`` (valid) decided; ``home`` is the shared home when one is made (quotas come from it), else None;
    ``teams`` (``slurm.teams``) get a group each with declared users (:func:`team_groups`)."""
    if identity.directory is not None:
        return ResolvedIdentity(resolve_directory(identity.directory), identity.admin_group)
    return ResolvedIdentity(resolve_declared(identity, home, teams), identity.admin_group)


def team_groups(identity: SlurmIdentitySpec, teams: Sequence[SlurmTeamSpec]) -> dict[str, tuple[int, frozenset[str]]]:
    """Team name -> (gid, members) of each Slurm team with declared users: a POSIX group named like the team (what
    its ``/fsx/teams/<team>`` directory belongs to), its members the team's ``users``."""
    if identity.directory is not None:
        return {}
    return {t.name: (team_group_gid(identity, t.name), frozenset(t.users)) for t in teams}


def resolve_declared(identity: SlurmIdentitySpec, home: HomeSpec | None, teams: Sequence[SlurmTeamSpec] = ()) -> DeclaredIdentity:
    """Users with private groups (gid = uid, named like the user) unless ``gid`` names a declared group; each
    group's members from the users' ``groups`` and the teams they are in (each team has a group named like it,
    :func:`team_groups`); sorted by uid and gid."""
    by_gid = {g.gid: g.name for g in reversed(identity.groups)}
    by_team = team_groups(identity, teams)
    users: list[PosixUser] = []
    private: list[PosixGroup] = []
    for u in identity.users:
        gid, primary = (u.uid, u.name) if u.gid is None else (u.gid, by_gid[u.gid])
        if u.gid is None:
            private.append(PosixGroup(u.name, u.uid, ()))
        in_teams = {team for team, (_, members) in by_team.items() if u.name in members}
        groups = tuple(sorted((set(u.groups) | in_teams) - {primary}))
        quota = u.home_quota_gib if u.home_quota_gib is not None else (home.default_user_quota_gib if home else None)
        admin = identity.admin_group is not None and identity.admin_group in (primary, *groups)
        keys = tuple(u.ssh_public_keys)
        quota = quota if home is not None else None
        users.append(PosixUser(u.name, u.uid, gid, groups, u.shell, f"/home/{u.name}", keys, admin, quota, session_grant(u)))
    declared = [PosixGroup(g.name, g.gid, tuple(sorted(x.name for x in users if g.name in x.groups))) for g in identity.groups]
    names = {g.name for g in identity.groups}
    made = [
        PosixGroup(team, gid, tuple(sorted(x.name for x in users if team in x.groups)))
        for team, (gid, _) in sorted(by_team.items())
        if team not in names
    ]
    return DeclaredIdentity(
        tuple(sorted(users, key=lambda x: (x.uid, x.name))),
        tuple(sorted(declared + private + made, key=lambda g: (g.gid, g.name))),
    )


def session_grant(user: PosixUserSpec) -> SessionGrant | None:
    """The user's ``sessionPrincipal`` taken apart (a valid spec's ARN parses)."""
    if user.session_principal is None:
        return None
    p = parse_principal(user.session_principal)
    if p is None:
        raise ValueError(f"user {user.name!r}: sessionPrincipal {user.session_principal!r} is not an IAM role or user ARN")
    return SessionGrant(user.session_principal, p.kind, p.name, user.attach_session_policy)


def resolve_directory(d: DirectoryServiceSpec) -> DirectoryIdentity:
    """The directory with its defaults: domain ``directory``, search bases ``searchBase``, id mapping for AD."""
    return DirectoryIdentity(
        domain=d.domain_name or DEFAULT_DOMAIN,
        uris=tuple(d.uris),
        search_base=d.search_base,
        user_search_base=d.user_search_base or d.search_base,
        group_search_base=d.group_search_base or d.search_base,
        schema=d.schema_,
        bind_dn=d.bind_dn,
        bind_password_secret_arn=d.bind_password_secret,
        ca_certificate_pem=d.ca_certificate or "",
        tls_reqcert=d.tls_reqcert,
        start_tls=d.start_tls,
        access_filter=d.access_filter or "",
        id_mapping=d.id_mapping if d.id_mapping is not None else d.schema_ == "ad",
        idmap_range=IDMAP_RANGE,
        ssh_public_key_attribute=d.ssh_public_key_attribute,
        id_range=directory_id_range(d),
    )


DIRECTORY_ID_RANGE = (1000, 59999)
"""The directory ids a node accepts by default: the declared users' low range (config/checks/slurm/identity.py), which
leaves out the system accounts (below 1000), Debian's allocated ids (60000–64999: slurm is 64030) and nobody."""


def directory_id_range(d: DirectoryServiceSpec) -> tuple[int, int]:
    """``idRange``, else the id mapping's range (its max is the first id it does not use), else
    :data:`DIRECTORY_ID_RANGE`."""
    if d.id_range is not None:
        return (d.id_range[0], d.id_range[1])
    mapping = d.id_mapping if d.id_mapping is not None else d.schema_ == "ad"
    return (IDMAP_RANGE[0], IDMAP_RANGE[1] - 1) if mapping else DIRECTORY_ID_RANGE


__all__ = [
    "DeclaredIdentity",
    "DirectoryIdentity",
    "DirectorySchema",
    "PosixGroup",
    "PosixUser",
    "ResolvedHome",
    "ResolvedIdentity",
    "ResolvedLogin",
    "ResolvedLoginSsh",
    "SessionGrant",
    "resolve_declared",
    "resolve_directory",
    "resolve_identity",
    "session_grant",
    "team_groups",
]
