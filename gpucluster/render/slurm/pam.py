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

**sshd** (``templates/slurm/sshd-gpucluster.conf.j2``, ``/etc/ssh/sshd_config.d/60-gpucluster.conf``): keys only (no
password, no keyboard-interactive), no root login; declared users' keys from ``/etc/gpucluster/ssh/authorized_keys/%u``
(root's files, written by the users program) then the user's own ``~/.ssh/authorized_keys`` (a login node's key pair
for SSH into one's job); a directory with a key attribute through ``sss_ssh_authorizedkeys``; login nodes with SSH add
the shared host keys.
"""

from __future__ import annotations

from gpucluster.render.core import WriteFile, render
from gpucluster.render.slurm.identity import AUTHORIZED_KEYS_DIR, admin_sudoers
from gpucluster.resolve.identity import DirectoryIdentity, ResolvedIdentity

NODENAME_PLACEHOLDER = "@NODENAME@"
ADOPT_OPTIONS = (
    "action_no_jobs=deny",
    "action_unknown=newest",
    "action_adopt_failure=deny",
    "action_generic_failure=deny",
    f"nodename={NODENAME_PLACEHOLDER}",
)
ADMIN_ACCESS_FILE = "/etc/security/access-gpucluster-admins.conf"
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


def sshd_drop_in(identity: ResolvedIdentity, host_keys: tuple[str, ...] = ()) -> str:
    """``/etc/ssh/sshd_config.d/60-gpucluster.conf``; ``host_keys``: the login nodes' shared host key paths."""
    directory = _directory(identity)
    command = None
    if directory is not None and directory.ssh_public_key_attribute:
        command = f"{SSS_AUTHORIZED_KEYS} %u"
    files = ".ssh/authorized_keys" if directory is not None else f"{AUTHORIZED_KEYS_DIR}/%u .ssh/authorized_keys"
    return render(
        "slurm/sshd-gpucluster.conf.j2",
        authorized_keys_command=command,
        authorized_keys_file=files,
        host_keys=list(host_keys),
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
