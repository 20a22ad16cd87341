"""Validators of the ``gpucluster:slurm`` section (pure: spec and catalog in, findings out), and its
resolution.

Each check returns nothing when the cluster has no Slurm section. They judge the parsed, not yet
resolved spec, so node groups are matched to Slurm with :func:`effective_scheduler`.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpucluster.config.checks.sections import SectionCheck, section_findings
from gpucluster.config.checks.slurm.containers import check_containers
from gpucluster.config.checks.slurm.health import check_health
from gpucluster.config.checks.slurm.identity import check_identity
from gpucluster.config.checks.slurm.login import check_home, check_login, check_people_hybrid
from gpucluster.config.checks.slurm.teams import check_settings, check_teams
from gpucluster.config.cluster import ClusterSpec, known_region
from gpucluster.config.effective import effective_desired, head_zone, partition_of, slurm_groups
from gpucluster.config.errors import Finding, error, group_path, warning
from gpucluster.config.slurm import TOO_OLD_RELEASES, UBUNTU_RELEASE, SlurmSpec, image_release
from gpucluster.facts.catalog import Catalog
from gpucluster.facts.regions import zone_in_region

SLURM = "gpucluster:slurm"
# GPU instances need minutes to launch, boot, install slurmd and mount file systems.
MIN_GPU_RESUME_TIMEOUT = 600


def slurm_path(field: str = "") -> str:
    return SLURM + (f".{field}" if field else "")


SlurmCheck = SectionCheck[SlurmSpec]


def check_groups(slurm: SlurmSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    groups = slurm_groups(spec, catalog)
    names = {g.name: i for i, g, _ in groups}
    if not groups:
        yield error(
            slurm_path(),
            "the Slurm section has no node group to run: no node group has scheduler slurm",
            "set scheduler: slurm on the node groups Slurm should run (it is the default only when Slurm is the "
            "cluster's one scheduler)",
            None,
            "no-slurm-groups",
        )
    all_names = [g.name for g in spec.node_groups]
    for j, entry in enumerate(slurm.node_groups):
        if entry.name not in all_names:
            yield error(
                slurm_path(f"nodeGroups[{j}].name"),
                f"no node group is named {entry.name!r}",
                f"use one of {', '.join(names) or 'the Slurm node groups'}",
                entry.name,
                "slurm-group-unknown",
            )
        elif entry.name not in names:
            yield error(
                slurm_path(f"nodeGroups[{j}].name"),
                f"node group {entry.name!r} is not run by Slurm",
                f"set scheduler: slurm on node group {entry.name!r}, or remove this entry",
                entry.name,
                "slurm-group-not-slurm",
            )
    seen: dict[str, str] = {}
    defaults: list[str] = []
    for _i, g, _facts in groups:
        entry = slurm.group_settings(g.name)
        j = next((k for k, e in enumerate(slurm.node_groups) if e.name == g.name), None)
        field = f"nodeGroups[{j}].partition" if j is not None else "nodeGroups"
        partition = partition_of(entry)
        if partition.lower() == "default":
            yield error(
                slurm_path(field),
                f"partition name {partition!r} is reserved: PartitionName=DEFAULT sets defaults for every partition",
                "choose another partition name",
                partition,
                "partition-reserved",
            )
        if partition in seen:
            yield error(
                slurm_path(field),
                f"node groups {seen[partition]!r} and {g.name!r} both use partition {partition!r}",
                "give each Slurm node group a partition of its own",
                partition,
                "partition-twice",
            )
        seen.setdefault(partition, g.name)
        if entry.default:
            defaults.append(g.name)
    if len(defaults) > 1:
        yield error(
            slurm_path("nodeGroups"),
            f"{len(defaults)} partitions are marked default ({', '.join(defaults)}); Slurm has one default partition",
            "set default: true on one node group only",
            defaults,
            "default-partition-twice",
        )


def check_sizes(slurm: SlurmSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    for i, g, _facts in slurm_groups(spec, catalog):
        mode = slurm.group_settings(g.name).mode
        if g.max_size == 0:
            yield error(
                group_path(i, "maxSize"),
                f"Slurm node group {g.name!r} has maxSize 0: its partition would have no nodes",
                "set maxSize to the most nodes the partition may run",
                0,
                "slurm-group-empty",
            )
        if mode == "dynamic" and (g.min_size or effective_desired(g)):
            field = "minSize" if g.min_size else "desiredSize"
            value = g.min_size or effective_desired(g)
            yield error(
                group_path(i, field),
                f"{g.name!r} is a dynamic Slurm group: its nodes are launched when jobs need them, so {field} {value} "
                "would never be used",
                f"set {field}: 0, or make the group static (gpucluster:slurm.nodeGroups: [{{name: {g.name}, mode: static}}]) "
                "to keep nodes running",
                value,
                "dynamic-min-size",
            )


def check_images(slurm: SlurmSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    if spec.hybrid is not None and spec.hybrid.controller is not None:
        return  # the site's slurmctld, not the head node's 23.11, decides: checks.hybrid_slurm.check_versions
    for i, g, _facts in slurm_groups(spec, catalog):
        release = image_release(g.image_ssm_parameter)
        if release in TOO_OLD_RELEASES:
            yield error(
                group_path(i, "imageSsmParameter"),
                f"the image is Ubuntu {release}, whose slurm-wlm cannot talk to the head node's Slurm 23.11 "
                f"(Ubuntu {UBUNTU_RELEASE})",
                f"use the Ubuntu {UBUNTU_RELEASE} image (leave imageSsmParameter unset for the Deep Learning AMI)",
                g.image_ssm_parameter,
                "slurm-image-release",
            )
        elif g.image_id:
            yield warning(
                group_path(i, "imageId"),
                f"gpucluster cannot tell which Slurm the custom image {g.image_id} installs; nodes run "
                f"slurmd from their Ubuntu archive and must be Ubuntu {UBUNTU_RELEASE} (Slurm 23.11)",
                f"use an Ubuntu {UBUNTU_RELEASE} based image",
                g.image_id,
                "slurm-custom-image",
            )


def check_tags(slurm: SlurmSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """Slurm nodes read their node name from instance tags in instance metadata; EC2 refuses to expose
    tags whose keys contain '/' (and then fails the launch)."""
    groups = slurm_groups(spec, catalog)
    if not groups:
        return
    for key in spec.tags:
        if "/" in key:
            yield error(
                "gpucluster:tags",
                f"tag key {key!r} contains '/': Slurm nodes read their tags from instance metadata, which does not "
                "allow such keys",
                "use a key without '/' (letters, digits, spaces and + - = . , _ : @)",
                key,
                "slurm-tag-slash",
            )
    for i, g, _facts in groups:
        for key in g.tags:
            if "/" in key:
                yield error(
                    group_path(i, "tags"),
                    f"tag key {key!r} contains '/': Slurm nodes read their tags from instance metadata, which does not "
                    "allow such keys",
                    "use a key without '/' (letters, digits, spaces and + - = . , _ : @)",
                    key,
                    "slurm-tag-slash",
                )


def check_head_node(slurm: SlurmSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:

    head = slurm.head_node
    facts = catalog.get(head.instance_type)
    if facts is None:
        close = catalog.suggest(head.instance_type)
        yield error(
            slurm_path("headNode.instanceType"),
            f"instance type {head.instance_type!r} is not in the instance catalog",
            (f"did you mean {', '.join(close)}? " if close else "")
            + "CPU types: "
            + ", ".join(t for t in catalog if not catalog[t].accelerator_count),
            head.instance_type,
            "unknown-instance-type",
        )
    elif facts.accelerator_count:
        yield warning(
            slurm_path("headNode.instanceType"),
            f"the head node runs slurmctld and the agent only, but {head.instance_type} has {facts.accelerator_count} "
            f"{facts.accelerator_model} accelerators",
            "use a CPU type such as m7i.xlarge",
            head.instance_type,
            "head-node-accelerated",
        )
    zone = head.availability_zone
    if zone is not None and known_region(spec.region) and not zone_in_region(zone, spec.region):
        yield error(
            slurm_path("headNode.availabilityZone"),
            f"zone {zone!r} is not in region {spec.region}",
            f"use a zone of {spec.region}, e.g. {spec.region}a",
            zone,
            "zone-region",
        )
    net = spec.network
    if head.subnet_id and net.create_vpc:
        yield error(
            slurm_path("headNode.subnetId"),
            "subnetId is only used with your own VPC (network.vpcId); gpucluster creates the subnets of a new VPC",
            "remove headNode.subnetId, or set network.vpcId and network.subnets",
            head.subnet_id,
            "subnets-without-vpc",
        )
    elif head.subnet_id:
        subnet_zone = net.subnet_zone(head.subnet_id)
        if subnet_zone is None:
            yield error(
                slurm_path("headNode.subnetId"),
                f"subnet {head.subnet_id} is not listed in network.subnets",
                "add it to network.subnets with its availabilityZone",
                head.subnet_id,
                "subnet-unknown",
            )
        elif zone is not None and subnet_zone != zone:
            yield error(
                slurm_path("headNode.subnetId"),
                f"subnet {head.subnet_id} is in {subnet_zone}, not in headNode.availabilityZone {zone}",
                f"use a subnet in {zone}, or drop availabilityZone",
                head.subnet_id,
                "subnet-outside-zone",
            )
    elif not net.create_vpc:
        wanted = head_zone(spec, catalog)
        if wanted is not None and not any(s.availability_zone == wanted for s in net.subnets):
            yield error(
                slurm_path("headNode.availabilityZone"),
                f"no subnet of network.subnets is in {wanted}, the head node's zone",
                "add a private subnet in that zone to network.subnets, or set headNode.subnetId",
                wanted,
                "zone-without-subnet",
            )
    if head.image_id:
        yield warning(
            slurm_path("headNode.imageId"),
            f"gpucluster cannot tell which Slurm the custom image {head.image_id} installs; the head node must be "
            f"Ubuntu {UBUNTU_RELEASE} (Slurm 23.11) like the compute nodes",
            f"leave imageId unset for Canonical's Ubuntu {UBUNTU_RELEASE} image",
            head.image_id,
            "slurm-custom-image",
        )


def check_network(slurm: SlurmSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    if spec.network.create_vpc and not spec.network.enable_nat_gateway:
        yield error(
            "gpucluster:network.enableNatGateway",
            "the Slurm head node and compute nodes install slurm-wlm and munge from the Ubuntu archive at first boot, "
            "which a VPC without NAT cannot reach",
            "keep enableNatGateway: true (the default) for a Slurm cluster",
            False,
            "slurm-needs-internet",
        )


def check_power_saving(slurm: SlurmSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    timeout = slurm.power_saving.resume_timeout_seconds
    gpu = any(facts is not None and facts.accelerator_count for _, _, facts in slurm_groups(spec, catalog))
    if gpu and timeout < MIN_GPU_RESUME_TIMEOUT:
        yield warning(
            slurm_path("powerSaving.resumeTimeoutSeconds"),
            f"ResumeTimeout {timeout} s: accelerated instances take minutes to launch, boot, install slurmd and mount "
            "file systems, and Slurm fails nodes that take longer",
            f"allow at least {MIN_GPU_RESUME_TIMEOUT} s (the default is 1800)",
            timeout,
            "resume-timeout-short",
        )


SLURM_CHECKS: tuple[SlurmCheck, ...] = (
    check_groups,
    check_sizes,
    check_images,
    check_tags,
    check_head_node,
    check_network,
    check_power_saving,
    check_health,
    check_people_hybrid,
    check_identity,
    check_login,
    check_home,
    check_teams,
    check_settings,
    check_containers,
)


def check_slurm(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """Every slurm check, when the cluster has a ``slurm`` section (a cluster check of :mod:`.cluster`)."""
    return section_findings(spec.slurm, spec, catalog, SLURM_CHECKS)
