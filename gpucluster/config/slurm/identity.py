"""Who the people of a Slurm cluster are (``gpucluster:slurm.identity``): a declared list of users and groups made
as local accounts on every node, or a directory (LDAP or Active Directory) served to every node by SSSD — never both.

The models hold shapes and types; the rules that name a code (reserved ids and names, duplicates, key and ARN
formats, the directory's TLS) are the pure checks of :mod:`gpucluster.config.checks.slurm.identity`, so every
message names its field, value, why and fix, and all of them are reported at once.
"""

from __future__ import annotations

import re
from typing import Literal, NamedTuple

from pydantic import Field

from gpucluster.config.base import SpecModel

MAX_ID = 4_294_967_294
"""The largest 32-bit id that is not (uint32)-1; the checks refuse ids above 2147483647 (signed 32-bit tools)."""
Shell = Literal["/bin/bash", "/bin/sh", "/usr/bin/zsh"]
DirectorySchema = Literal["rfc2307", "rfc2307bis", "ad"]


class PosixGroupSpec(SpecModel):
    """A group made on every node."""

    name: str
    """Group name: lower-case letters, digits, ``_`` and ``-``, starting with a letter or ``_``, at most 32
    characters. Required."""

    gid: int = Field(ge=0, le=MAX_ID)
    """Group id: 1000–59999 or 65536–2147483647 (below 1000 is the system's, 60000–65535 Debian's and
    nobody's). Required."""


class PosixUserSpec(SpecModel):
    """A person: a local account (same uid on every node) with a home under ``/home``."""

    name: str
    """User name: lower-case letters, digits, ``_`` and ``-``, starting with a letter or ``_``, at most 32
    characters. Required."""

    uid: int = Field(ge=0, le=MAX_ID)
    """User id, the same on every node: 1000–59999 or 65536–2147483647. Required."""

    gid: int | None = None
    """Primary group id: the gid of a declared group. Default: a private group named like the user with
    gid = uid."""

    groups: tuple[str, ...] = ()
    """Supplementary groups (names of ``identity.groups``; the admin group gives sudo). Default: none."""

    ssh_public_keys: tuple[str, ...] = ()
    """OpenSSH public keys (one ``.pub`` line each: ``<type> <base64> [comment]``) accepted for this user
    on the login nodes' SSH. Default: none (Session Manager only)."""

    session_principal: str | None = None
    """IAM role or user ARN (``arn:aws:iam::<account>:role/<name>`` or ``…:user/<name>``) allowed to open
    Session Manager sessions on the login nodes as this user. Default: none."""

    attach_session_policy: bool = True
    """Attach the generated session policy to ``sessionPrincipal``. False: only export it (for principals
    managed elsewhere, such as IAM Identity Center's roles). Default true."""

    home_quota_gib: int | None = Field(default=None, ge=1, le=524288)
    """The user's quota on ``/home``, GiB. Default: ``home.defaultUserQuotaGib``."""

    shell: Shell = "/bin/bash"
    """Login shell. Default ``/bin/bash``."""


IDMAP_RANGE = (200_000, 2_000_200_000, 200_000)
"""sssd-ad/sssd-ldap's ``ldap_idmap_range_min/max/size`` defaults (sssd-ldap(5)), stated so every node agrees."""


class DirectoryServiceSpec(SpecModel):
    """An LDAP or Active Directory every node reads users and groups from (SSSD), over TLS, with a read-only
    bind account whose password is in Secrets Manager (read by root at boot; never in user data or state)."""

    uris: tuple[str, ...] = Field(min_length=1)
    """Directory servers, ``ldaps://host[:port]`` (or ``ldap://host[:port]`` with ``startTls``), tried in
    order. Required."""

    search_base: str
    """Base DN of the searches, e.g. ``dc=example,dc=com``. Required."""

    user_search_base: str | None = None
    """Base DN for users. Default: ``searchBase``."""

    group_search_base: str | None = None
    """Base DN for groups. Default: ``searchBase``."""

    schema_: DirectorySchema = Field(default="rfc2307bis", alias="schema")
    """Directory schema: ``rfc2307``, ``rfc2307bis`` or ``ad`` (Active Directory). Default ``rfc2307bis``."""

    bind_dn: str
    """DN of the read-only account SSSD binds as. Required."""

    bind_password_secret: str
    """Secrets Manager secret ARN (the cluster's region) whose secret string is the bind password. Required."""

    ca_certificate: str | None = None
    """PEM of the CA that signed the directory's certificate (public: it goes in user data). Required when
    the directory is reached over TLS (always)."""

    tls_reqcert: Literal["demand", "hard"] = "demand"
    """SSSD ``ldap_tls_reqcert``: the server's certificate must verify. Default ``demand``."""

    start_tls: bool = False
    """Use StartTLS on ``ldap://`` URIs. Default false (use ``ldaps://``)."""

    access_filter: str | None = None
    """LDAP filter of the accounts that may log in, e.g.
    ``(memberOf=cn=hpc-users,ou=Groups,dc=example,dc=com)``. Required."""

    id_mapping: bool | None = None
    """Derive uids and gids from Active Directory SIDs (the same on every node). Default: true for
    ``schema: ad``, false otherwise."""

    id_range: tuple[int, int] | None = None
    """``[min, max]``: the uids and gids SSSD accepts from the directory (``min_id``/``max_id``); an entry outside
    is not resolved, so a directory uidNumber 64030 (slurm) or gidNumber 6 (disk) cannot become a system account.
    It must lie inside 1000–59999 or inside 65536–2147483647, the ranges declared users are held to. Default:
    ``[1000, 59999]``; with ``idMapping``, the mapped range ``[200000, 2000199999]``."""

    ssh_public_key_attribute: str | None = None
    """Directory attribute holding users' SSH public keys, e.g. ``sshPublicKey``. Default: none (keys not read
    from the directory)."""

    domain_name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
    """Name of the SSSD domain. Default ``directory``."""


class SlurmIdentitySpec(SpecModel):
    """The cluster's people: declared ``users``/``groups``, or a ``directory``."""

    admin_group: str | None = None
    """Group whose members get root with sudo on every node, and the only users (with root) the head node's sshd
    admits. Default: none (nobody gets sudo, nobody logs in to the head node over SSH; root only through IAM).
    With declared users it must be one of ``groups``."""

    groups: tuple[PosixGroupSpec, ...] = ()
    """Declared groups. Default: none."""

    users: tuple[PosixUserSpec, ...] = ()
    """Declared users. Default: none."""

    directory: DirectoryServiceSpec | None = None
    """LDAP or Active Directory through SSSD; not with ``users``/``groups``. Default: none."""


PRINCIPAL_RE = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):iam::(?P<account>\d{12}):(?P<kind>role|user)"
    r"(?P<path>/(?:[A-Za-z0-9+=,.@_-]+/)*)(?P<name>[A-Za-z0-9+=,.@_-]{1,64})$"
)


class Principal(NamedTuple):
    """An IAM role or user ARN taken apart."""

    partition: str
    account: str
    kind: Literal["role", "user"]
    path: str
    """``/`` or ``/a/b/``."""
    name: str


def parse_principal(arn: str) -> Principal | None:
    """The parts of an IAM role or user ARN, or ``None`` when ``arn`` is not one."""
    match = PRINCIPAL_RE.fullmatch(arn)
    if match is None:
        return None
    kind: Literal["role", "user"] = "role" if match["kind"] == "role" else "user"
    return Principal(match["partition"], match["account"], kind, match["path"], match["name"])
