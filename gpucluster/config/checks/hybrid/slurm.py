"""Validators of a hybrid site's Slurm side (pure): the site's controller drives the burst node groups, so the
cloud partitions must be Slurm node groups of this cluster, named apart from the site's partitions, and their
slurmd must be a release the site's slurmctld accepts (:mod:`gpucluster.facts.slurm_releases`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.effective import burst_group_names, effective_scheduler, partition_of
from gpucluster.config.errors import Finding, error, warning
from gpucluster.config.hybrid import ControllerSpec, HybridSpec
from gpucluster.config.slurm import image_release
from gpucluster.facts.catalog import Catalog
from gpucluster.facts.slurm_releases import MAJORS, UBUNTU_SLURM, WINDOW, cloud_ubuntu_for, compatible

HYBRID = "gpucluster:hybrid"


def hybrid_path(field: str = "") -> str:
    return HYBRID + (f".{field}" if field else "")


def accepted(controller: str) -> list[str]:
    """The slurmd releases a slurmctld of release ``controller`` accepts, oldest first."""
    return [m for m in MAJORS if compatible(controller, m)]


def burst_groups(spec: ClusterSpec) -> list[tuple[int, str]]:
    """``(index in nodeGroups, name)`` of the node groups the site bursts into, config order."""
    index = {g.name: i for i, g in enumerate(spec.node_groups)}
    return sorted((index[n], n) for n in burst_group_names(spec))


def check_site_slurm(hybrid: HybridSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """A controller needs Slurm node groups to drive; burstNodeGroups names only those."""
    if hybrid.controller is None:
        if hybrid.burst_node_groups:
            yield error(
                hybrid_path("burstNodeGroups"),
                "burstNodeGroups lists node groups for a site controller, but the hybrid section has no controller",
                "add hybrid.controller (the site's slurmctld), or remove burstNodeGroups",
                list(hybrid.burst_node_groups),
                "hybrid-burst-without-controller",
            )
        return
    if spec.slurm is None:
        yield error(
            hybrid_path("controller"),
            "the site's controller bursts into this cluster's Slurm node groups, but the cluster has no gpucluster:slurm section",
            "add gpucluster:slurm (its nodeGroups name the cloud partitions) and set scheduler: slurm on the node groups "
            "to burst into",
            None,
            "hybrid-needs-slurm",
        )
        return
    names = [g.name for g in spec.node_groups]
    for j, name in enumerate(hybrid.burst_node_groups):
        if name not in names:
            yield error(
                hybrid_path(f"burstNodeGroups[{j}]"),
                f"no node group is named {name!r}",
                f"use one of {', '.join(names)}",
                name,
                "hybrid-burst-unknown",
            )
        elif effective_scheduler(spec.node_group(name), spec) != "slurm":
            yield error(
                hybrid_path(f"burstNodeGroups[{j}]"),
                f"node group {name!r} is not run by Slurm, so the site's controller cannot launch it",
                f"set scheduler: slurm on node group {name!r}, or remove it from burstNodeGroups",
                name,
                "hybrid-burst-not-slurm",
            )
    if hybrid.burst_node_groups:
        # No head node in a site's cluster: a Slurm group the site does not drive would have no controller.
        for i, g in enumerate(spec.node_groups):
            if effective_scheduler(g, spec) == "slurm" and g.name not in hybrid.burst_node_groups:
                yield error(
                    f"gpucluster:nodeGroups[{i}]",
                    f"node group {g.name!r} is run by Slurm but not in hybrid.burstNodeGroups: with a site controller "
                    "there is no head node, so nothing would drive it",
                    f"add {g.name!r} to hybrid.burstNodeGroups, or set another scheduler on it",
                    g.name,
                    "hybrid-slurm-group-not-burst",
                )
    if not burst_groups(spec) and not hybrid.burst_node_groups:
        yield error(
            hybrid_path("controller"),
            "the site's controller has no node group to burst into: no node group has scheduler slurm",
            "set scheduler: slurm on the node groups the site should burst into",
            None,
            "hybrid-no-burst-groups",
        )


def check_partitions(hybrid: HybridSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """Cloud partitions hold cloud nodes only: a name the site already uses would merge the two sites' nodes."""
    controller, slurm = hybrid.controller, spec.slurm
    if controller is None or slurm is None:
        return
    site = {p.lower(): p for p in controller.partitions}
    for _i, name in burst_groups(spec):
        partition = partition_of(slurm.group_settings(name))
        if partition.lower() in site:
            j = next((k for k, e in enumerate(slurm.node_groups) if e.name == name), None)
            path = f"gpucluster:slurm.nodeGroups[{j}].partition" if j is not None else "gpucluster:slurm.nodeGroups"
            yield error(
                path,
                f"cloud partition {partition!r} of node group {name!r} is also a partition of site "
                f"{hybrid.site!r} (hybrid.controller.partitions): one partition would mix the sites' nodes, and jobs "
                "cannot span EFA and the site's fabric",
                f"name the cloud partition apart, e.g. partition: aws-{name}",
                partition,
                "hybrid-partition-clash",
            )


def _group_slurmd(spec: ClusterSpec, index: int, controller: ControllerSpec) -> tuple[str, str | None, str]:
    """``(field, slurmd release or None, where it comes from)`` for burst node group ``index``."""
    group = spec.node_groups[index]
    if group.image_id:
        return "imageId", controller.cloud_slurm_version, f"its own image {group.image_id}"
    release = image_release(group.image_ssm_parameter)
    if release is not None:
        return "imageSsmParameter", UBUNTU_SLURM.get(release), f"Ubuntu {release}"
    ubuntu = cloud_ubuntu_for(controller.slurm_version)
    return "", UBUNTU_SLURM[ubuntu] if ubuntu else None, f"Ubuntu {ubuntu}"


def check_versions(hybrid: HybridSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """The cloud nodes' slurmd is the controller's release or up to two older, never newer."""
    controller = hybrid.controller
    if controller is None or spec.slurm is None:
        return
    ctl = controller.slurm_version
    window = ", ".join(accepted(ctl))
    cloud = controller.cloud_slurm_version
    if cloud is not None and not compatible(ctl, cloud):
        newer = MAJORS.index(cloud) > MAJORS.index(ctl)
        yield error(
            hybrid_path("controller.cloudSlurmVersion"),
            f"slurmd {cloud} cannot register with the site's slurmctld {ctl}: "
            + ("slurmd may not be newer than slurmctld" if newer else f"it is more than {WINDOW} releases older"),
            f"use an image whose slurmd is one of {window} and set cloudSlurmVersion to it",
            cloud,
            "hybrid-slurm-window",
        )
    groups = burst_groups(spec)
    default_image = False
    for i, name in groups:
        field, slurmd, source = _group_slurmd(spec, i, controller)
        path = f"gpucluster:nodeGroups[{i}].{field}"
        if not field:
            default_image = True
        elif field == "imageId" and slurmd is None:
            yield error(
                path,
                f"node group {name!r} boots {source}: gpucluster cannot tell whether its slurmd is one the site's "
                f"slurmctld {ctl} accepts",
                f"set hybrid.controller.cloudSlurmVersion to the image's Slurm release (one of {window})",
                spec.node_groups[i].image_id,
                "hybrid-image-version-unknown",
            )
        elif field == "imageSsmParameter" and slurmd is None:
            known = ", ".join(f"Ubuntu {r}: {v}" for r, v in UBUNTU_SLURM.items())
            yield error(
                path,
                f"node group {name!r} boots {source}, whose slurm-wlm gpucluster does not know ({known})",
                f"leave imageSsmParameter unset (gpucluster picks the Ubuntu release for {ctl}), or bring an image "
                f"(imageId) with slurmd {window} and set hybrid.controller.cloudSlurmVersion",
                spec.node_groups[i].image_ssm_parameter,
                "hybrid-image-version-unknown",
            )
        elif field == "imageSsmParameter" and slurmd is not None and not compatible(ctl, slurmd):
            yield error(
                path,
                f"node group {name!r} boots {source}, whose slurmd {slurmd} the site's slurmctld {ctl} does not accept",
                f"leave imageSsmParameter unset (gpucluster picks the Ubuntu release for {ctl}), or use an image "
                f"whose slurmd is one of {window}",
                spec.node_groups[i].image_ssm_parameter,
                "hybrid-slurm-window",
            )
    if default_image and cloud_ubuntu_for(ctl) is None:
        ubuntu = ", ".join(f"Ubuntu {r}: {s}" for r, s in UBUNTU_SLURM.items())
        yield error(
            hybrid_path("controller.slurmVersion"),
            f"no cloud image gpucluster knows has a slurmd that slurmctld {ctl} accepts ({ubuntu}; it accepts {window})",
            f"build an image with slurmd {window}, set imageId on the burst node groups and "
            "hybrid.controller.cloudSlurmVersion to its release",
            ctl,
            "hybrid-no-cloud-image",
        )
    if cloud is not None and groups and not any(spec.node_groups[i].image_id for i, _ in groups):
        yield warning(
            hybrid_path("controller.cloudSlurmVersion"),
            f"cloudSlurmVersion {cloud} describes your own image, but no burst node group sets imageId: they boot "
            f"gpucluster's Ubuntu {cloud_ubuntu_for(ctl)} image",
            "set imageId on the burst node groups, or remove cloudSlurmVersion",
            cloud,
            "hybrid-cloud-version-unused",
        )


SiteCheck = Callable[[HybridSpec, ClusterSpec, Catalog], Iterable[Finding]]

SLURM_SITE_CHECKS: tuple[SiteCheck, ...] = (check_site_slurm, check_partitions, check_versions)
