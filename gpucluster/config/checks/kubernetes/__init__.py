"""Validators of the EKS control plane in ``gpucluster:kubernetes`` (version, endpoint access, add-ons
and their pinned versions, access entries) and the runner of every Kubernetes check
(:func:`check_kubernetes`); node-side checks are :mod:`gpucluster.config.checks.kubernetes.nodes`.

Each check returns nothing when the cluster has no Kubernetes section.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpucluster.config.checks.kubernetes.nodes import (
    KubernetesCheck,
    check_example_job,
    check_kueue,
    check_mig,
    check_node_groups,
    check_system_node_group,
    check_teams,
    check_zones,
    k8s_path,
    kubernetes_groups,
)
from gpucluster.config.checks.kubernetes.tenancy import check_network_policy_cni, check_team_posix
from gpucluster.config.checks.sections import section_findings
from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.effective import effective_efa
from gpucluster.config.errors import Finding, error, info, warning
from gpucluster.config.kubernetes import (
    ADDON_PINS,
    SUPPORTED_EKS_VERSIONS,
    VPC_CNI_MIN_EFA,
    VPC_CNI_MIN_EFA_ONLY,
    KubernetesSpec,
    pinned_addon_version,
    version_tuple,
)
from gpucluster.facts.catalog import Catalog

OPEN_CIDRS = ("0.0.0.0/0", "::/0")


def check_version(k8s: KubernetesSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    if k8s.version not in SUPPORTED_EKS_VERSIONS:
        yield error(
            k8s_path("version"),
            f"EKS does not offer Kubernetes {k8s.version!r}",
            f"use one of {', '.join(SUPPORTED_EKS_VERSIONS)} (1.30–1.31 cost extra as extended support)",
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


def check_access_entries(k8s: KubernetesSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    if not any("AmazonEKSClusterAdminPolicy" in e.policies and not e.namespaces for e in k8s.access_entries):
        yield warning(
            k8s_path("accessEntries"),
            "no entry is a cluster admin: EKS makes nobody one behind the config's back (no bootstrap admin for the "
            "cluster's creator), and Pulumi creates the GPU Operator, Kueue and team namespaces with the credentials "
            "of whoever runs `pulumi up`, which EKS then refuses",
            "add the IAM role that runs `pulumi up` with policies: [AmazonEKSClusterAdminPolicy] (no namespaces)",
            None,
            "no-cluster-admin",
        )
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
    check_team_posix,
    check_network_policy_cni,
    check_kueue,
    check_example_job,
    check_access_entries,
)


def check_kubernetes(spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """Every Kubernetes check (a cluster check of :mod:`gpucluster.config.checks.cluster`)."""
    return section_findings(spec.kubernetes, spec, catalog, KUBERNETES_CHECKS)
