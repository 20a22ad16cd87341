"""The head node's files: Slurm's (:mod:`.conf`), the agent's config, package pointer and wrappers, its systemd
units, the IMDS guard, the boot helper and the setup script that runs once; with a shared file system, the Lustre
mount before the setup. Its user data carries only those that fetch the rest from S3 (:mod:`.headfiles`)."""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.config.slurm import SLURM_VERSION
from gpucluster.render.compute.node import LUSTRE_MOUNT_SCRIPT, LustreMount, lustre_mount_script
from gpucluster.render.core import CloudConfig, WriteFile, bundle_json, render
from gpucluster.render.monitoring.logs import LOGS_UNIT, logs_files
from gpucluster.render.slurm.accounts import ACCOUNTS_PATH_UNIT, ACCOUNTS_TIMER, ACCOUNTS_UNIT, accounts_files
from gpucluster.render.slurm.agent import AgentBundle, boot_files, package_file
from gpucluster.render.slurm.collector import COLLECTOR_PACKAGES, SETUP_UNITS, collector_files, collector_workspace
from gpucluster.render.slurm.conf import cgroup_conf, gres_conf, slurm_conf, slurmdbd_conf, topology_conf
from gpucluster.render.slurm.containers import PLUGSTACK_CONF, any_containers, plugstack_conf
from gpucluster.render.slurm.guard import IMDS_GUARD, IMDS_GUARD_UNIT, imds_guard_script, imds_guard_unit, systemd_unit
from gpucluster.render.slurm.headfiles import (
    LIVE_UNIT,
    HeadFilesRef,
    bundle_ref,
    head_config_unit,
    small_cloud_config,
    split,
)
from gpucluster.render.slurm.home import HOME_MOUNT_SCRIPT, HomeMount, home_files
from gpucluster.render.slurm.identity import (
    USERS_TIMER,
    USERS_UNIT,
    has_users_program,
    identity_files,
)
from gpucluster.render.slurm.metrics import METRICS_PACKAGES, enable_units, metrics_files
from gpucluster.render.slurm.names import (
    AGENT_BIN,
    AGENT_COMMAND,
    AGENT_CONFIG_PATH,
    AGENT_LIB,
    AGENT_STATE_DIR,
    AWS_HELPER,
    DATA_DIR,
    HEAD_SETUP,
    PROGRAMS,
    SLURM_ETC,
    STATE_SAVE_LOCATION,
    TOPOLOGY_DIR,
    SlurmContext,
    agent_service,
    head_hostname,
)
from gpucluster.render.slurm.pam import head_ssh_files
from gpucluster.render.slurm.privacy import job_container_conf
from gpucluster.render.slurm.sssd import SSSD_PACKAGES, directory_files, directory_of, directory_setup, identity_helper_file
from gpucluster.render.slurm.team_directories import (
    TEAM_DIRECTORIES_PATH_UNIT,
    TEAM_DIRECTORIES_SCRIPT,
    team_directories,
    team_directories_files,
)
from gpucluster.render.slurm.team_metrics import has_team_metrics, team_metrics_setup
from gpucluster.render.slurm.usage import (
    TEAM_USAGE_TIMER,
    USAGE_TIMER,
    has_team_reports,
    has_usage_report,
    team_usage_files,
    usage_files,
)
from gpucluster_agents import contract

# Ubuntu 24.04 (noble) packages. python3-boto3 runs the agent and the boot helper.
HEAD_PACKAGES = ("slurmctld", "slurm-client", "munge", "python3-boto3", "iptables")
ACCOUNTING_PACKAGES = ("slurmdbd", "mariadb-server")


@dataclass(frozen=True)
class HeadInputs:
    """What the head node's user data needs from AWS, resolved."""

    data_volume_id: str
    agent: AgentBundle
    agent_config: contract.AgentConfig
    lustre: LustreMount | None = None
    home: HomeMount | None = None
    """The shared ``/home`` (``slurm.home``): mounted before the users and slurmctld, which requires it."""
    login_host_key_secret_arn: str | None = None
    """With SSH to the login nodes: the secret the head node fills once with their shared host keys
    (``gpucluster-identity ssh-host-keys --create``)."""
    metrics_workspace_id: str | None = None
    """The cluster's AMP workspace: with monitoring on, the head node's collector writes there (:mod:`.collector`)."""


def agent_command() -> str:
    """``gpucluster-agent <command>`` for an operator on the head node (``status``, ``release-brake <group>``,
    ``clear-protect <group>``): the agent as the slurm user, who owns its state (a state file root wrote
    would be one the agent, run by slurmctld and the timer as slurm, could not read)."""
    env = f"PYTHONPATH={AGENT_LIB} GPUCLUSTER_AGENT_CONFIG={AGENT_CONFIG_PATH}"
    return (
        "#!/bin/sh\n# The node agent's operator commands: status, release-brake <group>, clear-protect <group>.\n"
        f'[ "$(id -u)" -eq 0 ] && exec runuser -u slurm -- env {env} /usr/bin/python3 -m gpucluster_agents "$@"\n'
        f'exec env {env} /usr/bin/python3 -m gpucluster_agents "$@"\n'
    )


def head_files(ctx: SlurmContext, inputs: HeadInputs) -> tuple[WriteFile, ...]:
    """Every file of the head node, Slurm's own configs first: a few in its user data, the rest in its bundle
    (:func:`head_user_data`)."""
    accounting = ctx.slurm.accounting is not None
    files = [
        *slurm_files(ctx),
        *agent_files(ctx, inputs),
        *system_files(ctx, collector=collector_workspace(ctx, inputs.metrics_workspace_id) is not None),
        *identity_files(ctx.identity),
        *head_ssh_files(ctx.cluster, ctx.identity),
        *directory_files(ctx.cluster, ctx.identity),
        *home_files(inputs.home, ("slurmctld.service",)),
        *accounts_files(ctx, inputs.agent.bucket),
        *metrics_files(None, head=AGENT_STATE_DIR),
        *(logs_files(ctx.cluster, ctx.region, "head") if ctx.monitoring is not None else ()),
        *(usage_files(ctx.region) if has_usage_report(ctx, inputs.agent.bucket) else []),
        *(team_usage_files() if has_team_reports(ctx, inputs.home is not None) else []),
    ]
    workspace = collector_workspace(ctx, inputs.metrics_workspace_id)
    if workspace is not None:
        files += collector_files(ctx, workspace)
    if inputs.login_host_key_secret_arn is not None and directory_of(ctx.identity) is None:
        files.append(identity_helper_file())  # with a directory, directory_files brought it
    if accounting:
        files.append(
            WriteFile(
                "/etc/systemd/system/slurmdbd.service.d/gpucluster.conf",
                f"# gpucluster: the accounting database lives on the data volume.\n[Unit]\nRequiresMountsFor={DATA_DIR} /var/lib/mysql\n",
            )
        )
    if inputs.lustre is not None:  # the head node mounts over TCP
        files.append(WriteFile(LUSTRE_MOUNT_SCRIPT, lustre_mount_script(inputs.lustre, efa=False, gds=False), "0755"))
        files += team_directories_files(ctx, inputs.lustre)
    files.append(WriteFile(HEAD_SETUP, head_setup(ctx, inputs), "0755"))
    return tuple(files)


def slurm_files(ctx: SlurmContext) -> list[WriteFile]:
    """Slurm's own configs (and slurmdbd's with accounting)."""
    files = [
        WriteFile(f"{SLURM_ETC}/slurm.conf", slurm_conf(ctx)),
        WriteFile(f"{SLURM_ETC}/gres.conf", gres_conf(ctx)),
        WriteFile(f"{SLURM_ETC}/cgroup.conf", cgroup_conf(ctx)),
        WriteFile(f"{SLURM_ETC}/job_container.conf", job_container_conf(ctx)),
        *((WriteFile(PLUGSTACK_CONF, plugstack_conf()),) if any_containers(ctx) else ()),
        WriteFile(f"{TOPOLOGY_DIR}/topology.conf", topology_conf(ctx)),
    ]
    if ctx.slurm.accounting is not None:
        files.append(WriteFile(f"{SLURM_ETC}/slurmdbd.conf", slurmdbd_conf(ctx), "0600"))
    return files


def agent_files(ctx: SlurmContext, inputs: HeadInputs) -> list[WriteFile]:
    """The node agent: its config and package, the wrappers slurm.conf names, the operator's command, the maintain
    service and its timer."""
    files = [WriteFile(AGENT_CONFIG_PATH, contract.to_json(inputs.agent_config)), package_file(inputs.agent)]
    for key, name, command in PROGRAMS:
        wrapper = (
            f"#!/bin/sh\n# {key} of {ctx.cluster}: slurmctld runs it as SlurmUser with a hostlist and no PATH.\n"
            f"export PYTHONPATH={AGENT_LIB} GPUCLUSTER_AGENT_CONFIG={AGENT_CONFIG_PATH}\n"
            f'exec /usr/bin/python3 -m gpucluster_agents {command} "$1"\n'
        )
        files.append(WriteFile(f"{AGENT_BIN}/{name}", wrapper, "0755"))
    files.append(WriteFile(AGENT_COMMAND, agent_command(), "0755"))
    agent_env = f"Environment=GPUCLUSTER_AGENT_CONFIG={AGENT_CONFIG_PATH}\n"
    files += [
        WriteFile(
            "/etc/systemd/system/gpucluster-agent-maintain.service",
            systemd_unit(
                "gpucluster node agent: sweep, end capacity holds, name static nodes, refresh topology.conf",
                "After=slurmctld.service\n\n[Service]\nType=oneshot\nUser=slurm\nGroup=slurm\n"
                + agent_service("maintain", agent_env),
            ),
        ),
        *spot_files(inputs, agent_env),
        WriteFile(
            "/etc/systemd/system/gpucluster-agent-maintain.timer",
            systemd_unit(
                "Run the gpucluster node agent's maintain regularly",
                f"\n[Timer]\nOnBootSec=2min\nOnUnitActiveSec={ctx.slurm.agent.maintain_interval_seconds}s\nAccuracySec=5s\n",
                "WantedBy=timers.target",
            ),
        ),
    ]
    return files


SPOT_UNIT = "gpucluster-agent-spot.service"


def spot_files(inputs: HeadInputs, agent_env: str) -> list[WriteFile]:
    """The ``spot-watch`` service (``gpucluster_agents/power/spot.py``): long-polls the spot warnings' queue, always
    running (restarted if it stops), when the agent config names one."""
    if not inputs.agent_config.spot_queue_url:
        return []
    body = (
        "After=slurmctld.service\n\n[Service]\nType=simple\nUser=slurm\nGroup=slurm\n"
        + agent_service("spot-watch", agent_env)
        + "Restart=always\nRestartSec=10\n"
    )
    unit = systemd_unit(
        "gpucluster node agent: act on spot interruption and capacity block warnings", body, "WantedBy=multi-user.target"
    )
    return [WriteFile(f"/etc/systemd/system/{SPOT_UNIT}", unit)]


def system_files(ctx: SlurmContext, collector: bool = False) -> list[WriteFile]:
    """The host's own: the IMDS guard (``collector``: the metrics collector's user passes it too), the service that
    rewrites the files from the user data, slurmctld's drop-in, the kept host name, the boot helper."""
    return [
        WriteFile(f"/etc/systemd/system/{IMDS_GUARD_UNIT}", imds_guard_unit(head=True, collector=collector)),
        WriteFile(IMDS_GUARD, imds_guard_script(head=True, collector=collector), "0755"),
        head_config_unit(),
        WriteFile(
            "/etc/systemd/system/slurmctld.service.d/gpucluster.conf",
            "# gpucluster: slurmctld's state lives on the data volume; its config comes from the user data.\n"
            f"[Unit]\nRequiresMountsFor={DATA_DIR}\nAfter=gpucluster-head-config.service\n",
        ),
        WriteFile(
            "/etc/cloud/cloud.cfg.d/99-gpucluster-hostname.cfg",
            "# gpucluster: keep the controller's name\npreserve_hostname: true\n",
        ),
        *boot_files(ctx, head=True),
    ]


def head_setup(ctx: SlurmContext, inputs: HeadInputs) -> str:
    """The head node's setup script: the data volume, the packages, slurmctld (and slurmdbd)."""
    accounting = ctx.slurm.accounting is not None
    collector = collector_workspace(ctx, inputs.metrics_workspace_id) is not None
    return render(
        "slurm/head-setup.sh.j2",
        cluster=ctx.cluster,
        hostname=head_hostname(ctx.cluster),
        slurm_version=SLURM_VERSION,
        accounting=accounting,
        data_volume_id=inputs.data_volume_id,
        data_dir=DATA_DIR,
        packages=HEAD_PACKAGES
        + METRICS_PACKAGES
        + (ACCOUNTING_PACKAGES if accounting else ())
        + (SSSD_PACKAGES if directory_of(ctx.identity) else ())
        + (COLLECTOR_PACKAGES if collector else ()),
        region=ctx.region,
        **directory_setup(ctx.identity),
        aws_helper=AWS_HELPER,
        state_save_location=STATE_SAVE_LOCATION,
        agent_state_dir=AGENT_STATE_DIR,
        metrics_units=enable_units(head=True),
        logs_unit=LOGS_UNIT if ctx.monitoring is not None else None,
        topology_dir=TOPOLOGY_DIR,
        users_unit=f"{USERS_UNIT} {USERS_TIMER}" if has_users_program(ctx.identity) else None,
        team_directories=TEAM_DIRECTORIES_SCRIPT if inputs.lustre is not None and team_directories(ctx) else None,
        team_directories_path_unit=TEAM_DIRECTORIES_PATH_UNIT,
        home_mount=HOME_MOUNT_SCRIPT if inputs.home is not None else None,
        host_key_secret=inputs.login_host_key_secret_arn,
        accounts_units=(ACCOUNTS_UNIT, ACCOUNTS_PATH_UNIT, ACCOUNTS_TIMER, LIVE_UNIT.replace(".service", ".timer"))
        if accounting and ctx.teams is not None
        else None,
        usage_timer=USAGE_TIMER if has_usage_report(ctx, inputs.agent.bucket) else None,
        team_usage_timer=TEAM_USAGE_TIMER if has_team_reports(ctx, inputs.home is not None) else None,
        spot_unit=SPOT_UNIT if inputs.agent_config.spot_queue_url else None,
        collector_units=SETUP_UNITS if collector else None,
        team_metrics=team_metrics_setup() if has_team_metrics(ctx, collector) else None,
    )


@dataclass(frozen=True)
class HeadUserData:
    """The head node's user data and the bundle of its other files (:mod:`.headfiles`), with where the bundle lies."""

    config: CloudConfig
    bundle: str
    ref: HeadFilesRef
    live: str | None = None
    """The live bundle's text (:data:`~.headfiles.LIVE_KEY`), or None where the head node has no live files."""


def head_parts(ctx: SlurmContext, inputs: HeadInputs) -> tuple[tuple[WriteFile, ...], str, str | None]:
    """:func:`head_files` split: the files that stay in the user data, the bundle's text and the live bundle's (None
    without live files) (:mod:`.headfiles`)."""
    kept, rest, live = split(head_files(ctx, inputs))
    return kept, bundle_json(rest), bundle_json(live) if live else None


def head_user_data(ctx: SlurmContext, inputs: HeadInputs) -> HeadUserData:
    """The user data and the bundle, stored in the artifact bucket (``inputs.agent.bucket``) under a key that carries
    its hash."""
    kept, text, live = head_parts(ctx, inputs)
    ref = bundle_ref(inputs.agent.bucket, text)
    config = small_cloud_config(kept, ref, lustre=inputs.lustre is not None, live=live is not None)
    return HeadUserData(config, text, ref, live)


def head_cloud_config(ctx: SlurmContext, inputs: HeadInputs) -> CloudConfig:
    """The head node's user data (:func:`head_user_data`): the lockdown, the files that fetch the bundle, the runcmds."""
    return head_user_data(ctx, inputs).config


def head_title(ctx: SlurmContext) -> str:
    return f"gpucluster {ctx.cluster} / Slurm head node {head_hostname(ctx.cluster)} ({ctx.slurm.head_node.instance_type})"
