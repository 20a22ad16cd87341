"""Checks of ``gpucluster:slurm.identity`` (pure: spec and catalog in, findings out), each finding with its code.

Declared users become local accounts on every node, so a uid, gid or name that collides with another account, a
system account or Slurm's own would give one person another's files or the daemons' powers: those are refused
here, before any resource exists. A directory is reached over TLS only and must say which CA to trust.
Login nodes, the shared home and the hybrid rules: :mod:`gpucluster.config.checks.slurm.login`.
"""

from __future__ import annotations

import base64
import binascii
import re
import ssl
from collections.abc import Iterator

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.errors import Finding, error, warning
from gpucluster.config.kubernetes.team_posix import LOWEST_ID
from gpucluster.config.slurm import SlurmSpec
from gpucluster.config.slurm.identity import (
    IDMAP_RANGE,
    DirectoryServiceSpec,
    PosixUserSpec,
    SlurmIdentitySpec,
    parse_principal,
)
from gpucluster.facts.catalog import Catalog
from gpucluster.facts.regions import aws_partition_of
from gpucluster_agents.contract import users as users_contract

IDENTITY = "gpucluster:slurm.identity"
# The names, ids and key lines a node accepts (the users contract reads them back on every node): one rule.
NAME_RE = users_contract.NAME_RE
SLURM_UID = users_contract.SLURM_UID
DEBIAN_ALLOCATED = users_contract.DEBIAN_ALLOCATED
SIGNED_MAX = users_contract.SIGNED_MAX
ID_FIX = "choose from 1000–59999 or 65536–2147483647"
RESERVED_NAMES = users_contract.RESERVED_NAMES
RESERVED_PREFIXES = users_contract.RESERVED_PREFIXES
PRIVILEGED_GROUPS = ("sudo", "admin", "wheel", "root", "adm", "disk", "docker", "lxd", "shadow", "kmem")
"""Membership gives root (sudoers, raw disks, the docker or lxd socket) or reads every log or password hash."""
KEY_TYPES = users_contract.KEY_TYPES
KEY_RE = users_contract.KEY_RE
URI_RE = re.compile(r"^(ldaps?)://([A-Za-z0-9](?:[A-Za-z0-9.-]{0,252}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}))?/?$")
SECRET_RE = re.compile(r"^arn:(aws[a-z-]*):secretsmanager:([a-z0-9-]+):(\d{12}):secret:[A-Za-z0-9/_+=.@-]+$")
PEM_CERT_RE = re.compile(r"-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+?-----END CERTIFICATE-----")


def ipath(field: str = "") -> str:
    return IDENTITY + (f".{field}" if field else "")


def name_problem(name: str) -> tuple[str, str, str] | None:
    """``(code, why, fix)`` when ``name`` cannot be a declared user's or group's name."""
    if not NAME_RE.fullmatch(name):
        return (
            "name-invalid",
            f"{name!r} is not a user or group name: lower-case letters, digits, '_' and '-', starting with a letter "
            "or '_', at most 32 characters",
            "use a name such as alice or ml-team",
        )
    if users_contract.reserved_name(name):
        why = {"ssm-user": "Session Manager's own account", "slurm": "the account slurmctld and slurmd run as",
               "munge": "the account that holds the munge key", "ubuntu": "the image's default (cloud-init) user",
               "root": "the superuser"}.get(name, "an account or group the node's image already has")  # fmt: skip
        return "name-reserved", f"{name!r} is {why}", "choose another name"
    return None


def id_problem(kind: str, value: int) -> tuple[str, str] | None:
    """``(code, why)`` when ``value`` cannot be a declared user's uid or group's gid (``kind``: uid or gid): the
    users contract's rule, which every node applies again."""
    return users_contract.id_problem(kind, value)


def check_identity(slurm: SlurmSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    identity = slurm.identity
    if identity is None:
        return
    declared = bool(identity.users or identity.groups)
    if identity.directory is not None and declared:
        yield error(ipath("directory"), "a directory and declared users/groups are both set: one source of uids per "
                    "cluster, or two users may get one uid", "keep the directory, or the declared list", None,
                    "identity-both")  # fmt: skip
    elif identity.directory is None and not declared:
        yield error(ipath(), "identity names no users, groups or directory: nobody could log in",
                    "declare users (and groups) or a directory, or remove slurm.identity", None,
                    "identity-empty")  # fmt: skip
    if identity.directory is None:
        yield from _declared(identity, spec)
    else:
        yield from _directory(identity.directory, spec)
        if identity.admin_group is not None and not re.fullmatch(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$", identity.admin_group):
            yield error(ipath("adminGroup"), f"{identity.admin_group!r} cannot be named in sudoers as it is written",
                        "use the directory group's name without spaces or special characters (e.g. hpc-admins)",
                        identity.admin_group, "group-invalid")  # fmt: skip


def _declared(identity: SlurmIdentitySpec, spec: ClusterSpec) -> Iterator[Finding]:
    groups = {g.name: g.gid for g in identity.groups}
    for j, g in enumerate(identity.groups):
        problem = name_problem(g.name)
        if problem:
            yield error(ipath(f"groups[{j}].name"), problem[1], problem[2], g.name, problem[0])
        bad = id_problem("gid", g.gid)
        if bad:
            yield error(ipath(f"groups[{j}].gid"), bad[1], ID_FIX, g.gid, bad[0])
    for j, user in enumerate(identity.users):
        yield from _user(j, user, groups)
    yield from _twice(identity)
    if identity.admin_group is not None and identity.admin_group not in groups:
        yield error(ipath("adminGroup"), f"no declared group {identity.admin_group!r}",
                    f"declare it in identity.groups or use one of: {', '.join(groups) or '(none declared)'}",
                    identity.admin_group, "group-unknown")  # fmt: skip
    yield from _principals(identity, spec)
    yield from _team_band(identity, spec)


def _user(j: int, user: PosixUserSpec, groups: dict[str, int]) -> Iterator[Finding]:
    at = f"users[{j}]"
    problem = name_problem(user.name)
    if problem:
        yield error(ipath(f"{at}.name"), problem[1], problem[2], user.name, problem[0])
    bad = id_problem("uid", user.uid)
    if bad:
        yield error(ipath(f"{at}.uid"), bad[1], ID_FIX, user.uid, bad[0])
    if user.gid is not None and user.gid not in groups.values():
        yield error(ipath(f"{at}.gid"), f"no declared group has gid {user.gid}",
                    "leave gid out (a private group with gid = uid) or declare the group in identity.groups",
                    user.gid, "group-unknown")  # fmt: skip
    for k, name in enumerate(user.groups):
        if name in PRIVILEGED_GROUPS:
            yield error(ipath(f"{at}.groups[{k}]"), f"group {name!r} gives root on every node",
                        "put administrators in the group named by identity.adminGroup", name,
                        "group-privileged")  # fmt: skip
        elif name not in groups:
            yield error(ipath(f"{at}.groups[{k}]"), f"no group {name!r}",
                        f"declare it in identity.groups or use one of: {', '.join(groups) or '(none declared)'}",
                        name, "group-unknown")  # fmt: skip
    for k, key in enumerate(user.ssh_public_keys):
        problem = key_problem(key)
        if problem:
            yield error(ipath(f"{at}.sshPublicKeys[{k}]"), problem[0], problem[1], None, "ssh-key-invalid")


def key_problem(key: str) -> tuple[str, str] | None:
    """``(why, fix)`` when ``key`` is not one OpenSSH public key line (the value is never echoed: it may be a
    private key)."""
    if "PRIVATE KEY" in key:
        return "this is a PRIVATE key: it would be in user data and the stack's state", "give the public key (.pub) line"
    match = KEY_RE.fullmatch(key)
    fix = f"give one line '<type> <base64> [comment]' of a {', '.join(KEY_TYPES)} key (the .pub file)"
    if match is None:
        return "is not an OpenSSH public key line", fix
    kind, blob = match.groups()
    if kind not in KEY_TYPES:
        return f"key type {kind!r} is not one sshd accepts here", fix
    try:
        raw = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return "the key's base64 does not decode", fix
    name = kind.encode()
    if raw[:4] != len(name).to_bytes(4, "big") or raw[4 : 4 + len(name)] != name:
        return f"the key's data is not a {kind} key", fix
    return None


def _twice(identity: SlurmIdentitySpec) -> Iterator[Finding]:
    """Two users on one uid, two groups (private ones included) on one gid, a name used twice."""
    uids: dict[int, str] = {}
    for j, user in enumerate(identity.users):
        if user.uid in uids:
            yield error(ipath(f"users[{j}].uid"), f"users {uids[user.uid]!r} and {user.name!r} both have uid "
                        f"{user.uid}: files of one would be the other's", "give each user a uid of its own",
                        user.uid, "uid-twice")  # fmt: skip
        uids.setdefault(user.uid, user.name)
    gids: dict[int, str] = {}
    names: dict[str, str] = {}
    for j, g in enumerate(identity.groups):
        if g.gid in gids:
            yield error(ipath(f"groups[{j}].gid"), f"groups {gids[g.gid]!r} and {g.name!r} both have gid {g.gid}",
                        "give each group a gid of its own", g.gid, "gid-twice")  # fmt: skip
        if g.name in names:
            yield error(ipath(f"groups[{j}].name"), f"group {g.name!r} is declared twice", "declare each group once",
                        g.name, "name-twice")  # fmt: skip
        gids.setdefault(g.gid, g.name)
        names.setdefault(g.name, "group")
    seen_users: set[str] = set()
    for j, user in enumerate(identity.users):
        if user.name in seen_users:
            yield error(ipath(f"users[{j}].name"), f"user {user.name!r} is declared twice", "declare each user once",
                        user.name, "name-twice")  # fmt: skip
            continue
        seen_users.add(user.name)
        if user.gid is not None:
            continue
        # A private group: named like the user, gid = uid.
        if user.name in names:
            yield error(ipath(f"users[{j}].name"), f"user {user.name!r} gets a private group of that name (gid "
                        f"{user.uid}), but a declared group is named {user.name!r}",
                        "rename the user or the group, or set the user's gid to that group's", user.name,
                        "name-twice")  # fmt: skip
        elif user.uid in gids and uids.get(user.uid) == user.name:  # a shared uid: uid-twice said so
            yield error(ipath(f"users[{j}].uid"), f"user {user.name!r}'s private group would have gid {user.uid}, "
                        f"which group {gids[user.uid]!r} has", "give the user another uid, or set its gid to a "
                        "declared group's", user.uid, "gid-twice")  # fmt: skip
        gids.setdefault(user.uid, user.name)


def _principals(identity: SlurmIdentitySpec, spec: ClusterSpec) -> Iterator[Finding]:
    partition = aws_partition_of(spec.region) or "aws"
    owners: dict[str, str] = {}
    for j, user in enumerate(identity.users):
        arn = user.session_principal
        if arn is None:
            continue
        at = ipath(f"users[{j}].sessionPrincipal")
        parsed = parse_principal(arn)
        if parsed is None or parsed.partition != partition:
            yield error(at, f"{arn!r} is not an IAM role or user ARN of partition {partition} (the region's)",
                        f"write arn:{partition}:iam::<account>:role/<name> or arn:{partition}:iam::<account>:user/"
                        "<name>", arn, "principal-invalid")  # fmt: skip
            continue
        if parsed.path.startswith("/aws-reserved/sso.amazonaws.com/") and user.attach_session_policy:
            yield error(at, "IAM Identity Center manages this role: a policy attached to it is removed",
                        "set attachSessionPolicy: false and add the exported session policy to the permission set",
                        arn, "principal-sso")  # fmt: skip
        if arn in owners:
            yield error(at, f"users {owners[arn]!r} and {user.name!r} have the same principal: which user its "
                        "sessions run as would be ambiguous", "give each principal one user", arn,
                        "principal-twice")  # fmt: skip
        owners.setdefault(arn, user.name)


def _team_band(identity: SlurmIdentitySpec, spec: ClusterSpec) -> Iterator[Finding]:
    teams = spec.kubernetes.teams if spec.kubernetes is not None else ()
    for j, user in enumerate(identity.users):
        for team in teams:
            posix = team.effective_posix
            if posix.uid_first <= user.uid <= posix.uid_last:
                yield warning(ipath(f"users[{j}].uid"), f"uid {user.uid} is in team {team.name!r}'s pod uid range "
                              f"{posix.uid_first}–{posix.uid_last}: that team's pods could own this user's files "
                              "on shared storage", "choose a uid outside kubernetes.teams' ranges", user.uid,
                              "uid-in-team-band")  # fmt: skip


def _directory(d: DirectoryServiceSpec, spec: ClusterSpec) -> Iterator[Finding]:
    at = "directory"
    for k, uri in enumerate(d.uris):
        match = URI_RE.fullmatch(uri)
        if match is None or (match.group(3) is not None and not 1 <= int(match.group(3)) <= 65535):
            yield error(ipath(f"{at}.uris[{k}]"), f"{uri!r} is not an LDAP server URI",
                        "write ldaps://host[:port], e.g. ldaps://ad.corp.example.com", uri, "uri-invalid")  # fmt: skip
        elif match.group(1) == "ldap" and not d.start_tls:
            yield error(ipath(f"{at}.uris[{k}]"), f"{uri!r} without startTls: the bind password would cross the "
                        "network in clear", "use ldaps:// or set startTls: true", uri, "ldap-cleartext")  # fmt: skip
    tls = d.start_tls or any(u.startswith("ldaps://") for u in d.uris)
    if tls and not d.ca_certificate:
        yield error(ipath(f"{at}.caCertificate"), "the directory is reached over TLS but no CA certificate says "
                    "whom to trust: sssd would refuse every server (tlsReqcert demand)",
                    "paste the PEM of the CA that signed the directory's certificate (-----BEGIN CERTIFICATE----- …)",
                    None, "ldaps-without-ca")  # fmt: skip
    elif d.ca_certificate:
        problem = ca_problem(d.ca_certificate)
        if problem:
            yield error(ipath(f"{at}.caCertificate"), problem[0], problem[1], None, "ca-invalid")
    yield from _directory_strings(d)
    yield from _secret(d.bind_password_secret, spec)
    if not d.access_filter:
        yield error(ipath(f"{at}.accessFilter"), "no access filter: every account of the directory could log in",
                    "name who may, e.g. (memberOf=cn=hpc-users,ou=Groups,dc=example,dc=com)", None,
                    "access-filter-missing")  # fmt: skip
    elif not balanced(d.access_filter):
        yield error(ipath(f"{at}.accessFilter"), f"the parentheses of {d.access_filter!r} do not balance",
                    "close every '(' once, e.g. (&(objectClass=user)(memberOf=cn=hpc-users,dc=example,dc=com))",
                    d.access_filter, "filter-unbalanced")  # fmt: skip
    yield from _id_range(d, at)
    if d.id_mapping and d.schema_ != "ad":
        yield error(ipath(f"{at}.idMapping"), f"ID mapping derives ids from Active Directory SIDs; schema "
                    f"{d.schema_!r} has none", "set schema: ad, or leave idMapping out", True,
                    "idmap-not-ad")  # fmt: skip


ID_RANGES = ((LOWEST_ID, DEBIAN_ALLOCATED[0] - 1), (65536, SIGNED_MAX))
"""The ranges declared uids and gids are held to; a directory's ``idRange`` must lie inside one of them."""


def _id_range(d: DirectoryServiceSpec, at: str) -> Iterator[Finding]:
    """``idRange`` lies inside a range declared ids are held to, and covers the id mapping's range when ids are mapped."""
    if d.id_range is None:
        return
    low, high = d.id_range
    path = ipath(f"{at}.idRange")
    if low > high:
        yield error(path, f"the range [{low}, {high}] is empty (min above max)", "give [min, max], e.g. [1000, 59999]",
                    list(d.id_range), "id-range")  # fmt: skip
    elif not any(a <= low and high <= b for a, b in ID_RANGES):
        yield error(path, f"the range [{low}, {high}] takes directory ids that are system accounts' or Debian's (below "
                    "1000, 60000–65535: slurm is 64030) or above 2147483647", f"keep it inside one range: {ID_FIX}",
                    list(d.id_range), "id-range")  # fmt: skip
    elif (d.id_mapping or (d.id_mapping is None and d.schema_ == "ad")) and not (
        low <= IDMAP_RANGE[0] and IDMAP_RANGE[1] - 1 <= high
    ):
        yield error(path, f"the range [{low}, {high}] leaves out ids the AD id mapping hands out ({IDMAP_RANGE[0]}–"
                    f"{IDMAP_RANGE[1] - 1}): those users would not resolve", "leave idRange out with idMapping",
                    list(d.id_range), "id-range")  # fmt: skip


def _directory_strings(d: DirectoryServiceSpec) -> Iterator[Finding]:
    """DNs that look like DNs and an attribute name that is one (control characters: the load's own check)."""
    dns = {"searchBase": d.search_base, "userSearchBase": d.user_search_base, "groupSearchBase": d.group_search_base,
           "bindDn": d.bind_dn}  # fmt: skip
    for name, value in dns.items():
        if value is not None and "=" not in value:
            yield error(ipath(f"directory.{name}"), f"{value!r} is not a distinguished name",
                        "write it as attr=value pairs, e.g. dc=example,dc=com", value,
                        "directory-value-invalid")  # fmt: skip
    attr = d.ssh_public_key_attribute
    if attr is not None and not re.fullmatch(r"^[A-Za-z][A-Za-z0-9-]{0,63}$", attr):
        yield error(ipath("directory.sshPublicKeyAttribute"), f"{attr!r} is not an LDAP attribute name",
                    "use the attribute's name, e.g. sshPublicKey", attr, "directory-value-invalid")  # fmt: skip


def _secret(arn: str, spec: ClusterSpec) -> Iterator[Finding]:
    match = SECRET_RE.fullmatch(arn)
    partition = aws_partition_of(spec.region) or "aws"
    if match is None or match.group(1) != partition or match.group(2) != spec.region:
        yield error(ipath("directory.bindPasswordSecret"), f"{arn!r} is not a Secrets Manager secret ARN of "
                    f"{spec.region}: nodes read the password from the cluster's region",
                    f"write arn:{partition}:secretsmanager:{spec.region}:<account>:secret:<name>", arn,
                    "secret-arn-invalid")  # fmt: skip


def ca_problem(pem: str) -> tuple[str, str] | None:
    """``(why, fix)`` when ``pem`` is not one or more PEM certificates (and nothing else)."""
    fix = "paste the CA's certificate: -----BEGIN CERTIFICATE----- … -----END CERTIFICATE-----"
    if "PRIVATE KEY" in pem:
        return "this holds a PRIVATE key: it would be in user data and the stack's state", fix + " (never its key)"
    blocks = PEM_CERT_RE.findall(pem)
    if not blocks or PEM_CERT_RE.sub("", pem).strip():
        return "is not a PEM certificate", fix
    for block in blocks:
        try:
            der = ssl.PEM_cert_to_DER_cert(block)
        except ValueError:
            return "a certificate of it does not decode", fix
        if not der.startswith(b"\x30"):  # a DER SEQUENCE
            return "a certificate of it is not DER inside", fix
    return None


def balanced(text: str) -> bool:
    depth = 0
    for ch in text.replace("\\(", "").replace("\\)", ""):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0
