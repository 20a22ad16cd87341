"""sshd on Slurm nodes: who may log in, and how.

**Compute nodes** (``templates/slurm/pam-sshd-compute.j2``, rendered when the cluster has an identity): SSH admits a
user only while they have a job on the node. ``pam_slurm_adopt`` is the last module of sshd's account stack, with
``action_no_jobs=deny action_unknown=newest action_adopt_failure=deny action_generic_failure=deny`` (the last two
default to allow/ignore, which SchedMD's page calls insecure) and ``nodename=<NodeName>`` (our node names are not the
host names: the node setup substitutes ``@NODENAME@`` with what ``gpucluster-aws node-name`` printed). Members of the
admin group pass first through ``pam_access`` (``sufficient``, its own access file). ``pam_systemd`` is left out: it
conflicts with adoption (it moves the session to a systemd scope). The module is named without PAM's leading ``-``:
if it were missing the stack fails (no one but root gets in) instead of skipping the check. It needs
``PrologFlags=Contain`` (rendered for every version by :mod:`.privacy`); ``UsePAM`` in slurm.conf is unrelated and
never rendered. Session Manager does not pass PAM, so on compute nodes sessions are for admins only (IAM).

**Login nodes** (``templates/slurm/pam-sshd-login.j2``): Ubuntu's own sshd stack, plus ``pam_oddjob_mkhomedir.so``
with a directory (a directory user's home is made at first SSH login). The module "takes no options" and oddjob's
``mkhomedir`` helper has no umask flag (oddjob-mkhomedir 0.34.7, pam_oddjob_mkhomedir(8)): the mode comes from
``HOME_MODE`` in ``/etc/login.defs``, which the login setup sets to 0700. Its D-Bus configuration lets root call
``mkhomedirfor`` (what the module does inside sshd) but gives ``mkmyhomedir`` no ACL ("not allowed for anyone"): a
Session Manager shell calling it as the user is refused unless that file is changed.

**The head node** (``templates/slurm/pam-sshd-head.j2``, always): no one but root and the admin group has business
on the controller (researchers reach slurmctld through Slurm's own clients). sshd's drop-in says ``AllowGroups
<adminGroup>`` (``root`` without one: with ``PermitRootLogin no`` no one then logs in over SSH), and the account stack
starts with ``pam_access`` (``requisite``, its own file admitting root and the admin group, refusing everyone else)
before Ubuntu's ``common-account``: a key in a researcher's ``~/.ssh`` on the shared ``/home`` opens nothing, and a
later ``sufficient`` module cannot undo the refusal. The head node's security group admits no SSH at all
(``components/slurm/_head_network.py``); Session Manager is the way in.

**sshd** (``templates/slurm/sshd-gpucluster.conf.j2``, ``/etc/ssh/sshd_config.d/60-gpucluster.conf``): keys only (no
password, no keyboard-interactive), no root login; declared users' keys from ``/etc/gpucluster/ssh/authorized_keys/%u``
(root's files, written by the users program) then the user's own ``~/.ssh/authorized_keys`` (a login node's key pair
for SSH into one's job); a directory with a key attribute through ``sss_ssh_authorizedkeys``; login nodes with SSH add
the shared host keys.
"""

from __future__ import annotations

from gpucluster.render.core import WriteFile, render
from gpucluster.render.slurm.identity import AUTHORIZED_KEYS_DIR, admin_sudoers
from gpucluster.resolve.slurm.identity import DirectoryIdentity, ResolvedIdentity

NODENAME_PLACEHOLDER = "@NODENAME@"
ADOPT_OPTIONS = (
    "action_no_jobs=deny",
    "action_unknown=newest",
    "action_adopt_failure=deny",
    "action_generic_failure=deny",
    f"nodename={NODENAME_PLACEHOLDER}",
)
ADMIN_ACCESS_FILE = "/etc/security/access-gpucluster-admins.conf"
HEAD_ACCESS_FILE = "/etc/security/access-gpucluster-head.conf"
HEAD_PAM = "/etc/pam.d/sshd"
HEAD_FALLBACK_GROUP = "root"
"""Who sshd's ``AllowGroups`` names on a head node without an admin group: root's group (and root cannot log in)."""
COMPUTE_PAM_TEMPLATE = "/etc/gpucluster/pam/sshd-compute.in"  # the node setup writes /etc/pam.d/sshd from it
LOGIN_PAM = "/etc/pam.d/sshd"
SSHD_DROP_IN = "/etc/ssh/sshd_config.d/60-gpucluster.conf"
SSS_AUTHORIZED_KEYS = "/usr/bin/sss_ssh_authorizedkeys"
COMPUTE_PAM_PACKAGES = ("libpam-slurm-adopt", "openssh-server")


def _directory(identity: ResolvedIdentity) -> DirectoryIdentity | None:
    return identity.source if isinstance(identity.source, DirectoryIdentity) else None


def admin_access(group: str) -> str:
    """pam_access's file: members of ``group`` are admitted from anywhere; everyone else falls through to
    pam_slurm_adopt (``sufficient``: this module's refusal decides nothing)."""
    admin_sudoers(group)  # the same name check
    return f"# gpucluster: members of {group} (slurm.identity.adminGroup) log in to compute nodes without a job.\n+:({group}):ALL\n-:ALL:ALL\n"


def compute_pam_sshd(cluster: str, identity: ResolvedIdentity) -> str:
    """A compute node's ``/etc/pam.d/sshd`` with ``@NODENAME@`` in place of the node's name."""
    return render(
        "slurm/pam-sshd-compute.j2",
        cluster=cluster,
        admin_group=identity.admin_group,
        access_file=ADMIN_ACCESS_FILE,
        adopt_options=" ".join(ADOPT_OPTIONS),
        directory=_directory(identity) is not None,
    )


def login_pam_sshd(cluster: str, identity: ResolvedIdentity) -> str:
    """A login node's ``/etc/pam.d/sshd``."""
    return render("slurm/pam-sshd-login.j2", cluster=cluster, directory=_directory(identity) is not None)


def sshd_drop_in(identity: ResolvedIdentity | None, host_keys: tuple[str, ...] = (), allow_groups: tuple[str, ...] = ()) -> str:
    """``/etc/ssh/sshd_config.d/60-gpucluster.conf``; ``host_keys``: the login nodes' shared host key paths;
    ``allow_groups``: the only groups sshd lets in (the head node's). No identity: the users' own key files only."""
    directory = _directory(identity) if identity is not None else None
    command = None
    if directory is not None and directory.ssh_public_key_attribute:
        command = f"{SSS_AUTHORIZED_KEYS} %u"
    declared = identity is not None and directory is None
    files = f"{AUTHORIZED_KEYS_DIR}/%u .ssh/authorized_keys" if declared else ".ssh/authorized_keys"
    for group in allow_groups:
        admin_sudoers(group)  # the same name check
    return render(
        "slurm/sshd-gpucluster.conf.j2",
        authorized_keys_command=command,
        authorized_keys_file=files,
        host_keys=list(host_keys),
        allow_groups=list(allow_groups),
    )


def head_admin_group(identity: ResolvedIdentity | None) -> str:
    """The one group the head node's sshd and PAM admit: ``slurm.identity.adminGroup``, else root's."""
    group = identity.admin_group if identity is not None else None
    return group or HEAD_FALLBACK_GROUP


def head_access(identity: ResolvedIdentity | None) -> str:
    """The head node's pam_access file: root and the admin group from anywhere, everyone else refused."""
    group = head_admin_group(identity)
    admin_sudoers(group)  # the same name check
    lines = ["+:root:ALL", *([f"+:({group}):ALL"] if group != HEAD_FALLBACK_GROUP else []), "-:ALL:ALL"]
    who = "root" if group == HEAD_FALLBACK_GROUP else f"root and members of {group}"
    return f"# gpucluster: only {who} may pass sshd's account phase on the head node.\n" + "\n".join(lines) + "\n"


def head_pam_sshd(cluster: str, identity: ResolvedIdentity | None) -> str:
    """The head node's ``/etc/pam.d/sshd``: pam_access (requisite) before Ubuntu's account stack."""
    return render("slurm/pam-sshd-head.j2", cluster=cluster, admin_group=head_admin_group(identity), access_file=HEAD_ACCESS_FILE)


def head_ssh_files(cluster: str, identity: ResolvedIdentity | None) -> tuple[WriteFile, ...]:
    """The head node's sshd drop-in, PAM stack and access file (with or without an identity)."""
    return (
        WriteFile(SSHD_DROP_IN, sshd_drop_in(identity, allow_groups=(head_admin_group(identity),))),
        WriteFile(HEAD_PAM, head_pam_sshd(cluster, identity)),
        WriteFile(HEAD_ACCESS_FILE, head_access(identity)),
    )


def compute_pam_files(cluster: str, identity: ResolvedIdentity | None) -> tuple[WriteFile, ...]:
    """A compute node's sshd files (none without an identity: nobody but admins through IAM logs in)."""
    if identity is None:
        return ()
    files = [
        WriteFile(COMPUTE_PAM_TEMPLATE, compute_pam_sshd(cluster, identity)),
        WriteFile(SSHD_DROP_IN, sshd_drop_in(identity)),
    ]
    if identity.admin_group is not None:
        files.append(WriteFile(ADMIN_ACCESS_FILE, admin_access(identity.admin_group)))
    return tuple(files)
