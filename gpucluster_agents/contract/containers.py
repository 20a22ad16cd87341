# pyright: strict
"""The containers contract: the files a Slurm node with containers runs and reads (docs/containers.md), as text from
two values, the node's enroot root (``<scratch>/enroot`` or ``/run/enroot``) and its layer-cache budget in MiB.

The node writes them at its first boot (:mod:`gpucluster_agents.boot.containers`, called by the node's setup with
the two values; the user data has no room for the files themselves); the Pulumi side
(``gpucluster.render.slurm.containers``) renders the same text from here for its goldens and tests. Stdlib only,
Python 3.9.
"""

from __future__ import annotations

import shlex

AGENT_LIB = "/opt/gpucluster/lib"
PYXIS_SO = "/usr/local/lib/slurm/spank_pyxis.so"
PLUGSTACK_DIR = "/etc/slurm/plugstack.conf.d"
PYXIS_CONF = f"{PLUGSTACK_DIR}/pyxis.conf"
ENROOT_CONF = "/etc/enroot/enroot.conf"
ENROOT_HOOKS = "/etc/enroot/hooks.d"
ENROOT_EXTRA_HOOKS = "/usr/share/enroot/hooks.d"
"""Where ``make install`` (prefix ``/usr``) puts enroot's optional hooks (``conf/hooks/extra``), none enabled."""
TRAINING_HOOKS = ("50-slurm-pmi.sh", "50-slurm-pytorch.sh")
"""enroot's hooks a multi-node job needs: PMIx/PMI2 into the container, and MASTER_ADDR/WORLD_SIZE from Slurm."""
MOUNT_CHECK_HOOK = f"{ENROOT_HOOKS}/05-gpucluster-mounts.sh"
CONTAINER_JOB = "/etc/gpucluster/slurm/prolog.d/20-containers"
"""The container prolog, and slurm.conf's Epilog too: one program that reads ``SLURM_SCRIPT_CONTEXT``."""
ENROOT_MOUNTS = "/etc/enroot/mounts.d/50-gpucluster.fstab"
TASK_PROLOG = "/etc/gpucluster/slurm/task-prolog"
"""slurm.conf's TaskProlog (the render's ``names.TASK_PROLOG``), and the NCCL/EFA settings it reads (the render's
``NCCL_ENV_PATH``)."""
NCCL_ENV = "/etc/gpucluster/nccl.env"
JOB_PROGRAM = f"{AGENT_LIB}/gpucluster_agents/boot/containers-job.sh"
MOUNT_CHECK_PROGRAM = f"{AGENT_LIB}/gpucluster_agents/boot/enroot-mount-check.sh"


def enroot_conf(root: str) -> str:
    """enroot's configuration: per-UID directories under ``root`` (made by the container prolog) and the options
    docs/containers.md gives the reasons of (a writable root, the host's /dev for GPUs and EFA, the image's home,
    uncompressed squashfs). ``ENROOT_ALLOW_SUPERUSER`` and ``ENROOT_ALLOW_HTTP`` keep enroot's default, off."""
    return (
        "# gpucluster: docs/containers.md\n"
        f"ENROOT_RUNTIME_PATH {root}/runtime/user-${{UID}}\n"
        f"ENROOT_DATA_PATH {root}/data/user-${{UID}}\n"
        f"ENROOT_CACHE_PATH {root}/cache/user-${{UID}}\n"
        f"ENROOT_TEMP_PATH {root}/tmp/user-${{UID}}\n"
        "# the user's own registry credentials: ~/.config/enroot/.credentials (pyxis's job epilog runs enroot\n"
        "# without HOME)\n"
        "ENROOT_CONFIG_PATH ${HOME:-/nonexistent}/.config/enroot\n"
        "# a job may pip install; the writes stay in the user's data directory\n"
        "ENROOT_ROOTFS_WRITABLE yes\n"
        "# the host's /dev: the GPUs and EFA (/dev/infiniband); Slurm's device cgroup confines a step\n"
        "ENROOT_RESTRICT_DEV no\n"
        "# the image's home, not the host's dotfiles (srun --container-mount-home mounts it)\n"
        "ENROOT_MOUNT_HOME no\n"
        "ENROOT_ALLOW_SUPERUSER no\n"
        "ENROOT_ALLOW_HTTP no\n"
        "# uncompressed: scratch is plentiful, and an uncompressed image starts faster\n"
        "ENROOT_SQUASH_OPTIONS -noI -noD -noF -noX -no-duplicates\n"
    )


def pyxis_conf(root: str | None) -> str:
    """The pyxis drop-in: ``required`` (a node whose pyxis does not load fails at slurmd's start; it never runs a
    ``--container-image`` step outside its container). ``root``: a compute node's enroot root (pyxis's imports go
    under it), or None on a login node (srun there only reads pyxis's options)."""
    args = ["container_scope=job", "sbatch_support=1", "execute_entrypoint=0"]
    if root is not None:
        args.insert(0, f"runtime_path={root}/pyxis")
    return (
        "# gpucluster: pyxis (srun/sbatch --container-image), built against this node's Slurm (docs/containers.md)\n"
        f"required {PYXIS_SO} {' '.join(args)}\n"
    )


def enroot_mounts() -> str:
    """What enroot binds into every container: slurmstepd runs the TaskProlog after pyxis has entered the container,
    so the script and the settings it reads are bound in at their own paths, read-only (measured: without them every
    container step fails, "task_prolog can not be executed"). The settings file may be absent (``nofail``)."""
    options = "x-create=file,bind,ro,nosuid,nodev,private"
    return (
        "# gpucluster: the node's TaskProlog runs inside the container (docs/containers.md)\n"
        f"{TASK_PROLOG} {TASK_PROLOG} none {options} 0 -1\n"
        f"{NCCL_ENV} {NCCL_ENV} none {options},nofail,silent 0 -1\n"
    )


def job_wrapper(root: str, budget_mib: int) -> str:
    return f"#!/bin/sh\n# gpucluster: the container prolog and epilog\nexec /bin/bash {JOB_PROGRAM} {shlex.quote(root)} {budget_mib}\n"


def mount_check_wrapper() -> str:
    return f'#!/bin/sh\n# gpucluster: the container mount check\nexec /bin/bash {MOUNT_CHECK_PROGRAM} "$@"\n'


def node_files(root: str, budget_mib: int) -> dict[str, tuple[str, int]]:
    """``path: (text, mode)`` of every file a compute node with containers writes."""
    return {
        ENROOT_CONF: (enroot_conf(root), 0o644),
        PYXIS_CONF: (pyxis_conf(root), 0o644),
        MOUNT_CHECK_HOOK: (mount_check_wrapper(), 0o755),
        ENROOT_MOUNTS: (enroot_mounts(), 0o644),
        CONTAINER_JOB: (job_wrapper(root, budget_mib), 0o755),
    }
