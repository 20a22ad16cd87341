"""Containers in Slurm jobs (``slurm.containers``): pyxis and enroot on the GPU nodes and login nodes, so a
researcher runs ``srun --container-image=…`` (docs/containers.md)."""

from __future__ import annotations

from pydantic import Field

from gpucluster.config.base import SpecModel


class ContainersSpec(SpecModel):
    """Containers in Slurm jobs: pyxis (``srun``/``sbatch --container-image``) and enroot, built against the
    cluster's Slurm, on every GPU node group and on the login nodes."""

    enabled: bool = True
    """pyxis and enroot on every GPU node group (turn one group off with ``slurm.nodeGroups[].containers: false``)
    and on the login nodes. Default true."""

    registries: tuple[str, ...] = ()
    """Private ECR repositories the nodes pull from with their own role, as
    ``<account>.dkr.ecr.<region>.amazonaws.com/<repository>`` (a trailing ``/*`` for every repository under a
    prefix); the node role may pull exactly these, and every user of a node gets a short-lived pull token for them
    (docs/containers.md, "Private registries"). Only ECR references: other registries (NGC, Docker Hub) are reached
    with each user's own credentials in their enroot config, never with the node's role. Default: none (the role
    pulls from no repository)."""

    cache_budget_gib: int | None = Field(default=None, ge=1)
    """The most enroot's layer cache may hold on a node's NVMe scratch before its least recently used layers are
    removed, so a cache never fills the scratch a job needs; at most the smallest NVMe scratch of the groups that run
    containers. Where enroot keeps its data is not a setting: the NVMe scratch, or a tmpfs on a node without one
    (never a network or ``noexec`` file system). Default: a tenth of the node's NVMe scratch."""


def containers_wanted(spec: ContainersSpec, group_setting: bool | None, nvidia_gpus: bool) -> bool:
    """Whether a Slurm node group runs containers: the group's own ``containers`` when set, else GPU groups when the
    cluster's ``slurm.containers.enabled``."""
    if group_setting is not None:
        return group_setting and spec.enabled
    return spec.enabled and nvidia_gpus
