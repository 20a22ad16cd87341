"""What a Slurm node runs and reads for containers in jobs (``srun --container-image``): enroot's configuration, the
pyxis plugstack drop-in, the enroot hooks multi-node jobs need, the mount check, and the per-job prolog and epilog
that make each user's enroot directories and remove a job's containers (docs/containers.md).

The image build (``render/slurm/image.py``) installs pyxis at :data:`PYXIS_SO` and enroot with prefix ``/usr`` and
sysconfdir ``/etc`` (so enroot reads :data:`ENROOT_CONF` and ships its optional hooks in :data:`ENROOT_EXTRA_HOOKS`).

``plugstack.conf`` is an ``include`` of :data:`PLUGSTACK_DIR`'s ``*.conf`` on every host: slurmctld, a login node
and a node without pyxis find no file there and start as before; a node with pyxis has its ``required`` drop-in. A
configless slurmd gets plugstack.conf from slurmctld and resolves the glob against its own directory. Not an
``optional`` line: a node whose pyxis failed to load would then run ``--container-image`` jobs on the host, outside
any container, where ``required`` refuses them (docs/containers.md, "Security").
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from gpucluster.config.slurm.containers import containers_wanted
from gpucluster.config.slurm.health import nvidia_gpus
from gpucluster.render.core import WriteFile, render
from gpucluster.render.slurm.health import PROLOG_DIR
from gpucluster.render.slurm.names import AGENT_LIB, SlurmContext
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup, SlurmGroup

PYXIS_SO = "/usr/local/lib/slurm/spank_pyxis.so"
PLUGSTACK_CONF = "/etc/slurm/plugstack.conf"
PLUGSTACK_DIR = "/etc/slurm/plugstack.conf.d"
PYXIS_CONF = f"{PLUGSTACK_DIR}/pyxis.conf"
ENROOT_CONF = "/etc/enroot/enroot.conf"
ENROOT_HOOKS = "/etc/enroot/hooks.d"
ENROOT_EXTRA_HOOKS = "/usr/share/enroot/hooks.d"
"""Where ``make install`` (prefix ``/usr``) puts enroot's optional hooks (``conf/hooks/extra``), none enabled."""
TRAINING_HOOKS = ("50-slurm-pmi.sh", "50-slurm-pytorch.sh")
"""enroot's hooks a multi-node job needs: PMIx/PMI2 into the container, and MASTER_ADDR/RANK/WORLD_SIZE from Slurm."""
MOUNT_CHECK_HOOK = f"{ENROOT_HOOKS}/05-gpucluster-mounts.sh"
CONTAINER_JOB = f"{PROLOG_DIR}/20-containers"
"""The container prolog, and the Epilog too: one program that reads ``SLURM_SCRIPT_CONTEXT`` (``prolog_slurmd`` or
``epilog_slurmd``, Slurm 22.05 and later)."""
JOB_PROGRAM = f"{AGENT_LIB}/gpucluster_agents/boot/containers-job.sh"
MOUNT_CHECK_PROGRAM = f"{AGENT_LIB}/gpucluster_agents/boot/enroot-mount-check.sh"
"""The two programs are the node package's (installed before slurmd starts): user data has no room for them."""
TMPFS_ROOT = "/run/enroot"
TMPFS_BUDGET_MIB = 2048
"""The layer cache's budget on a node without NVMe: /run is RAM the jobs need (systemd sizes it at a fifth of
memory), so a node without scratch keeps only a couple of layers and reads big images as squashfs files from the
shared file system (``--container-image=/fsx/...sqsh``) instead of pulling them."""


@dataclass(frozen=True)
class ContainerLayout:
    """Where a node's enroot bytes go: ``root`` holds ``runtime``, ``data``, ``cache``, ``tmp`` (root-owned, 0755)
    and in each a ``user-<uid>`` directory per user (0700), and ``pyxis`` (pyxis's own squashfs imports)."""

    root: str
    tmpfs: bool
    cache_budget_mib: int
    """The most the layer caches of all users may hold before the epilog removes the least recently used layers."""


def layout_of(ctx: SlurmContext, group: ResolvedNodeGroup) -> ContainerLayout | None:
    """The group's layout, or None when it runs no containers (``containers_wanted``)."""
    setting = group.entry.containers if isinstance(group, SlurmGroup) else None
    spec = ctx.slurm.containers
    if not containers_wanted(spec, setting, nvidia_gpus(group.facts)):
        return None
    if group.nvme_scratch is None:
        return ContainerLayout(TMPFS_ROOT, True, TMPFS_BUDGET_MIB)
    # a tenth of the scratch by default: the rest is the jobs' (their /tmp, checkpoints, datasets)
    budget = spec.cache_budget_gib * 1024 if spec.cache_budget_gib else group.facts.nvme_total_gb * 1000**3 // 10 // 1024**2
    return ContainerLayout(f"{group.nvme_scratch.mount_point.rstrip('/')}/enroot", False, budget)


def slurmd_start_pre(layout: ContainerLayout) -> list[str]:
    """slurmd's drop-in lines that make the layout's root and pyxis's directory (root's, 0755) before slurmd starts:
    pyxis makes only the last directory of its ``runtime_path`` when slurmd loads it, and fails slurmd without its
    parent (measured: "couldn't mkdir ... No such file or directory"); /run is empty after a reboot, and the scratch
    is made afresh on a new instance."""
    root = shlex.quote(layout.root)
    return ["[Service]", f"ExecStartPre=/usr/bin/install -d -m 0755 -o root -g root {root} {root}/pyxis"]


def any_containers(ctx: SlurmContext) -> bool:
    """Whether some Slurm group of the cluster runs containers (slurm.conf then names the container epilog)."""
    return any(layout_of(ctx, g) is not None for g in ctx.node_groups)


def plugstack_conf() -> str:
    """``/etc/slurm/plugstack.conf``: the head node's, served configless to every slurmd."""
    return (
        "# gpucluster: SPANK plugins are each node's own drop-ins (pyxis on the nodes that have it). An include of a\n"
        "# glob that matches nothing is no error, so slurmctld and nodes without pyxis start as before.\n"
        f"include {PLUGSTACK_DIR}/*.conf\n"
    )


def pyxis_conf(layout: ContainerLayout | None) -> str:
    """The pyxis drop-in: ``required`` (a node whose pyxis does not load fails the job's step, it does not run the
    job's command outside its container). ``layout``: a compute node's (pyxis's imports on its scratch), or None on a
    login node (srun there only reads pyxis's options)."""
    args = ["container_scope=job", "sbatch_support=1", "execute_entrypoint=0"]
    if layout is not None:
        args.insert(0, f"runtime_path={layout.root}/pyxis")
    return f"required {PYXIS_SO} {' '.join(args)}\n"


def enroot_conf(layout: ContainerLayout) -> str:
    return render("slurm/enroot.conf.j2", root=layout.root, tmpfs=layout.tmpfs)


def job_script(layout: ContainerLayout | None) -> str:
    """The container prolog and epilog of a node (the node package's ``boot/containers-job.sh``); on a node without
    containers, an ``exit 0`` (slurm.conf names the same programs for every node)."""
    if layout is None:
        return "#!/bin/sh\n# gpucluster: this node group runs no containers.\nexit 0\n"
    args = f"{shlex.quote(layout.root)} {layout.cache_budget_mib}"
    return (
        f"#!/bin/sh\n# gpucluster: the container prolog and epilog (docs/containers.md).\nexec /bin/bash {JOB_PROGRAM} {args}\n"
    )


def container_files(layout: ContainerLayout) -> tuple[WriteFile, ...]:
    """A compute node's container files (the prolog and epilog are :func:`job_files`; the node's setup links
    :data:`TRAINING_HOOKS` from :data:`ENROOT_EXTRA_HOOKS`, :func:`setup_values`)."""
    return (
        WriteFile(ENROOT_CONF, enroot_conf(layout)),
        WriteFile(PYXIS_CONF, pyxis_conf(layout)),
        WriteFile(MOUNT_CHECK_HOOK, f'#!/bin/sh\nexec /bin/bash {MOUNT_CHECK_PROGRAM} "$@"\n', "0755"),
    )


def setup_values(layout: ContainerLayout | None) -> dict[str, str | None]:
    """The node setup's values: which of enroot's optional hooks it enables (symbolic links, so an enroot upgrade
    updates them)."""
    return {
        "enroot_hooks": " ".join(TRAINING_HOOKS) if layout else None,
        "extra_hooks": ENROOT_EXTRA_HOOKS,
        "hooks_dir": ENROOT_HOOKS,
    }


def job_files(layout: ContainerLayout | None) -> tuple[WriteFile, ...]:
    return (WriteFile(CONTAINER_JOB, job_script(layout), "0755"),)


def node_container_files(ctx: SlurmContext, group: ResolvedNodeGroup) -> tuple[WriteFile, ...]:
    """What :func:`~gpucluster.render.slurm.compute.node_slurm_part` adds: nothing on a cluster without containers;
    the prolog and epilog on every node of one that has them; the rest on the group's nodes that run them."""
    if not any_containers(ctx):
        return ()
    layout = layout_of(ctx, group)
    return (*(container_files(layout) if layout else ()), *job_files(layout))


def container_conf_lines(ctx: SlurmContext, prolog_named: bool) -> list[str]:
    """slurm.conf's container lines: the epilog, and the prolog glob unless the health lines name it
    (``prolog_named``). Prolog at allocation (``Alloc``): a batch step's containers need the directories too."""
    if not any_containers(ctx):
        return []
    lines = [f"Epilog={CONTAINER_JOB}"]
    if not prolog_named:
        lines += [f"Prolog={PROLOG_DIR}/*", "PrologFlags=Alloc"]
    return lines
