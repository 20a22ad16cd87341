"""The node health program wired into Slurm: the slurm.conf keys (``HealthCheckProgram``, ``Prolog`` and
their timers) and the two wrappers every compute node gets.

The program itself is the node package's (``python -m gpucluster_agents.health {sweep,prolog}``: exit
0 healthy, 1 a fault, after it drained its own node with a ``gpucluster:`` reason, 2 could not run). It
reaches compute nodes in the node package (``gpucluster-aws install-agent`` at first boot, before
slurmd starts, into ``AGENT_LIB``). The wrappers add what only Slurm's side knows: the time budget
under slurmd's limits, what a hang means, and a job's opt-out.

Every key here is read by slurmctld 22.05 as by 23.11 (the tests run 22.05 on the rendered file;
``HealthCheckNodeState=NONDRAINED_IDLE`` is the one value 22.05 refuses, so the model leaves it out). What
differs by version is what the prolog sees of a job: ``SLURM_JOB_COMMENT`` on 22.05 and later (Debian's
22.05 prep plugin sets it, and no ``SLURM_JOB_EXTRA``), ``SLURM_JOB_EXTRA`` only in later releases'
prolog code; the opt-out is read from both, so ``--comment`` works on every version.
"""

from __future__ import annotations

import shlex

from gpucluster.config.slurm.health import nvidia_gpus
from gpucluster.render.core import WriteFile, render
from gpucluster.render.slurm.names import AGENT_LIB, AWS_HELPER, SlurmContext
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup
from gpucluster_agents.contract.boot import HEALTH_BOOT_FAULT, HEALTH_BOOT_TIMEOUT, HEALTH_MAIN

HEALTH_CHECK = "/etc/gpucluster/slurm/health-check"
PROLOG_DIR = "/etc/gpucluster/slurm/prolog.d"
# slurm.conf names the directory (a glob, read on each node): the container prolog runs there too.
PROLOG = f"{PROLOG_DIR}/50-health"
HEALTH_LOG = "/var/log/gpucluster/health.log"
# Optional: the health program's own settings, passed as --config when a node has the file.
HEALTH_CONFIG = "/etc/gpucluster/health.json"
# The word in a job's comment (or --extra) that skips the health prolog for that job.
OPT_OUT = "gpucluster-health=off"
# The boot check: a oneshot unit slurmd wants and starts after (GPU groups only).
HEALTH_BOOT_UNIT = "gpucluster-health-boot.service"
# What the wrappers run (fixed paths: root runs them, nothing in their environment chooses a program).
PYTHON = "/usr/bin/python3"
SCONTROL = "scontrol"  # on the wrappers' fixed PATH (/usr/sbin:/usr/bin:/sbin:/bin)


def wrapper_values(agent_lib: str = AGENT_LIB, python: str = PYTHON, scontrol: str = SCONTROL) -> dict[str, str]:
    """The program the HealthCheckProgram and Prolog wrappers run, shell-quoted for the templates:
    ``python -I -c HEALTH_MAIN agent_lib`` (:data:`gpucluster_agents.contract.boot.HEALTH_MAIN`) and scontrol. Tests
    pass their own interpreter, package directory and scontrol; a node's wrappers get the defaults."""
    return {
        "python": shlex.quote(python),
        "health_main": shlex.quote(HEALTH_MAIN),
        "agent_lib": shlex.quote(agent_lib),
        "scontrol": shlex.quote(scontrol),
    }


def health_boot_unit() -> str:
    """``gpucluster-health-boot.service``: the health program's ``boot`` mode (``gpucluster-aws health``) at
    every boot, after the shared file systems and NVIDIA's services, before slurmd. slurmd only *wants* it:
    a fault does not keep slurmd off (a node that never registers strands the job that resumed it until
    ResumeTimeout and leaves a static node DOWN with no reason); it leaves its reason in
    ``HEALTH_BOOT_FAULT``, and the HealthCheckProgram, which slurmd runs before it registers, drains the
    node with it, and the prolog fails the jobs that were already given the node, until the node reboots."""
    return f"""# gpucluster: the GPU health check of this boot, before slurmd starts (docs/health.md).
[Unit]
Description=gpucluster GPU health check (boot mode)
After=remote-fs.target nvidia-persistenced.service nvidia-fabricmanager.service
Before=slurmd.service
ConditionPathExists={HEALTH_CONFIG}

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart={AWS_HELPER} health
TimeoutStartSec={HEALTH_BOOT_TIMEOUT + 30}
"""


def health_enabled(ctx: SlurmContext) -> bool:
    """Whether slurm.conf names the health programs: switched on and some Slurm group has NVIDIA GPUs."""
    return ctx.slurm.health.enabled and any(nvidia_gpus(g.facts) for g in ctx.node_groups)


def health_conf_lines(ctx: SlurmContext) -> list[str]:
    """slurm.conf's health lines (none when the checks are off)."""
    if not health_enabled(ctx):
        return []
    health = ctx.slurm.health
    lines = [
        f"HealthCheckProgram={HEALTH_CHECK}",
        f"HealthCheckInterval={health.interval_seconds}",
        f"HealthCheckNodeState={health.node_state_value()}",
    ]
    if health.prolog:
        lines += [
            f"Prolog={PROLOG_DIR}/*",
            # At allocation, on every node of the job: a bad node is found before the batch script
            # starts, not at the first srun on it.
            "PrologFlags=Alloc",
            f"PrologEpilogTimeout={health.prolog_epilog_timeout()}",
            # A node's fault is not the job's: requeue it to run elsewhere, not held for an admin.
            "SchedulerParameters=nohold_on_prolog_fail",
        ]
    return lines


def health_files(ctx: SlurmContext, group: ResolvedNodeGroup) -> tuple[WriteFile, ...]:
    """A compute node's wrappers: the sweep and (with the prolog on) the prolog, and the program's thresholds
    (``/etc/gpucluster/health.json``: the group's resolved ``health``, its ``shared_fs`` check included). Groups without NVIDIA GPUs get wrappers that exit 0, since slurm.conf names the same programs for every
    node."""
    from gpucluster_agents.contract.health import to_json

    health, facts = ctx.slurm.health, group.facts
    common = {
        "cluster": ctx.cluster,
        "group": group.name,
        "checks": health.enabled and nvidia_gpus(facts),
        **wrapper_values(),
        "log_file": HEALTH_LOG,
        "config": HEALTH_CONFIG,
        "boot_fault": HEALTH_BOOT_FAULT,
    }
    files = [
        WriteFile(
            HEALTH_CHECK,
            render("slurm/health-check.sh.j2", interval=health.interval_seconds, budget=health.sweep_timeout_seconds, **common),
            "0755",
        )
    ]
    if health.prolog:
        text = render(
            "slurm/prolog.sh.j2",
            budget=health.prolog_timeout_seconds,
            slurm_timeout=health.prolog_epilog_timeout(),
            opt_out=OPT_OUT,
            **common,
        )
        files.append(WriteFile(PROLOG, text, "0755"))
    if common["checks"] and group.health is not None:
        files.append(WriteFile(f"/etc/systemd/system/{HEALTH_BOOT_UNIT}", health_boot_unit()))
        files.append(WriteFile.compressed(HEALTH_CONFIG, to_json(group.health), "0644"))
    return tuple(files)
