"""A compute node's Slurm part of its user data (added to :meth:`GpuCluster.node_user_data` as the
``extra`` part): the setup script that waits for the node's name (its launch's node map or its name tag) and starts
``slurmd --conf-server … -N <node>``, the TaskProlog that gives every task the node's NCCL/EFA
environment, slurmd's drop-in, the IMDS guard and the boot helper; with health checks on, the node
package (installed before slurmd starts) and the health wrappers slurm.conf names. Slurm's own files come from
slurmctld (configless)."""

from __future__ import annotations

from gpucluster.config.slurm.health import nvidia_gpus
from gpucluster.facts.nccl import library_dirs
from gpucluster.render.compute.node import NCCL_ENV_PATH
from gpucluster.render.core import CloudConfig, WriteFile, render
from gpucluster.render.monitoring.logs import LOGS_UNIT, logs_files
from gpucluster.render.slurm.agent import boot_files, node_package_file
from gpucluster.render.slurm.container_build import container_build, container_packages
from gpucluster.render.slurm.containers import (
    ContainerLayout,
    any_containers,
    layout_of,
    node_container_files,
    setup_values,
    slurmd_start_pre,
)
from gpucluster.render.slurm.guard import IMDS_GUARD_UNIT, imds_guard_bootcmd, imds_guard_unit
from gpucluster.render.slurm.health import HEALTH_BOOT_UNIT, health_enabled, health_files
from gpucluster.render.slurm.home import HOME_MOUNT_SCRIPT, HomeMount, home_files
from gpucluster.render.slurm.identity import (
    USERS_TIMER,
    USERS_UNIT,
    has_users_program,
    identity_files,
    session_lockdown_bootcmd,
    session_lockdown_runcmd,
)
from gpucluster.render.slurm.image import baked, hook_files, hook_values, node_packages
from gpucluster.render.slurm.metrics import enable_units, metrics_files
from gpucluster.render.slurm.names import AWS_HELPER, NODE_SETUP, SLURMCTLD_PORT, TASK_PROLOG, SlurmContext, controller_address
from gpucluster.render.slurm.pam import COMPUTE_PAM_TEMPLATE, NODENAME_PLACEHOLDER, compute_pam_files
from gpucluster.render.slurm.registries import ECR_TOKEN_TIMER, ecr_files
from gpucluster.render.slurm.sssd import directory_files, directory_of, directory_setup
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup, SlurmGroup
from gpucluster_agents import contract


def slurmd_drop_in(boot_check: bool, containers: ContainerLayout | None = None) -> str:
    """slurmd's drop-in. GPU nodes with health checks: the boot check runs first (``Wants``, not
    ``Requires``: its fault drains the node once slurmd is up, it does not keep slurmd off)."""
    lines = [
        "# gpucluster: slurm.conf comes from slurmctld (configless), so there is none locally to wait for;",
        "# jobs start after the shared file systems are mounted, and only while only root reaches the",
        "# instance metadata service (no guard, no slurmd: no job can run).",
    ]
    if boot_check:
        lines.append("# The GPU health check of this boot runs first; a fault drains the node once slurmd is up.")
    lines += ["[Unit]", "ConditionPathExists=", f"Requires={IMDS_GUARD_UNIT}"]
    if boot_check:
        lines.append(f"Wants={HEALTH_BOOT_UNIT}")
    lines.append(f"After=remote-fs.target {IMDS_GUARD_UNIT}" + (f" {HEALTH_BOOT_UNIT}" if boot_check else ""))
    if containers is not None:
        lines += slurmd_start_pre(containers)
    return "\n".join(lines) + "\n"


def task_prolog(group: ResolvedNodeGroup) -> str:
    return render(
        "slurm/task-prolog.sh.j2",
        nccl_env=NCCL_ENV_PATH,
        library_dirs=list(library_dirs(group.facts, group.efa)),
    )


def node_slurm_part(
    ctx: SlurmContext, group: ResolvedNodeGroup, home: HomeMount | None = None, metrics: bool = True
) -> CloudConfig:
    """The Slurm part of a compute node's user data (plain: nothing here waits for AWS); the health checks expect
    what the group's ``shared_fs`` names (:func:`~gpucluster.resolve.compute.node_group.with_shared_fs`). ``home``: the shared
    ``/home`` (``slurm.home``), mounted before the users and slurmd, which requires it. ``metrics``: the node's
    exporters (gpucluster-metrics and the node exporter, :mod:`gpucluster.render.slurm.metrics`). With the cluster's
    monitoring on, the log shipper too (:mod:`gpucluster.render.monitoring.logs`), started before slurmd."""
    health = health_enabled(ctx)
    on_image = baked(group)
    hooks = group.entry.hooks if isinstance(group, SlurmGroup) else None
    logs = ctx.monitoring is not None
    # the users program reads its file through the package's users contract
    package = health or directory_of(ctx.identity) is not None or metrics or logs or has_users_program(ctx.identity)
    # the container prolog, epilog and mount check are the package's
    package = package or any_containers(ctx)
    boot_check = health and ctx.slurm.health.enabled and nvidia_gpus(group.facts)
    build = not on_image and isinstance(group, SlurmGroup) and group.containers  # pyxis and enroot, not baked
    ecr = isinstance(group, SlurmGroup) and group.containers and bool(ctx.slurm.containers.registries)
    setup = render(
        "slurm/node-setup.sh.j2",
        cluster=ctx.cluster,
        controller=f"{controller_address(ctx.cluster)}:{SLURMCTLD_PORT}",
        packages=() if on_image else node_packages(ctx, metrics=metrics) + (container_packages() if build else ()),
        containers=container_build() if build else None,
        ecr_timer=ECR_TOKEN_TIMER if ecr else None,
        region=ctx.region,
        **directory_setup(ctx.identity),
        aws_helper=AWS_HELPER,
        node_name_tag=contract.TAG_NODE_NAME,
        imds_guard_unit=IMDS_GUARD_UNIT,
        # the health program, the identity helper and the metrics exporter are in the package; a baked image holds it
        install_package=not on_image and package,
        metrics_units=enable_units() if metrics else None,
        logs_unit=LOGS_UNIT if logs else None,
        hooks=hook_values(hooks),
        users_unit=f"{USERS_UNIT} {USERS_TIMER}" if has_users_program(ctx.identity) else None,
        home_mount=HOME_MOUNT_SCRIPT if home is not None else None,
        pam=ctx.identity is not None,
        pam_template=COMPUTE_PAM_TEMPLATE,
        nodename_placeholder=NODENAME_PLACEHOLDER,
        **setup_values(layout_of(ctx, group)),
    )
    return CloudConfig(
        write_files=(
            *boot_files(ctx, compute=True),
            *((node_package_file(),) if package else ()),
            *(health_files(ctx, group) if health else ()),
            *(metrics_files(group) if metrics else ()),
            *(logs_files(ctx.cluster, ctx.region, "compute") if logs else ()),
            WriteFile(TASK_PROLOG, task_prolog(group), "0755"),
            *(ecr_files(ctx.slurm.containers.registries) if ecr else ()),
            WriteFile(f"/etc/systemd/system/{IMDS_GUARD_UNIT}", imds_guard_unit(head=False)),
            WriteFile("/etc/systemd/system/slurmd.service.d/gpucluster.conf", slurmd_drop_in(boot_check, layout_of(ctx, group))),
            *identity_files(ctx.identity),
            *compute_pam_files(ctx.cluster, ctx.identity),
            *directory_files(ctx.cluster, ctx.identity),
            *home_files(home, ("slurmd.service",)),
            *hook_files(hooks),
            *node_container_files(ctx, group),
            WriteFile(NODE_SETUP, setup, "0755"),  # plain: the document is gzipped (see boot_files)
        ),
        # the guard first (the e2e test runs it alone), then the session lockdown: both before write_files
        first_bootcmd=(imds_guard_bootcmd(), session_lockdown_bootcmd()),
        runcmd=(session_lockdown_runcmd(), (NODE_SETUP,)),
        sections=("slurmd (configless)",),
    )
