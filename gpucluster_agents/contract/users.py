# pyright: strict
"""The users contract: ``/etc/gpucluster/users.json`` on every Slurm node of a cluster with declared users (head,
login and compute), what the users program (``gpucluster-users``) makes local accounts of.

The Pulumi side (``gpucluster.render.slurm.identity.users_json``) writes it into the artifact bucket at a fixed key;
a node fetches it (:mod:`gpucluster_agents.boot.users`) at boot and every few minutes, so a user added or removed, or
a team's members changed, reaches every node without a new user data. Because no user data pins it, the node trusts
nothing in it that this parser does not check: :func:`parse` is strict (unknown keys are errors, every problem is
reported at once with its key path) and refuses what would give a user more than a person's account — a system
name (``root``, ``slurm``, ``ssm-user``, ...), a uid or gid of the system's, Slurm's or Debian's ranges, a shell or
home outside the allowed ones, an SSH key that is not one public key line. The config checks
(``gpucluster.config.checks.slurm_identity``) read the same names and ranges from here. Stdlib only, Python 3.9.

Schema 1::

    {"schema": 1,
     "groups": [{"name", "gid"}],
     "users": [{"name", "uid", "gid", "groups": [...], "shell", "home", "ssh_public_keys": [...]}]}

A user's ``gid`` is one of ``groups``' gids (its private group or a declared one); ``groups`` names declared groups.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, cast

from . import ConfigError
from .jsonread import Reader

__all__ = ["USERS_PATH", "Group", "User", "UsersContract", "id_problem", "load", "parse", "records", "reserved_name", "to_json"]

SCHEMA = 1
USERS_PATH = "/etc/gpucluster/users.json"
USERS_KEY = "users/users.json"
"""In the artifact bucket: the declared users (render/iam.py: head, login and compute roles may read this key only); the
control plane writes it, ``gpucluster_agents.boot.users fetch`` reads it into :data:`USERS_PATH`."""
NAME_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}\Z")
"""A declared user's or group's name: what useradd and groupadd take everywhere, without a dot or a ``$`` (``\\Z``: no
line break after it, which ``$`` would let through)."""
RESERVED_NAMES = (
    # Ubuntu 24.04 base-passwd (passwd.master, group.master): the fixed system accounts and groups.
    *("root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy", "www-data"),
    *("backup", "list", "irc", "gnats", "nobody", "nogroup", "_apt", "adm", "tty", "disk", "kmem", "dialout"),
    *("fax", "voice", "cdrom", "floppy", "tape", "sudo", "audio", "dip", "operator", "src", "shadow", "utmp"),
    *("video", "sasl", "plugdev", "staff", "users"),
    # Ubuntu 24.04 server/cloud image: accounts and groups its packages create (systemd-* by prefix below).
    *("messagebus", "syslog", "uuidd", "tcpdump", "tss", "landscape", "fwupd-refresh", "polkitd", "sshd", "_ssh"),
    *("pollinate", "usbmux", "dnsmasq", "crontab", "netdev", "lxd", "admin", "input", "kvm", "render", "sgx"),
    *("rdma", "docker"),
    # Ubuntu's slurm-wlm (SlurmUser, uid 64030) and munge packages.
    *("slurm", "munge"),
    # SSSD's own account (sssd-common) and Session Manager's account (the SSM agent creates ssm-user).
    *("sssd", "ssm-user"),
    # cloud-init's default user on Ubuntu images, and other distributions' equivalents and admin group.
    *("ubuntu", "ec2-user", "wheel"),
)
"""Names a declared user or group may not take: the image already has them, or they mean something to a node."""
RESERVED_PREFIXES = ("systemd-",)
LOWEST_ID = 1000
"""IDs below this belong to the system (root, daemons)."""
SLURM_UID = 64030
"""SlurmUser's fixed uid/gid on Debian and Ubuntu (base-passwd's globally allocated 64030)."""
DEBIAN_ALLOCATED = (60000, 64999)
"""Debian's globally allocated id range (policy 9.2.2), where packages such as slurm-wlm take fixed ids."""
UNUSABLE_IDS = {65534: "nobody/nogroup", 65535: "(uint16)-1, 'no user' to 16-bit tools"}
SIGNED_MAX = 2_147_483_647
"""Larger ids break tools that keep ids in a signed 32-bit int (and Kubernetes refuses them)."""
SHELLS = ("/bin/bash", "/bin/sh", "/usr/bin/zsh")
KEY_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)
KEY_RE = re.compile(r"^(\S+) ([A-Za-z0-9+/]+={0,2})(?: [^\x00-\x1f\x7f]*)?$")
"""One OpenSSH public key line: ``<type> <base64> [comment]``, no control character (so no line break)."""

TOP_KEYS = ("schema", "groups", "users")
GROUP_KEYS = ("name", "gid")
USER_KEYS = ("name", "uid", "gid", "groups", "shell", "home", "ssh_public_keys")


@dataclass(frozen=True)
class Group:
    name: str
    gid: int


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int
    groups: tuple[str, ...]
    shell: str
    home: str
    ssh_public_keys: tuple[str, ...]


@dataclass(frozen=True)
class UsersContract:
    groups: tuple[Group, ...]
    users: tuple[User, ...]
    schema: int = SCHEMA


def reserved_name(name: str) -> bool:
    """Whether ``name`` is a system account's or group's (or means something to a node)."""
    return name in RESERVED_NAMES or name.startswith(RESERVED_PREFIXES)


def id_problem(kind: str, value: int) -> tuple[str, str] | None:
    """``(code, why)`` when ``value`` cannot be a declared user's uid or group's gid (``kind``: uid or gid)."""
    if value < LOWEST_ID:
        return "uid-reserved", f"{kind} {value} is a system account's range (below {LOWEST_ID}): root, daemons, munge"
    if value == SLURM_UID:
        return (
            "uid-slurm",
            f"{kind} {value} is the slurm account's on Ubuntu: this user would own slurmctld's state and could act "
            "as the Slurm daemons",
        )
    if value in UNUSABLE_IDS:
        return "uid-slurm", f"{kind} {value} is {UNUSABLE_IDS[value]}: its files would be everybody's"
    if DEBIAN_ALLOCATED[0] <= value <= DEBIAN_ALLOCATED[1]:
        return "uid-slurm", f"{kind} {value} is in Debian's allocated range 60000–64999, where packages take fixed ids"
    if value > SIGNED_MAX:
        return "uid-slurm", f"{kind} {value} is above {SIGNED_MAX}: tools that keep ids in a signed int break"
    return None


def _obj(r: Reader, raw: Any, path: str, keys: tuple[str, ...]) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        r.err(path, f"must be an object, got {raw!r}")
        return None
    obj = cast("dict[str, Any]", raw)
    r.unknown(obj, keys, path)
    return obj


def _list(r: Reader, obj: dict[str, Any], key: str, path: str) -> list[Any]:
    where = f"{path}.{key}" if path else key
    raw = obj.get(key, [])
    if not isinstance(raw, list):
        r.err(where, f"must be a list, got {raw!r}")
        return []
    return cast("list[Any]", raw)


def _name(r: Reader, obj: dict[str, Any], path: str) -> str:
    name = r.string(obj, "name", path, required=True, pattern=NAME_RE, hint="a user or group name ([a-z_][a-z0-9_-]*)")
    if name is not None and reserved_name(name):
        r.err(f"{path}.name", f"{name!r} is a system account's or group's name")
        return ""
    return name or ""


def _id(r: Reader, obj: dict[str, Any], key: str, path: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        r.err(f"{path}.{key}", f"must be an integer, got {value!r}")
        return 0
    problem = id_problem(key, value)
    if problem is not None:
        r.err(f"{path}.{key}", problem[1])
        return 0
    return value


def _group(r: Reader, raw: Any, path: str) -> Group | None:
    obj = _obj(r, raw, path, GROUP_KEYS)
    return None if obj is None else Group(_name(r, obj, path), _id(r, obj, "gid", path))


def _key(r: Reader, value: Any, where: str) -> str:
    match = KEY_RE.fullmatch(value) if isinstance(value, str) else None
    if match is None or match.group(1) not in KEY_TYPES:
        r.err(where, f"is not one OpenSSH public key line of a {', '.join(KEY_TYPES)} key")
        return ""
    return cast(str, value)


def _user(r: Reader, raw: Any, path: str) -> User | None:
    obj = _obj(r, raw, path, USER_KEYS)
    if obj is None:
        return None
    name = _name(r, obj, path)
    groups: list[str] = []
    for i, g in enumerate(_list(r, obj, "groups", path)):
        if not isinstance(g, str) or not NAME_RE.match(g):
            r.err(f"{path}.groups[{i}]", f"{g!r} is not a group name")
        elif g in groups:
            r.err(f"{path}.groups[{i}]", f"{g!r} is listed twice")
        else:
            groups.append(g)
    shell = obj.get("shell")
    if shell not in SHELLS:
        r.err(f"{path}.shell", f"{shell!r} is not one of {', '.join(SHELLS)}")
    home = obj.get("home")
    if name and home != f"/home/{name}":
        r.err(f"{path}.home", f"{home!r} is not /home/{name} (every declared user's home)")
    keys = tuple(_key(r, k, f"{path}.ssh_public_keys[{i}]") for i, k in enumerate(_list(r, obj, "ssh_public_keys", path)))
    return User(name, _id(r, obj, "uid", path), _id(r, obj, "gid", path), tuple(groups), str(shell), str(home), keys)


def _cross_check(r: Reader, groups: tuple[Group, ...], users: tuple[User, ...]) -> None:
    """Names and ids unique; a user's gid and groups are the file's groups."""
    for kind, values in (
        ("groups", [(g.name, g.gid) for g in groups]),
        ("users", [(u.name, u.uid) for u in users]),
    ):
        names = [n for n, _ in values]
        ids = [i for _, i in values]
        for i, (name, number) in enumerate(values):
            if name and name in names[:i]:
                r.err(f"{kind}[{i}].name", f"{name!r} is listed twice")
            if number and number in ids[:i]:
                r.err(f"{kind}[{i}]", f"id {number} is listed twice")
    gids = {g.gid for g in groups}
    known = {g.name for g in groups}
    for i, u in enumerate(users):
        if u.gid and u.gid not in gids:
            r.err(f"users[{i}].gid", f"{u.gid} is not the gid of a group of this file")
        for g in u.groups:
            if g not in known:
                r.err(f"users[{i}].groups", f"{g!r} is not a group of this file")


def parse(data: Any, path: str | None = None) -> UsersContract:
    """Validate a decoded users.json; raise :class:`ConfigError` listing every problem."""
    errors: list[str] = []
    r = Reader(errors)
    top = _obj(r, data, "(top level)", TOP_KEYS)
    if top is None:
        raise ConfigError(errors, path)
    if top.get("schema") != SCHEMA:
        r.err("schema", f"this program reads schema {SCHEMA}, got {top.get('schema')!r}")
    groups = tuple(g for i, raw in enumerate(_list(r, top, "groups", "")) if (g := _group(r, raw, f"groups[{i}]")))
    users = tuple(u for i, raw in enumerate(_list(r, top, "users", "")) if (u := _user(r, raw, f"users[{i}]")))
    _cross_check(r, groups, users)
    if errors:
        raise ConfigError(errors, path)
    return UsersContract(groups, users)


def to_json(contract: UsersContract) -> str:
    """The file's text (groups by gid, users by name; compact keys sorted, so the same users give the same bytes)."""
    doc = {
        "schema": contract.schema,
        "groups": [{"name": g.name, "gid": g.gid} for g in sorted(contract.groups, key=lambda g: (g.gid, g.name))],
        "users": [
            {
                "name": u.name,
                "uid": u.uid,
                "gid": u.gid,
                "groups": list(u.groups),
                "shell": u.shell,
                "home": u.home,
                "ssh_public_keys": list(u.ssh_public_keys),
            }
            for u in sorted(contract.users, key=lambda u: u.name)
        ],
    }
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def records(contract: UsersContract) -> str:
    """The lines the users program reads (``templates/slurm/users.sh.j2``), ``:``-separated: ``group:<name>:<gid>``,
    then ``user:<name>:<uid>:<gid>:<groups,>:<shell>:<home>`` each followed by its ``key:<name>:<key line>``. No field
    but a key's last one can hold a ``:`` or a line break (:func:`parse` checked them), and that one is read whole."""
    lines = [f"group:{g.name}:{g.gid}" for g in sorted(contract.groups, key=lambda g: (g.gid, g.name))]
    for u in sorted(contract.users, key=lambda u: u.name):
        lines.append(f"user:{u.name}:{u.uid}:{u.gid}:{','.join(u.groups)}:{u.shell}:{u.home}")
        lines += [f"key:{u.name}:{k.strip()}" for k in u.ssh_public_keys]
    return "".join(line + "\n" for line in lines)


def load(path: str = USERS_PATH) -> UsersContract:
    """Read and parse the file; a missing, unreadable or malformed file is a :class:`ConfigError` too."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ConfigError([f"cannot read: {exc}"], path) from exc
    return parse(data, path)
