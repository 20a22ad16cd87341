"""Validators of what Kubernetes runs on in ``gpucluster:kubernetes``: the node groups EKS runs (zones,
GPU groups, the system node group), MIG, teams and their quotas, Kueue and the example job — plus the
helpers every Kubernetes check shares (which groups are Kubernetes', their GPU flavors, config paths).

Each check returns nothing when the cluster has no Kubernetes section. They judge the parsed, not yet
resolved spec, so node groups are matched to Kubernetes with :func:`effective_scheduler`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpucluster.config.checks.sections import SectionCheck
from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.effective import effective_scheduler
from gpucluster.config.errors import Finding, error, warning
from gpucluster.config.kubernetes import (
    MIG_CAPABLE_GPUS,
    RESERVED_NAMESPACES,
    KubernetesSpec,
    flavor_name,
)
from gpucluster.facts.catalog import Catalog, InstanceFacts

K8S = "gpucluster:kubernetes"
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def k8s_path(field: str = "") -> str:
    return K8S + (f".{field}" if field else "")


def kubernetes_groups(spec: ClusterSpec, catalog: Catalog) -> list[tuple[int, NodeGroupSpec, InstanceFacts | None]]:
    """``(index, group, facts)`` of every node group EKS runs, in config order."""
    return [
        (i, g, catalog.get(g.instance_type))
        for i, g in enumerate(spec.node_groups)
        if effective_scheduler(g, spec) == "kubernetes"
    ]


def gpu_flavors(spec: ClusterSpec, catalog: Catalog) -> dict[str, int]:
    """``{flavor: GPUs at every Kubernetes GPU group's maxSize}``, in config order."""
    out: dict[str, int] = {}
    for _, g, facts in kubernetes_groups(spec, catalog):
        if facts is not None and facts.gpu_count:
            name = flavor_name(facts)
            out[name] = out.get(name, 0) + facts.gpu_count * g.max_size
    return out


KubernetesCheck = SectionCheck[KubernetesSpec]


def check_zones(k8s: KubernetesSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    net = spec.network
    zones = sorted({s.availability_zone for s in net.subnets}) if not net.create_vpc else list(spec.zones)
    if len(zones) < 2:
        field = "network.availabilityZones" if net.create_vpc else "network.subnets"
        yield error(
            f"gpucluster:{field}",
            f"an EKS cluster needs subnets in at least two Availability Zones; the network has {zones}",
            "add a second zone to network.availabilityZones (a subnet without nodes costs nothing)"
            if net.create_vpc
            else "list a private subnet of a second zone in network.subnets",
            zones,
            "eks-two-zones",
        )


def check_node_groups(k8s: KubernetesSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    groups = kubernetes_groups(spec, catalog)
    if not groups:
        yield warning(
            k8s_path(),
            "no node group runs on Kubernetes: the EKS cluster would have only its system nodes",
            "set scheduler: kubernetes on a node group (it is the default when Kubernetes is the only scheduler)",
            None,
            "kubernetes-no-groups",
        )
    for i, g, _facts in groups:
        if g.image_id or g.image_ssm_parameter:
            field = "imageId" if g.image_id else "imageSsmParameter"
            yield error(
                f"gpucluster:nodeGroups[{i}].{field}",
                "an EKS node group boots the EKS-optimized Amazon Linux 2023 AMI of its accelerator (AL2023 NVIDIA or "
                "Neuron), chosen by EKS; a custom AMI is not supported here",
                f"remove {field}, or set scheduler: none for a plain Auto Scaling group",
                g.image_id or g.image_ssm_parameter,
                "kubernetes-custom-ami",
            )
        if g.capacity.spot_max_price is not None:
            yield error(
                f"gpucluster:nodeGroups[{i}].capacity.spotMaxPrice",
                "EKS managed node groups buy Spot at the current price and cannot cap it",
                "remove spotMaxPrice",
                g.capacity.spot_max_price,
                "kubernetes-spot-price",
            )


def check_system_node_group(k8s: KubernetesSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    sys = k8s.system_node_group
    if sys.instance_type not in catalog:
        close = catalog.suggest(sys.instance_type)
        yield error(
            k8s_path("systemNodeGroup.instanceType"),
            f"instance type {sys.instance_type!r} is not in the instance catalog",
            (f"did you mean {', '.join(close)}? " if close else "") + "Add it with `gpucluster catalog refresh --add <type>`.",
            sys.instance_type,
            "unknown-instance-type",
        )
    desired = sys.effective_desired_size
    if sys.min_size > sys.max_size:
        yield error(
            k8s_path("systemNodeGroup.minSize"),
            f"minSize {sys.min_size} is greater than maxSize {sys.max_size}",
            "make minSize <= maxSize",
            sys.min_size,
            "sizes",
        )
    elif not sys.min_size <= desired <= sys.max_size:
        yield error(
            k8s_path("systemNodeGroup.desiredSize"),
            f"desiredSize {desired} is outside minSize {sys.min_size} .. maxSize {sys.max_size}",
            f"set desiredSize between {sys.min_size} and {sys.max_size}",
            desired,
            "sizes",
        )


def check_mig(k8s: KubernetesSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    strategy = k8s.gpu_operator.mig_strategy
    if strategy == "none":
        return
    models = {f.accelerator_model or "" for _, _, f in kubernetes_groups(spec, catalog) if f is not None and f.gpu_count}
    without = sorted(m for m in models if m not in MIG_CAPABLE_GPUS)
    if without:
        yield error(
            k8s_path("gpuOperator.migStrategy"),
            f"MIG strategy {strategy!r} needs Multi-Instance GPU, which {', '.join(without)} does not have",
            f"set migStrategy: none, or use GPUs with MIG ({', '.join(MIG_CAPABLE_GPUS[:5])}…)",
            strategy,
            "mig-unsupported",
        )


def check_teams(k8s: KubernetesSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    flavors = gpu_flavors(spec, catalog)
    owners: dict[str, str] = {}
    promised: dict[str, int] = {}
    for j, team in enumerate(k8s.teams):
        ns = team.effective_namespace
        path = k8s_path(f"teams[{j}].namespace")
        if ns in RESERVED_NAMESPACES:
            yield error(
                path,
                f"team {team.name!r} would use namespace {ns!r}, which Kubernetes or gpucluster owns",
                f"give the team its own namespace (namespace: {team.name}-jobs)",
                ns,
                "team-namespace-reserved",
            )
        elif ns in owners:
            yield error(
                path,
                f"teams {owners[ns]!r} and {team.name!r} both use namespace {ns!r}; a namespace holds one team's queue and RBAC",
                f"give team {team.name!r} another namespace",
                ns,
                "team-namespace-clash",
            )
        owners.setdefault(ns, team.name)
        for flavor, gpus in team.gpu_quota.items():
            promised[flavor] = promised.get(flavor, 0) + gpus
            if flavor not in flavors:
                known = ", ".join(flavors) or "none (no Kubernetes node group has GPUs)"
                yield error(
                    k8s_path(f"teams[{j}].gpuQuota"),
                    f"team {team.name!r} has a quota of {gpus} {flavor!r} GPUs, but no Kubernetes node group provides GPU flavor {flavor!r}",
                    f"use a flavor of the Kubernetes node groups: {known}",
                    flavor,
                    "quota-unknown-flavor",
                )
    for flavor, gpus in promised.items():
        if flavor in flavors and gpus > flavors[flavor]:
            yield warning(
                k8s_path("teams"),
                f"teams are guaranteed {gpus} {flavor} GPUs in total, but the Kubernetes node groups hold at most "
                f"{flavors[flavor]}: some quota can never be used",
                f"lower the {flavor} quotas to {flavors[flavor]} in total, or raise the node groups' maxSize",
                gpus,
                "quota-above-capacity",
            )


def check_kueue(k8s: KubernetesSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    levels = k8s.kueue.topology_levels
    twice = sorted({lv for lv in levels if levels.count(lv) > 1})
    if twice:
        yield error(
            k8s_path("kueue.topologyLevels"),
            f"topology level {twice[0]!r} is listed twice; each level is a distinct node label",
            "list each node label once, broadest first",
            list(levels),
            "topology-levels",
        )
    cohort = k8s.kueue.cohort
    if cohort is not None and not DNS_SUBDOMAIN.match(cohort):
        yield error(
            k8s_path("kueue.cohort"),
            f"cohort {cohort!r} is not a DNS subdomain (lowercase letters, digits, '-' and '.')",
            "use a name such as gpu-pool",
            cohort,
            "cohort-name",
        )


def check_example_job(k8s: KubernetesSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    job = k8s.example_job
    groups = {g.name: g for _, g, _ in kubernetes_groups(spec, catalog)}
    if job.node_group is not None and job.node_group not in groups:
        yield error(
            k8s_path("exampleJob.nodeGroup"),
            f"node group {job.node_group!r} is not run by Kubernetes",
            f"use one of: {', '.join(groups) or 'none (no Kubernetes node group)'}",
            job.node_group,
            "example-job-group",
        )
        return
    group = groups.get(job.node_group) if job.node_group else next(iter(groups.values()), None)
    if group is not None and job.nodes > group.max_size:
        yield warning(
            k8s_path("exampleJob.nodes"),
            f"the example job spans {job.nodes} nodes but node group {group.name!r} has at most {group.max_size}: it would never be admitted",
            f"set exampleJob.nodes to at most {group.max_size}",
            job.nodes,
            "example-job-size",
        )
