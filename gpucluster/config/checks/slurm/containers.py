"""Checks of ``gpucluster:slurm.containers`` (pure: spec and catalog in, findings out), each finding with its code.

Pyxis is compiled on the node's image against the ``spank.h`` of the Slurm the node runs (``libslurm-dev`` of the
image's slurm-wlm build); a release gpucluster cannot get those headers for has no pyxis build. Registries are ECR
repository references only: the node role's policy names exactly those repositories, and every other registry is
reached with each user's own credentials (docs/containers.md, "Private registries"). Where enroot keeps its data is
not a setting: the node's NVMe scratch, or a tmpfs on a node without one, so no config can point it at a network or
``noexec`` file system.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.effective import slurm_groups
from gpucluster.config.errors import Finding, error, group_path, info
from gpucluster.config.slurm import SLURM_VERSION, SlurmSpec
from gpucluster.config.slurm.containers import containers_wanted
from gpucluster.config.slurm.health import nvidia_gpus
from gpucluster.facts.catalog import Catalog
from gpucluster.facts.containers import TASK_PROLOG_LAUNCHER, pyxis_builds, task_prolog_in_containers

SLURM = "gpucluster:slurm"
GIB_IN_GB = 1.073741824

ECR_REPOSITORY = re.compile(
    r"^(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z]{2}(-[a-z]+)+-[0-9])\.amazonaws\.com/"
    r"(?P<name>[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)(?P<prefix>/\*)?$"
)
"""``<account>.dkr.ecr.<region>.amazonaws.com/<repository>``, optionally ``/*`` (every repository under that name as
a prefix). The repository name follows ECR's grammar: lower-case components joined by ``/``, each of letters and
digits separated by one ``.``, ``_`` or ``-``."""


def _cloud_slurm(spec: ClusterSpec, group: str) -> tuple[str, str]:
    """The Slurm release ``group``'s nodes run and the field that decides it."""
    hybrid = spec.hybrid
    if hybrid is not None and hybrid.controller is not None:
        if not hybrid.burst_node_groups or group in hybrid.burst_node_groups:
            from gpucluster.facts.slurm_releases import UBUNTU_SLURM, cloud_ubuntu_for

            controller = hybrid.controller
            if controller.cloud_slurm_version is not None:  # the site's image: its headers are not the archive's
                return f"{controller.cloud_slurm_version} (the image's own)", "gpucluster:hybrid.controller.cloudSlurmVersion"
            ubuntu = cloud_ubuntu_for(controller.slurm_version)
            release = UBUNTU_SLURM.get(ubuntu or "", controller.slurm_version)
            return release, "gpucluster:hybrid.controller.slurmVersion"
    return SLURM_VERSION, f"{SLURM}.containers.enabled"


def check_containers(slurm: SlurmSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """Registries, the Slurm release of each group that runs containers, the cache budget against its NVMe."""
    containers = slurm.containers
    for k, registry in enumerate(containers.registries):
        if ECR_REPOSITORY.match(registry) is None:
            yield error(
                f"{SLURM}.containers.registries[{k}]",
                f"{registry!r} is not an ECR repository reference: the nodes' role may pull only from ECR repositories it names",
                "write <account>.dkr.ecr.<region>.amazonaws.com/<repository> (a trailing /* for a prefix); reach "
                "other registries (NGC, Docker Hub) with each user's own enroot credentials (docs/containers.md)",
                registry,
                "containers-registry",
            )
    budget = containers.cache_budget_gib
    for i, g, facts in slurm_groups(spec, catalog):
        entry = slurm.group_settings(g.name)
        if facts is None or not containers_wanted(containers, entry.containers, nvidia_gpus(facts)):
            continue
        release, field = _cloud_slurm(spec, g.name)
        if not pyxis_builds(release):
            yield error(
                field,
                f"node group {g.name!r} runs containers on Slurm {release}, for which gpucluster has no pyxis build "
                "(pyxis is compiled against the libslurm-dev of the image's own Ubuntu slurm-wlm)",
                "run the Ubuntu image's slurm-wlm (leave the group's imageId and hybrid.controller.cloudSlurmVersion "
                f"unset), or set containers: false on node group {g.name!r} "
                f"(gpucluster:slurm.nodeGroups) or {SLURM}.containers.enabled: false",
                release,
                "containers-slurm-release",
            )
        elif not task_prolog_in_containers(release):
            yield error(
                field,
                f"node group {g.name!r} runs containers on Slurm {release}, whose slurmstepd cannot run the node's "
                "TaskProlog inside a container: every container step would fail",
                f"run a Slurm release older than {TASK_PROLOG_LAUNCHER} on the group, or set containers: false on node "
                f"group {g.name!r} (gpucluster:slurm.nodeGroups) or {SLURM}.containers.enabled: false",
                release,
                "containers-task-prolog",
            )
        scratch_gb = facts.nvme_total_gb
        if not scratch_gb:
            yield info(
                group_path(i, "instanceType"),
                f"{g.instance_type} has no NVMe scratch: enroot's images and layer cache on node group {g.name!r} "
                "live in a tmpfs, in the node's memory",
                "use an instance type with local NVMe for large images, or set containers: false on the group",
                g.instance_type,
                "containers-tmpfs",
            )
        elif budget is not None and budget * GIB_IN_GB > scratch_gb:
            yield error(
                f"{SLURM}.containers.cacheBudgetGib",
                f"a layer cache of {budget} GiB is more than the {scratch_gb} GB NVMe scratch of {g.instance_type} "
                f"(node group {g.name!r}): the cache would fill the scratch jobs need",
                f"use at most {int(scratch_gb / GIB_IN_GB) // 2} GiB (half the scratch), or leave it unset for a tenth",
                budget,
                "containers-cache-budget",
            )
