"""Who is root on a Slurm node, and who the people are: the session lockdown, the admin group's sudo rule and the
declared users' accounts.

**Nobody root by opening a session** (every node gpucluster creates: head, login, compute, a hybrid site's cloud
nodes). Session Manager's agent makes ``ssm-user`` at its first session and grants it passwordless sudo in
``/etc/sudoers.d/ssm-agent-users`` — unless that file is already there: it never overwrites it (agent 2.3.634.0,
``createSudoersFileIfNotPresent``), and AWS documents a file holding only ``#User rules for ssm-user`` as the way to
take the grant away. Ubuntu's cloud-init gives the image's default user (``ubuntu``) the same grant in
``/etc/sudoers.d/90-cloud-init-users``. So at every boot, as cloud-init's ``bootcmd`` (before ``write_files``, before
users are made and before a session can be opened), :func:`session_lockdown_bootcmd`:

- writes the comment-only ``ssm-agent-users`` and empties ``90-cloud-init-users``;
- writes ``zz-gpucluster-no-session-sudo``: ``ssm-user`` and ``ubuntu`` may run nothing (``!ALL``). sudo reads
  ``/etc/sudoers.d`` in name order and the last matching rule wins, so this file outranks both grants: on the first
  boot cloud-init's ``users_groups`` module runs *after* ``bootcmd``, makes ``ubuntu`` and appends its grant to
  ``90-cloud-init-users`` again (cloud-config's ``users: []``, which would stop it, is refused by cloud-init's own
  schema: "too short"); this file denies it anyway;
- locks and expires ``ubuntu`` if it exists (a key pair's SSH login then fails PAM's account check). On the first boot
  the user does not exist yet at ``bootcmd``: the script, which the boot command leaves at
  ``/usr/local/sbin/gpucluster-session-lockdown``, runs again as a ``runcmd`` before the node's setup.

Each file is 0440 root:root, written through a temporary name sudo ignores (it skips names with a dot), then renamed.
The one sudo grant left is the admin group's (``/etc/sudoers.d/60-gpucluster-admins``), only when
``identity.adminGroup`` is set.

**Declared users** are data, not user data: :func:`users_json` writes them (groups, users, keys) as the users
contract (``gpucluster_agents/contract/users.py``), in one object at a fixed key of the artifact bucket
(``users/users.json``, :func:`users_bundle`). ``gpucluster-users.service`` (head, login and compute nodes) fetches it
(``gpucluster_agents/boot/users.py fetch``: only that path, mode 0644, and only a file the contract's strict parser
accepts, else nothing is written and the node keeps what it has), then runs the users program
``gpucluster_agents/boot/users.sh [--homes]`` from the installed node package, at boot after the shared file systems
and before Slurm's daemons, and again every 2 minutes (``gpucluster-users.timer``). So a user added or removed, or a
team's members changed, reaches every node within minutes, and no node's user data changes (none is replaced or
restarted; the user data does not grow with the users either). The program reads the file through the contract's
parser again (``users.py records``: names by the grammar, no system name, no uid or gid of the system's, Slurm's or
Debian's, only the allowed shells, homes ``/home/<user>``, one public key per line), and makes the declared groups
and users local accounts with the same uids and gids on every node (Slurm, sshd, pam_slurm_adopt and Run As all look
users up outside any job):

- a file the parser refuses changes no account (the program exits non-zero, the unit's log says why);
- a group is made (``groupadd -g``) when absent; one of that name with another gid, or another group holding the gid,
  is refused and no user is made;
- a user is made (``useradd -u -g -G -M -c gpucluster-managed``) when absent, brought to the declared groups, shell and
  home (``usermod``) when present; an account of that name with another uid, or another account holding the uid, is
  refused with a log line and the program exits non-zero at the end: files are never re-numbered silently;
- accounts with the ``gpucluster-managed`` comment that are no longer declared are locked and expired
  (``usermod --lock --expiredate 1``: no SSH, no Run As session — the agent's ``id`` lookup still finds them but PAM's
  account check and sshd refuse) and their keys removed; their files keep their owner;
- each user's SSH public keys go to ``/etc/gpucluster/ssh/authorized_keys/<user>`` (0644 root: sshd's
  ``AuthorizedKeysFile``, which users cannot edit);
- with ``--homes`` (login nodes, after ``/home`` is mounted) ``/home/<user>`` is made 0700 when absent;
- a run that refused nothing records the file's sha256 under ``/run`` (:data:`USERS_STAMP`): the timer's next run
  with the same file does nothing, and every boot applies the file in full.

Every command takes ``--prefix "$GPUCLUSTER_ROOT"`` when that is set, so tests run the script for real on a temporary
root. ``usermod -g`` runs only when the primary group changes (shadow 4.13's ``usermod --prefix`` looks a new primary
group up in the host's files).
"""

from __future__ import annotations

import json
import shlex

from gpucluster.render.core import WriteFile, bundle_json
from gpucluster.render.slurm.names import AGENT_LIB, AWS_HELPER_CONFIG
from gpucluster.resolve.slurm.identity import DeclaredIdentity, ResolvedIdentity
from gpucluster_agents.contract import users as users_contract
from gpucluster_agents.contract.users import USERS_KEY as USERS_KEY

SSM_SUDOERS = "/etc/sudoers.d/ssm-agent-users"
DENY_SUDOERS = "/etc/sudoers.d/zz-gpucluster-no-session-sudo"
DEFAULT_IMAGE_USER = "ubuntu"  # Ubuntu's cloud images (the head and login nodes', the DLAMIs')
SSM_SUDOERS_TEXT = "#User rules for ssm-user\n"
CLOUD_INIT_SUDOERS = "/etc/sudoers.d/90-cloud-init-users"
ADMIN_SUDOERS = "/etc/sudoers.d/60-gpucluster-admins"
USERS_PROGRAM = f"{AGENT_LIB}/gpucluster_agents/boot/users.sh"
"""The users program, in the installed node package (``gpucluster_agents/boot/users.sh``); run with ``/bin/bash``."""
LOCKDOWN_PROGRAM = "/usr/local/sbin/gpucluster-session-lockdown"
AUTHORIZED_KEYS_DIR = "/etc/gpucluster/ssh/authorized_keys"
MANAGED_COMMENT = "gpucluster-managed"  # the GECOS field of every account the users script makes
DENY_SUDOERS_TEXT = (
    "# gpucluster: no sudo for Session Manager's ssm-user or the image's default user (read last: the last match wins)\n"
    f"ssm-user ALL=(ALL:ALL) !ALL\n{DEFAULT_IMAGE_USER} ALL=(ALL:ALL) !ALL\n"
)

# The lockdown, run as cloud-init runs a bootcmd list (sh -c '<script>' gpucluster-session-lockdown). It honours
# GPUCLUSTER_ROOT (unset at boot) so tests run it on a temporary root.
_LOCKDOWN = f"""#!/bin/sh
# gpucluster: no sudo for ssm-user or the default user, at every boot (bootcmd) and once after cloud-init's users.
set -e
r="${{GPUCLUSTER_ROOT:-}}"
d="$r/etc/sudoers.d"
mkdir -p "$d"
put() {{ printf '%s' "$2" >"$d/.$1.new"; chmod 0440 "$d/.$1.new"; chown 0:0 "$d/.$1.new"; mv -f "$d/.$1.new" "$d/$1"; }}
put {SSM_SUDOERS.rsplit("/", 1)[1]} {shlex.quote(SSM_SUDOERS_TEXT)}
put {CLOUD_INIT_SUDOERS.rsplit("/", 1)[1]} ''
put {DENY_SUDOERS.rsplit("/", 1)[1]} {shlex.quote(DENY_SUDOERS_TEXT)}
if grep -q '^{DEFAULT_IMAGE_USER}:' "$r/etc/passwd" 2>/dev/null; then
  usermod ${{r:+--prefix "$r"}} --lock --expiredate 1 {DEFAULT_IMAGE_USER} || echo "gpucluster: could not lock {DEFAULT_IMAGE_USER}" >&2
fi
"""


# bootcmd: "$1" is the lockdown; it is written where the first runcmd finds it, then run (like the IMDS guard's).
_LOCKDOWN_INSTALL = (
    f'f="${{GPUCLUSTER_ROOT:-}}{LOCKDOWN_PROGRAM}"; mkdir -p "${{f%/*}}" && printf %s "$1" >"$f.new" && chmod 0755 "$f.new" '
    '&& mv -f "$f.new" "$f" && exec sh "$f"'
)


def session_lockdown_bootcmd() -> tuple[str, ...]:
    """The boot command that takes sudo from ``ssm-user`` and the image's default user (see the module): installs the
    lockdown as ``/usr/local/sbin/gpucluster-session-lockdown`` and runs it. A missing default user is no failure; a
    sudoers file that cannot be written is (cloud-init logs it)."""
    return ("sh", "-c", _LOCKDOWN_INSTALL, "gpucluster-session-lockdown", _LOCKDOWN)


def session_lockdown_runcmd() -> tuple[str, ...]:
    """The same lockdown as a ``runcmd`` (before the node's setup): on the first boot cloud-init makes the default
    user after ``bootcmd``."""
    return (LOCKDOWN_PROGRAM,)


def admin_sudoers(group: str) -> str:
    """The only sudo grant on a gpucluster node: ``%<group>`` may run anything as anyone, without a password (users
    have none: they come in with keys or Session Manager)."""
    if not users_contract.NAME_RE.fullmatch(group):  # the POSIX name grammar the users contract reads
        raise ValueError(f"admin group {group!r} is not a group name; refusing to render it into sudoers")
    return f"# gpucluster: members of {group} (slurm.identity.adminGroup) are root on every node.\n%{group} ALL=(ALL:ALL) NOPASSWD: ALL\n"


def admin_files(identity: ResolvedIdentity | None) -> tuple[WriteFile, ...]:
    """``/etc/sudoers.d/60-gpucluster-admins`` (0440) when the cluster has an admin group; nothing otherwise."""
    if identity is None or identity.admin_group is None:
        return ()
    return (WriteFile(ADMIN_SUDOERS, admin_sudoers(identity.admin_group), "0440"),)


USERS_MAIN = "import sys; sys.path.insert(0, sys.argv.pop(1)); from gpucluster_agents.boot.users import main; sys.exit(main())"
"""How the users program and its unit run the node package's :mod:`gpucluster_agents.boot.users` (``python3 -I -c
USERS_MAIN <package dir> fetch|records ...``): isolated, from the installed package."""
USERS_STAMP = "/run/gpucluster/users.sha256"
"""The sha256 of the users file the program last applied without a refusal: under ``/run``, so every boot applies it
in full; a timer's run with the same file does nothing."""
USERS_UNIT = "gpucluster-users.service"
USERS_TIMER = "gpucluster-users.timer"
USERS_POLL = "2min"


def users_json(declared: DeclaredIdentity) -> str:
    """``/etc/gpucluster/users.json``: the declared groups and users (:mod:`gpucluster_agents.contract.users`),
    checked by the contract's own parser before it leaves (a value the nodes would refuse fails the plan here)."""
    doc = users_contract.UsersContract(
        groups=tuple(users_contract.Group(g.name, g.gid) for g in declared.groups),
        users=tuple(
            users_contract.User(u.name, u.uid, u.gid, u.groups, u.shell, u.home, tuple(k.strip() for k in u.ssh_public_keys))
            for u in declared.users
        ),
    )
    text = users_contract.to_json(doc)
    users_contract.parse(json.loads(text), "users.json")
    return text


def users_bundle(identity: ResolvedIdentity | None) -> str | None:
    """The object at ``users/users.json`` in the artifact bucket (a files bundle of one file, the users file), which
    every node fetches (:mod:`gpucluster_agents.boot.users`); None without declared users."""
    if identity is None or not isinstance(identity.source, DeclaredIdentity):
        return None
    return bundle_json((WriteFile(users_contract.USERS_PATH, users_json(identity.source)),))


def users_unit(*, homes: bool) -> str:
    """Fetches the users file, then runs the users program (it converges): at boot after the shared file systems
    (``/home``) and before Slurm's daemons, then every :data:`USERS_POLL` (:func:`users_timer`). A failed fetch keeps
    the file the node has. ``homes``: login nodes make missing homes."""
    fetch = f'/usr/bin/python3 -I -c "{USERS_MAIN}" {AGENT_LIB} fetch {AWS_HELPER_CONFIG}'
    return (
        "# Generated by gpucluster.\n[Unit]\nDescription=gpucluster: the declared users and groups as local accounts\n"
        "Wants=network-online.target\nAfter=network-online.target remote-fs.target gpucluster-head-config.service\n"
        "Before=slurmctld.service slurmd.service sackd.service sshd.service ssh.service\n\n"
        f"[Service]\nType=oneshot\nWorkingDirectory=/\nExecStartPre=-{fetch}\n"
        f"ExecStart=/bin/bash {USERS_PROGRAM}{' --homes' if homes else ''}\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )


def users_timer() -> str:
    return (
        "# Generated by gpucluster.\n[Unit]\nDescription=gpucluster: fetch and apply the declared users every "
        f"{USERS_POLL}\n\n[Timer]\nOnBootSec={USERS_POLL}\nOnUnitActiveSec={USERS_POLL}\nUnit={USERS_UNIT}\n\n"
        "[Install]\nWantedBy=timers.target\n"
    )


def users_files(identity: ResolvedIdentity | None, *, homes: bool = False) -> tuple[WriteFile, ...]:
    """The users program's unit and timer, for a cluster with declared users (a directory's users come from SSSD).
    Neither the program (the node package holds it) nor the users (the users file every node fetches) are here, so
    a node's user data does not grow with the users, and a user's change leaves it as it is."""
    if identity is None or not isinstance(identity.source, DeclaredIdentity):
        return ()
    return (
        WriteFile(f"/etc/systemd/system/{USERS_UNIT}", users_unit(homes=homes)),
        WriteFile(f"/etc/systemd/system/{USERS_TIMER}", users_timer()),
    )


def identity_files(identity: ResolvedIdentity | None, *, homes: bool = False) -> tuple[WriteFile, ...]:
    """What a node gets of the identity: the admin group's sudo rule and the users program with its unit."""
    return admin_files(identity) + users_files(identity, homes=homes)


def has_users_program(identity: ResolvedIdentity | None) -> bool:
    return identity is not None and isinstance(identity.source, DeclaredIdentity)
