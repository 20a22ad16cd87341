"""Validators of the ``gpucluster:kubernetes`` section (pure: spec and catalog in, findings out).

Each check returns nothing when the cluster has no Kubernetes section. They judge the parsed, not yet
resolved spec, so node groups are matched to Kubernetes with :func:`effective_scheduler`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.effective import effective_efa, effective_scheduler
from gpucluster.config.errors import Finding, error, info, warning
from gpucluster.config.kubernetes import (
    ADDON_PINS,
    MIG_CAPABLE_GPUS,
    RESERVED_NAMESPACES,
    SUPPORTED_EKS_VERSIONS,
    VPC_CNI_MIN_EFA,
    VPC_CNI_MIN_EFA_ONLY,
    KubernetesSpec,
    flavor_name,
    pinned_addon_version,
    version_tuple,
)
from gpucluster.config.node_group import NodeGroupSpec
from gpucluster.facts.catalog import Catalog, InstanceFacts

K8S = "gpucluster:kubernetes"
OPEN_CIDRS = ("0.0.0.0/0", "::/0")
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


KubernetesCheck = Callable[[KubernetesSpec, ClusterSpec, Catalog], Iterable[Finding]]


def check_version(k8s: KubernetesSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    if k8s.version not in SUPPORTED_EKS_VERSIONS:
        yield error(
            k8s_path("version"),
            f"EKS does not offer Kubernetes {k8s.version!r}",
            f"use one of {', '.join(SUPPORTED_EKS_VERSIONS)} (1.29–1.31 cost extra as extended support)",
            k8s.version,
            "eks-version",
        )


def check_endpoint(k8s: KubernetesSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    ep = k8s.endpoint
    if not ep.private_access and not ep.public_access:
        yield error(
            k8s_path("endpoint"),
            "the API server is reachable neither inside the VPC nor from the internet",
            "keep privateAccess: true (the default)",
            None,
            "endpoint-unreachable",
        )
    if ep.public_access_cidrs and not ep.public_access:
        yield error(
            k8s_path("endpoint.publicAccessCidrs"),
            "publicAccessCidrs is set but the endpoint is private (publicAccess is false)",
            "set publicAccess: true to open the endpoint to these networks, or remove publicAccessCidrs",
            list(ep.public_access_cidrs),
            "endpoint-cidrs-private",
        )
    if ep.public_access:
        open_to = [c for c in ep.public_access_cidrs if c in OPEN_CIDRS] or ([] if ep.public_access_cidrs else ["0.0.0.0/0"])
        if open_to:
            yield warning(
                k8s_path("endpoint.publicAccessCidrs"),
                f"the public API endpoint accepts connections from {', '.join(open_to)}: anyone on the internet can "
                "reach the API server (authentication still applies)",
                "list only your networks in publicAccessCidrs (e.g. the office or VPN egress CIDR), or use the private endpoint",
                list(ep.public_access_cidrs) or None,
                "endpoint-open",
            )
        if not ep.private_access:
            yield warning(
                k8s_path("endpoint.privateAccess"),
                "nodes reach the API server over the internet (through NAT) because the private endpoint is off",
                "set privateAccess: true",
                False,
                "endpoint-no-private",
            )


def check_addons(k8s: KubernetesSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    versions = k8s.addon_versions_for(lustre=False)
    cni = versions.get("vpc-cni")
    path = k8s_path("addonVersions.vpc-cni")
    if cni is not None:
        efa_groups = [(g, f) for _, g, f in kubernetes_groups(spec, catalog) if f is not None and effective_efa(g, f)]
        layouts = {g.efa_layout for g, _ in efa_groups}
        need = VPC_CNI_MIN_EFA_ONLY if "current" in layouts else VPC_CNI_MIN_EFA if layouts else None
        if need is not None and version_tuple(cni) < need:
            what = (
                "efa-only interfaces (the current EFA layout)"
                if need == VPC_CNI_MIN_EFA_ONLY
                else "nodes with several EFA interfaces"
            )
            yield error(
                path,
                f"vpc-cni {cni} is older than v{'.'.join(map(str, need))}, which EKS requires for {what}",
                f"use vpc-cni v{'.'.join(map(str, need))} or later (gpucluster pins v1.20.1-eksbuild.3), or remove the override",
                cni,
                "vpc-cni-efa",
            )
    proxy = versions.get("kube-proxy")
    if proxy is not None and ".".join(map(str, version_tuple(proxy)[:2])) != k8s.version:
        yield error(
            k8s_path("addonVersions.kube-proxy"),
            f"kube-proxy {proxy} does not match the cluster's Kubernetes {k8s.version}",
            f"use a kube-proxy v{k8s.version}.x-eksbuild.N version, or remove the override (EKS picks the default)",
            proxy,
            "kube-proxy-version",
        )


def check_addon_pins(k8s: KubernetesSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """Add-on pins follow the Kubernetes version: a pin meant for other versions is flagged, and a version
    gpucluster has no pin for is named (EKS then installs its default, which fits but is not pinned)."""
    if k8s.version not in SUPPORTED_EKS_VERSIONS:
        return
    for addon, ranges in ADDON_PINS.items():
        chosen = k8s.addon_versions.get(addon)
        pin = pinned_addon_version(addon, k8s.version)
        if chosen is None and pin is None:
            yield info(
                k8s_path(f"addonVersions.{addon}"),
                f"gpucluster has no {addon} pin for Kubernetes {k8s.version}; EKS installs its default {addon} for "
                f"{k8s.version}, which can change between deploys",
                f"pin it with addonVersions.{addon} (aws eks describe-addon-versions --addon-name {addon} "
                f"--kubernetes-version {k8s.version})",
                k8s.version,
                "addon-unpinned",
            )
            continue
        meant = next(((first, last) for first, last, version in ranges if version == chosen), None)
        if chosen is not None and chosen != pin and meant is not None:
            yield error(
                k8s_path(f"addonVersions.{addon}"),
                f"{addon} {chosen} is gpucluster's pin for Kubernetes {meant[0]}–{meant[1]}, not for {k8s.version}",
                f"remove the override ({'EKS picks its default' if pin is None else f'gpucluster pins {pin}'} for "
                f"{k8s.version}), or give a version EKS lists for {k8s.version}",
                chosen,
                "addon-version-range",
            )


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


def check_access_entries(k8s: KubernetesSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    seen: set[str] = set()
    for j, entry in enumerate(k8s.access_entries):
        if entry.principal_arn in seen:
            yield error(
                k8s_path(f"accessEntries[{j}].principalArn"),
                f"{entry.principal_arn} has two access entries; EKS allows one per principal",
                "merge the two entries",
                entry.principal_arn,
                "access-entry-twice",
            )
        seen.add(entry.principal_arn)
        if entry.namespaces and not entry.policies:
            yield warning(
                k8s_path(f"accessEntries[{j}].namespaces"),
                "namespaces only scope access policies, and this entry has none",
                "add policies (e.g. AmazonEKSEditPolicy), or remove namespaces",
                list(entry.namespaces),
                "access-entry-scope",
            )


KUBERNETES_CHECKS: tuple[KubernetesCheck, ...] = (
    check_version,
    check_endpoint,
    check_addons,
    check_addon_pins,
    check_zones,
    check_node_groups,
    check_system_node_group,
    check_mig,
    check_teams,
    check_kueue,
    check_example_job,
    check_access_entries,
)


def check_kubernetes(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """Every Kubernetes check (a cluster check of :mod:`gpucluster.config.checks.cluster`)."""
    k8s = spec.kubernetes
    if k8s is None:
        return
    for check in KUBERNETES_CHECKS:
        yield from check(k8s, spec, catalog)
