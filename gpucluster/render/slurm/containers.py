"""What a Slurm node runs and reads for containers in jobs (``srun --container-image``): enroot's configuration, the
pyxis plugstack drop-in, the enroot hooks multi-node jobs need, the mount check, and the per-job prolog and epilog
that make each user's enroot directories and remove a job's containers (docs/containers.md).

The files' text is the node package's contract (:mod:`gpucluster_agents.contract.containers`): a GPU node writes them
at its first boot from two values (:func:`setup_values`), because its user data has no room for them. The image build
(``render/slurm/image.py``) installs pyxis at :data:`PYXIS_SO` and enroot with prefix ``/usr`` and sysconfdir ``/etc``
(so enroot reads :data:`ENROOT_CONF` and ships its optional hooks in :data:`ENROOT_EXTRA_HOOKS`).

``plugstack.conf`` is an ``include`` of :data:`PLUGSTACK_DIR`'s ``*.conf`` on every host: slurmctld, a login node
and a node without pyxis find no file there and start as before; a node with pyxis has its ``required`` drop-in. A
configless slurmd gets plugstack.conf from slurmctld and resolves the glob against its own directory. Not an
``optional`` line: a node whose pyxis failed to load would then run ``--container-image`` jobs on the host, outside
any container, where ``required`` refuses them (docs/containers.md, "Security").
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from gpucluster.render.core import WriteFile
from gpucluster.render.slurm.health import PROLOG_DIR
from gpucluster.render.slurm.names import AGENT_LIB, AGENT_PYTHON, SlurmContext
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup, SlurmGroup
from gpucluster_agents.contract.containers import (
    CONTAINER_JOB,
    ENROOT_CONF,
    ENROOT_EXTRA_HOOKS,
    ENROOT_HOOKS,
    ENROOT_MOUNTS,
    JOB_PROGRAM,
    MOUNT_CHECK_HOOK,
    MOUNT_CHECK_PROGRAM,
    PYXIS_CONF,
    PYXIS_SO,
    TRAINING_HOOKS,
    enroot_conf,
    node_files,
    pyxis_conf,
)

__all__ = [
    "CONTAINER_JOB",
    "ENROOT_CONF",
    "ENROOT_EXTRA_HOOKS",
    "ENROOT_HOOKS",
    "ENROOT_MOUNTS",
    "JOB_PROGRAM",
    "MOUNT_CHECK_HOOK",
    "MOUNT_CHECK_PROGRAM",
    "PYXIS_CONF",
    "PYXIS_SO",
    "TRAINING_HOOKS",
    "enroot_conf",
    "pyxis_conf",
]

PLUGSTACK_CONF = "/etc/slurm/plugstack.conf"
PLUGSTACK_DIR = "/etc/slurm/plugstack.conf.d"
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
    """The group's layout, or None when it runs no containers (:attr:`SlurmGroup.containers`, decided at
    resolution)."""
    if not (isinstance(group, SlurmGroup) and group.containers):
        return None
    spec = ctx.slurm.containers
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
    return any(isinstance(g, SlurmGroup) and g.containers for g in ctx.node_groups)


def plugstack_conf() -> str:
    """``/etc/slurm/plugstack.conf``: the head node's, served configless to every slurmd."""
    return (
        "# gpucluster: SPANK plugins are each node's own drop-ins (pyxis on the nodes that have it). An include of a\n"
        "# glob that matches nothing is no error, so slurmctld and nodes without pyxis start as before.\n"
        f"include {PLUGSTACK_DIR}/*.conf\n"
    )


def container_files(layout: ContainerLayout) -> tuple[WriteFile, ...]:
    """A compute node's container files (the contract's :func:`node_files`). The node writes them itself at its first
    boot (:func:`setup_values`); the tests and goldens read them from here."""
    return tuple(
        WriteFile(path, text, f"{mode:04o}") for path, (text, mode) in node_files(layout.root, layout.cache_budget_mib).items()
    )


def setup_values(layout: ContainerLayout | None) -> dict[str, str | None]:
    """The node setup's command that writes the container files and links enroot's PMI and PyTorch hooks
    (``gpucluster_agents.boot.containers``), before slurmd starts; None on a group without containers."""
    command = None
    if layout is not None:
        command = f"(cd {AGENT_LIB} && {AGENT_PYTHON}.boot.containers {shlex.quote(layout.root)} {layout.cache_budget_mib})"
    return {"containers_setup": command}


def node_container_files(ctx: SlurmContext, group: ResolvedNodeGroup) -> tuple[WriteFile, ...]:
    """What :func:`~gpucluster.render.slurm.compute.node_slurm_part` adds to the user data: on a cluster with containers,
    a no-op container prolog on the nodes of a group without them (slurm.conf names the same Epilog for every node);
    a group with containers writes its files at boot (:func:`setup_values`)."""
    if not any_containers(ctx) or layout_of(ctx, group) is not None:
        return ()
    return (WriteFile(CONTAINER_JOB, "#!/bin/sh\nexit 0\n", "0755"),)


def container_conf_lines(ctx: SlurmContext, prolog_named: bool) -> list[str]:
    """slurm.conf's container lines: the epilog, and the prolog glob unless the health lines name it
    (``prolog_named``). Prolog at allocation (``Alloc``): a batch step's containers need the directories too."""
    if not any_containers(ctx):
        return []
    lines = [f"Epilog={CONTAINER_JOB}"]
    if not prolog_named:
        lines += [f"Prolog={PROLOG_DIR}/*", "PrologFlags=Alloc"]
    return lines
