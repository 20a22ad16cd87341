"""Who is root on a Slurm node, and who the people are: the session lockdown, the admin group's sudo rule and the
declared users' accounts.

**Nobody root by opening a session** (every node gpucluster creates: head, login, compute, a hybrid site's cloud
nodes). Session Manager's agent makes ``ssm-user`` at its first session and grants it passwordless sudo in
``/etc/sudoers.d/ssm-agent-users`` — unless that file is already there: it never overwrites it (agent 2.3.634.0,
``createSudoersFileIfNotPresent``), and AWS documents a file holding only ``#User rules for ssm-user`` as the way to
take the grant away. Ubuntu's cloud-init gives the image's default user (``ubuntu``) the same grant in
``/etc/sudoers.d/90-cloud-init-users``. So at every boot, as cloud-init's ``bootcmd`` (before ``write_files``, before
users are made and before a session can be opened), :func:`session_lockdown_bootcmd` writes the comment-only file,
empties the cloud-init one (both 0440 root:root, each through a temporary name sudo ignores — it skips names with a
dot — then a rename), and locks and expires the default user if it exists. The node's cloud-config also says
``users: []`` (:attr:`CloudConfig.no_default_user`): cloud-init's ``users_groups`` runs *after* ``bootcmd`` and would
otherwise make ``ubuntu`` and its grant on the first boot. The one sudo rule left is the admin group's
(``/etc/sudoers.d/60-gpucluster-admins``), only when ``identity.adminGroup`` is set.

**Declared users** (:func:`users_script`): ``/usr/local/sbin/gpucluster-users``, see ``templates/slurm/users.sh.j2``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from gpucluster.render.core import WriteFile, render
from gpucluster.resolve.identity import DeclaredIdentity, ResolvedIdentity

SSM_SUDOERS = "/etc/sudoers.d/ssm-agent-users"
SSM_SUDOERS_TEXT = "#User rules for ssm-user\n"
CLOUD_INIT_SUDOERS = "/etc/sudoers.d/90-cloud-init-users"
ADMIN_SUDOERS = "/etc/sudoers.d/60-gpucluster-admins"
DEFAULT_IMAGE_USER = "ubuntu"  # Ubuntu's cloud images (the head and login nodes', the DLAMIs')
USERS_PROGRAM = "/usr/local/sbin/gpucluster-users"
AUTHORIZED_KEYS_DIR = "/etc/gpucluster/ssh/authorized_keys"
MANAGED_COMMENT = "gpucluster-managed"  # the GECOS field of every account the users script makes
_GROUP_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")

# The lockdown, run as cloud-init runs a bootcmd list (sh -c '<script>' gpucluster-session-lockdown). It honours
# GPUCLUSTER_ROOT (unset at boot) so tests run it on a temporary root.
_LOCKDOWN = f"""set -e
r="${{GPUCLUSTER_ROOT:-}}"
d="$r/etc/sudoers.d"
mkdir -p "$d"
put() {{ printf '%s' "$2" >"$d/.$1.new"; chmod 0440 "$d/.$1.new"; chown 0:0 "$d/.$1.new"; mv -f "$d/.$1.new" "$d/$1"; }}
put {SSM_SUDOERS.rsplit("/", 1)[1]} '{SSM_SUDOERS_TEXT}'
put {CLOUD_INIT_SUDOERS.rsplit("/", 1)[1]} ''
if grep -q '^{DEFAULT_IMAGE_USER}:' "$r/etc/passwd" 2>/dev/null; then
  usermod ${{r:+--prefix "$r"}} --lock --expiredate 1 {DEFAULT_IMAGE_USER} || echo "gpucluster: could not lock {DEFAULT_IMAGE_USER}" >&2
fi
"""


def session_lockdown_script() -> str:
    """The lockdown's shell text (see the module)."""
    return _LOCKDOWN


def session_lockdown_bootcmd() -> tuple[str, ...]:
    """The boot command that takes sudo from ``ssm-user`` and the image's default user (see the module). A missing
    default user is no failure; a sudoers file that cannot be written is (cloud-init logs it)."""
    return ("sh", "-c", _LOCKDOWN, "gpucluster-session-lockdown")


def admin_sudoers(group: str) -> str:
    """The only sudo grant on a gpucluster node: ``%<group>`` may run anything as anyone, without a password (users
    have none: they come in with keys or Session Manager)."""
    if not _GROUP_RE.fullmatch(group):
        raise ValueError(f"admin group {group!r} is not a group name; refusing to render it into sudoers")
    return f"# gpucluster: members of {group} (slurm.identity.adminGroup) are root on every node.\n%{group} ALL=(ALL:ALL) NOPASSWD: ALL\n"


def admin_files(identity: ResolvedIdentity | None) -> tuple[WriteFile, ...]:
    """``/etc/sudoers.d/60-gpucluster-admins`` (0440) when the cluster has an admin group; nothing otherwise."""
    if identity is None or identity.admin_group is None:
        return ()
    return (WriteFile(ADMIN_SUDOERS, admin_sudoers(identity.admin_group), "0440"),)


def _words(*args: object) -> str:
    return " ".join(shlex.quote(str(a)) for a in args)


def users_script(declared: DeclaredIdentity) -> str:
    """``gpucluster-users``: the declared groups and users as local accounts (see ``templates/slurm/users.sh.j2``).

    Every value reaches the script as a quoted shell word computed here; the template only places lines."""
    users = sorted(declared.users, key=lambda u: u.name)
    names = {u.name for u in users}
    return render(
        "slurm/users.sh.j2",
        comment=MANAGED_COMMENT,
        keys_dir=AUTHORIZED_KEYS_DIR,
        groups=[
            {"name": g.name, "gid": g.gid, "q": _words(g.name)}
            for g in sorted(declared.groups, key=lambda g: (g.gid, g.name))
        ],
        users=[
            {
                "name": u.name,
                "q": _words(u.name),
                "uid": u.uid,
                "gid": u.gid,
                "groups": _words(",".join(u.groups)) if u.groups else "''",
                "shell": _words(u.shell),
                "home": _words(u.home),
                "authorized": "".join(k.strip() + "\n" for k in u.ssh_public_keys),
            }
            for u in users
        ],
        declared=" ".join(sorted(names)),
    )


USERS_UNIT = "gpucluster-users.service"


def users_unit(*, homes: bool) -> str:
    """Runs the users program at every boot (it converges: a changed user data reaches a rebooted node), after the
    shared file systems (``/home``) and before Slurm's daemons; ``homes``: login nodes make missing homes."""
    return (
        "# Generated by gpucluster.\n[Unit]\nDescription=gpucluster: the declared users and groups as local accounts\n"
        "Wants=network-online.target\nAfter=network-online.target remote-fs.target gpucluster-head-config.service\n"
        "Before=slurmctld.service slurmd.service sackd.service sshd.service ssh.service\n\n"
        f"[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart={USERS_PROGRAM}{' --homes' if homes else ''}\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )


def users_files(identity: ResolvedIdentity | None, *, homes: bool = False) -> tuple[WriteFile, ...]:
    """The users program and its unit, for a cluster with declared users (a directory's users come from SSSD)."""
    if identity is None or not isinstance(identity.source, DeclaredIdentity):
        return ()
    return (
        WriteFile.compressed(USERS_PROGRAM, users_script(identity.source), "0755"),
        WriteFile(f"/etc/systemd/system/{USERS_UNIT}", users_unit(homes=homes)),
    )


def identity_files(identity: ResolvedIdentity | None, *, homes: bool = False) -> tuple[WriteFile, ...]:
    """What a node gets of the identity: the admin group's sudo rule and the users program with its unit."""
    return admin_files(identity) + users_files(identity, homes=homes)


def has_users_program(identity: ResolvedIdentity | None) -> bool:
    return identity is not None and isinstance(identity.source, DeclaredIdentity)


def sudoers_grants(files: Sequence[WriteFile]) -> list[str]:
    """Paths under ``/etc/sudoers.d`` that a node's files write (tests: only the admin file may be among them)."""
    return [f.path for f in files if f.path.startswith("/etc/sudoers.d/")]
