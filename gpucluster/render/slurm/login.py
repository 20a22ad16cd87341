"""A login node's user data: people log in here (Session Manager as themselves, SSH behind the load balancer) and
submit with sbatch/srun; no slurmd, no jobs.

What it gets, in order: ``bootcmd`` — the IMDS guard of a compute node (only root reaches the instance role) and the
session lockdown (:mod:`.identity`); files — the boot helper, the guard's unit, the admin rule, the users program (run
with ``--homes``), the sshd drop-in, Ubuntu's sshd PAM stack (+ oddjob-mkhomedir with a directory), SSSD's template
and CA with a directory, the home mount, ``gpucluster-sackd.service`` (``sackd --conf-server``: configless), a
short ``/etc/profile.d`` note, the node package's pointer, the drain program's unit and config
(``/etc/gpucluster/login-drain.json``: :class:`gpucluster_agents.contract.login_drain.DrainConfig`)
and, with the cluster's monitoring on, the log shipper's unit and config (role ``login``,
:mod:`gpucluster.render.monitoring.logs`); ``runcmd`` — the lockdown again, then
``/usr/local/sbin/gpucluster-slurm-login``.

The drain program (``gpucluster_agents/boot/login_drain.py``) and the log shipper run from the node package, which
the setup installs from the cluster's artifact bucket (checked against its sha256), as a compute node does: the
user data carries neither program's source (EC2's 16 KB has no room for both beside the people's files). What
only AWS knows comes in :class:`LoginInputs` (the components part calls :func:`login_cloud_config`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from gpucluster.render.core import CloudConfig, WriteFile, render
from gpucluster.render.monitoring.logs import LOGS_UNIT, PYTHON, logs_files
from gpucluster.render.slurm.agent import boot_files, node_package_file
from gpucluster.render.slurm.container_build import container_build, container_packages
from gpucluster.render.slurm.containers import PYXIS_CONF, any_containers, pyxis_conf
from gpucluster.render.slurm.guard import IMDS_GUARD_UNIT, imds_guard_bootcmd, imds_guard_unit, systemd_unit
from gpucluster.render.slurm.home import HOME_MOUNT_SCRIPT, HomeMount, home_files
from gpucluster.render.slurm.identity import (
    USERS_TIMER,
    USERS_UNIT,
    has_users_program,
    identity_files,
    session_lockdown_bootcmd,
    session_lockdown_runcmd,
)
from gpucluster.render.slurm.names import AGENT_LIB, AWS_HELPER, SLURMCTLD_PORT, SlurmContext, controller_address
from gpucluster.render.slurm.pam import LOGIN_PAM, SSHD_DROP_IN, login_pam_sshd, sshd_drop_in
from gpucluster.render.slurm.sssd import SSSD_PACKAGES, directory_files, directory_of, directory_setup
from gpucluster.render.slurm.usage import has_team_reports, usage_program_file
from gpucluster_agents.contract.login_drain import PATH as DRAIN_PATH
from gpucluster_agents.contract.login_drain import DrainConfig

LOGIN_SETUP = "/usr/local/sbin/gpucluster-slurm-login"
SACKD_UNIT = "gpucluster-sackd.service"
DRAIN_MODULE = "gpucluster_agents.boot.login_drain"
DRAIN_UNIT = "gpucluster-login-drain.service"
DRAIN_CONFIG = DRAIN_PATH
DRAIN_POLL_SECONDS = 5
HOST_KEY_DIR = "/etc/ssh/gpucluster"
HOST_KEY_TYPES = ("ed25519", "ecdsa", "rsa")
PROFILE = "/etc/profile.d/gpucluster-login.sh"
# Ubuntu 24.04 (noble): Slurm's clients and sackd 23.11, munge, the boot helper's boto3, the guard's iptables.
LOGIN_PACKAGES = ("slurm-client", "sackd", "munge", "python3-boto3", "iptables", "openssh-server")


@dataclass(frozen=True)
class LoginInputs:
    """What a login node's user data needs from AWS, resolved by the components part."""

    region: str
    asg_name: str
    hook_name: str
    """The terminating lifecycle hook (``<cluster>-login-grace``) the drain program completes."""
    grace_seconds: int
    home: HomeMount | None = None
    host_key_secret_arn: str | None = None
    """The shared SSH host keys' secret when SSH is on (the head node fills it once)."""


def drain_config(inputs: LoginInputs) -> str:
    """``DRAIN_CONFIG`` (schema: :mod:`gpucluster_agents.contract.login_drain`)."""
    return DrainConfig(inputs.region, inputs.asg_name, inputs.hook_name, inputs.grace_seconds, DRAIN_POLL_SECONDS).to_json()


def sackd_unit(controller: str, home: bool) -> str:
    return systemd_unit(
        "gpucluster: sackd, Slurm's configuration and authentication for the client commands (configless)",
        f"Wants=network-online.target\nAfter=network-online.target munge.service {IMDS_GUARD_UNIT} {USERS_UNIT}\n"
        f"Requires=munge.service {IMDS_GUARD_UNIT}\n" + ("RequiresMountsFor=/home\n" if home else "") + "\n"
        # sackd makes /run/slurm/conf but not /run/slurm ("failed to create a clean cache dir", measured with 24.11)
        f"[Service]\nType=simple\nRuntimeDirectory=slurm\nExecStart=/usr/sbin/sackd -D --conf-server {controller}\n"
        "Restart=on-failure\n",
        "WantedBy=multi-user.target",
    )


def drain_unit(agent_lib: str = AGENT_LIB, python: str = PYTHON) -> str:
    """The drain program from the node package's root-owned directory (``-E -s``: nothing in the environment chooses
    what it imports)."""
    run = shlex.join((python, "-E", "-s", "-m", DRAIN_MODULE, DRAIN_CONFIG))
    return systemd_unit(
        "gpucluster: on scale-in, warn the users and wait for them (the lifecycle hook's grace)",
        f"Wants=network-online.target\nAfter=network-online.target\nConditionPathIsDirectory={agent_lib}\n\n"
        f"[Service]\nType=simple\nWorkingDirectory={agent_lib}\nExecStart={run}\nRestart=on-failure\n",
        "WantedBy=multi-user.target",
    )


def profile(ctx: SlurmContext, team_reports: bool = False) -> str:
    parts = ", ".join(g.partition for g in ctx.node_groups)
    return (
        f"# gpucluster: a note for people on a login node of {ctx.cluster}.\n"
        'case "$-" in *i*) ;; *) return 0 2>/dev/null || exit 0 ;; esac\n'
        f"echo 'Slurm cluster {ctx.cluster}. Partitions: {parts}. Your home: /home/'\"$USER\"'.'\n"
        "echo 'Submit with: sbatch job.sh   (or srun --pty bash); see your jobs: squeue --me'\n"
        + ('echo "Your team\'s guarantee, fair share, GPU-hours and dollars: gpucluster-usage"\n' if team_reports else "")
    )


ODDJOB_CONFIG_IN = "/etc/gpucluster/oddjobd-mkhomedir.conf"
ODDJOB_CONFIG = "/etc/oddjobd.conf.d/oddjobd-mkhomedir.conf"
HOME_UID_MIN = 1000
"""The lowest uid oddjobd makes a home for on its own call (``mkmyhomedir``): people, not system accounts."""


def oddjob_mkhomedir_conf(cluster: str) -> str:
    """oddjobd's mkhomedir service on a directory's login node: ``mkmyhomedir`` allowed to people (the package
    allows it to nobody, so a Session Manager session could not make its home), both methods with umask 0077."""
    return render("slurm/oddjobd-mkhomedir.conf.j2", cluster=cluster, min_uid=HOME_UID_MIN)


def login_files(ctx: SlurmContext, inputs: LoginInputs) -> list[WriteFile]:
    identity = ctx.identity
    if identity is None:
        raise ValueError(f"cluster {ctx.cluster!r}: login nodes need slurm.identity (nobody could log in)")
    ssh = inputs.host_key_secret_arn is not None
    host_keys = tuple(f"{HOST_KEY_DIR}/ssh_host_{k}_key" for k in HOST_KEY_TYPES) if ssh else ()
    files = [
        *boot_files(ctx),
        WriteFile(f"/etc/systemd/system/{IMDS_GUARD_UNIT}", imds_guard_unit(head=False)),
        *identity_files(identity, homes=True),
        *directory_files(ctx.cluster, identity),
        WriteFile(SSHD_DROP_IN, sshd_drop_in(identity, host_keys)),
        WriteFile(LOGIN_PAM, login_pam_sshd(ctx.cluster, identity)),
        *home_files(inputs.home, (SACKD_UNIT,)),
        WriteFile(
            f"/etc/systemd/system/{SACKD_UNIT}",
            sackd_unit(f"{controller_address(ctx.cluster)}:{SLURMCTLD_PORT}", inputs.home is not None),
        ),
        WriteFile(PROFILE, profile(ctx, has_team_reports(ctx, inputs.home is not None))),
        WriteFile(DRAIN_CONFIG, drain_config(inputs)),
        WriteFile(f"/etc/systemd/system/{DRAIN_UNIT}", drain_unit()),
        # the package: the drain program, the shipper, the identity helper, the users program (the bucket: a stand-in)
        node_package_file(),
        *(logs_files(ctx.cluster, ctx.region, "login") if ctx.monitoring is not None else ()),
        # srun here reads pyxis's options (--container-image); the job runs on the compute nodes
        *((WriteFile(PYXIS_CONF, pyxis_conf(None)),) if any_containers(ctx) else ()),
    ]
    if has_team_reports(ctx, inputs.home is not None):
        files.append(usage_program_file())  # a member's view of their teams (render/slurm/usage.py), named by PROFILE
    if directory_of(identity) is not None:
        files.append(WriteFile(ODDJOB_CONFIG_IN, oddjob_mkhomedir_conf(ctx.cluster)))
    return files


def login_setup(ctx: SlurmContext, inputs: LoginInputs) -> str:
    directory = directory_of(ctx.identity) is not None
    packages = LOGIN_PACKAGES + ((*SSSD_PACKAGES, "oddjob-mkhomedir") if directory else ())
    containers = any_containers(ctx)  # srun --container-image from here loads pyxis
    packages += container_packages() if containers else ()
    return render(
        "slurm/login-setup.sh.j2",
        cluster=ctx.cluster,
        controller=f"{controller_address(ctx.cluster)}:{SLURMCTLD_PORT}",
        packages=packages,
        containers=container_build() if containers else None,
        imds_guard_unit=IMDS_GUARD_UNIT,
        aws_helper=AWS_HELPER,
        region=inputs.region,
        home=inputs.home is not None,
        home_mount=HOME_MOUNT_SCRIPT,
        users_unit=f"{USERS_UNIT} {USERS_TIMER}" if has_users_program(ctx.identity) else None,
        ssh=inputs.host_key_secret_arn is not None,
        host_key_secret=inputs.host_key_secret_arn or "",
        sackd_unit=SACKD_UNIT,
        drain_unit=DRAIN_UNIT,
        logs_unit=LOGS_UNIT if ctx.monitoring is not None else None,
        oddjob_config_in=ODDJOB_CONFIG_IN,
        oddjob_config=ODDJOB_CONFIG,
        **directory_setup(ctx.identity),
    )


def login_cloud_config(ctx: SlurmContext, inputs: LoginInputs) -> CloudConfig:
    """A login node's user data (see the module); ``ctx`` must carry the cluster's identity."""
    files = login_files(ctx, inputs)
    files.append(WriteFile(LOGIN_SETUP, login_setup(ctx, inputs), "0755"))
    return CloudConfig(
        write_files=tuple(files),
        first_bootcmd=(imds_guard_bootcmd(), session_lockdown_bootcmd()),
        runcmd=(session_lockdown_runcmd(), (LOGIN_SETUP,)),
        sections=("slurm login node",),
    )


def login_title(ctx: SlurmContext) -> str:
    return f"gpucluster {ctx.cluster} / Slurm login node"
