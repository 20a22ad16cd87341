"""Checks of what keeps the teams of a Kubernetes cluster apart: each team's POSIX identity (user ID
ranges that do not overlap, a group of its own, inside what Kubernetes accepts) and a VPC CNI that
enforces the team namespaces' NetworkPolicies."""

from __future__ import annotations

from collections.abc import Iterator

from gpucluster.config.checks.kubernetes.nodes import k8s_path
from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.errors import Finding, error
from gpucluster.config.kubernetes import KubernetesSpec, version_tuple
from gpucluster.config.kubernetes.team_posix import KUBERNETES_MAX_ID, SLOTS, UNUSABLE_IDS, TeamPosix, slot_first
from gpucluster.facts.catalog import Catalog

# "Version 1.14 or later of the Amazon VPC CNI plugin for Kubernetes" implements network policies.
# Source: Amazon EKS User Guide, "Limit Pod traffic with Kubernetes network policies".
VPC_CNI_MIN_NETWORK_POLICY = (1, 14, 0)


def free_uid_first(taken: list[TeamPosix], count: int) -> int | None:
    """The first slot of the band whose ``count`` IDs overlap none of ``taken``."""
    for slot in range(SLOTS):
        mine = TeamPosix(gid=0, uid_first=slot_first(slot), uid_count=count)
        if mine.uid_last <= KUBERNETES_MAX_ID and not any(mine.overlaps(t) for t in taken):
            return mine.uid_first
    return None


def _range(p: TeamPosix) -> str:
    return f"{p.uid_first}–{p.uid_last}"


def check_team_posix(k8s: KubernetesSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """Every team's user IDs are its own (no two ranges overlap, no two teams share a group), and each
    range, defaults included, stays inside what Kubernetes accepts and leaves out nobody/nogroup."""
    resolved = [(j, team, team.effective_posix) for j, team in enumerate(k8s.teams)]
    everyone = [p for _, _, p in resolved]
    for j, team, mine in resolved:
        path = k8s_path(f"teams[{j}].posix")
        if mine.uid_last > KUBERNETES_MAX_ID:
            yield error(
                path + ".uidCount",
                f"team {team.name!r} user IDs {_range(mine)} end above {KUBERNETES_MAX_ID}, the largest Kubernetes accepts",
                "lower uidCount, or set uidFirst so the range ends by 2147483647",
                mine.uid_count,
                "team-uid-range-too-high",
            )
        bad = [f"{i} ({what})" for i, what in UNUSABLE_IDS.items() if mine.uid_first <= i <= mine.uid_last]
        if bad and team.posix.uid_first is None:  # an explicit uidFirst is checked when it is read
            yield error(
                path + ".uidCount",
                f"team {team.name!r} user IDs {_range(mine)} include {', '.join(bad)}",
                "set uidFirst above 65535, or a smaller uidCount",
                mine.uid_count,
                "team-uid-range-unusable",
            )
        for _, other, theirs in resolved[:j]:
            if mine.overlaps(theirs):
                derived = team.posix.uid_first is None and other.posix.uid_first is None
                why = " (both derived from the team names: they fell in the same slot)" if derived else ""
                free = free_uid_first([p for p in everyone if p is not mine], mine.uid_count)
                fix = f"set teams[{j}].posix.uidFirst explicitly" + (f", e.g. uidFirst: {free} (a free range)" if free else "")
                yield error(
                    path + ".uidFirst",
                    f"team {team.name!r} user IDs {_range(mine)} overlap team {other.name!r}'s {_range(theirs)}{why}: "
                    "a pod of one team could run as a user of the other and read its files",
                    fix,
                    mine.uid_first,
                    "team-uid-overlap",
                )
            # A group derived from an overlapping range is fixed with the range (said above).
            if mine.gid == theirs.gid and not (team.posix.gid is None and mine.overlaps(theirs)):
                yield error(
                    path + ".gid",
                    f"teams {other.name!r} and {team.name!r} both have group ID {mine.gid}: each could read the other's "
                    "group-owned files",
                    f"give team {team.name!r} a group of its own (set teams[{j}].posix.gid explicitly)",
                    mine.gid,
                    "team-gid-shared",
                )


def check_network_policy_cni(k8s: KubernetesSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    """gpucluster turns on the VPC CNI's network policy support; an older CNI would accept the team
    namespaces' NetworkPolicies and enforce none of them."""
    cni = k8s.addon_versions.get("vpc-cni")
    if cni is not None and version_tuple(cni) < VPC_CNI_MIN_NETWORK_POLICY:
        need = ".".join(map(str, VPC_CNI_MIN_NETWORK_POLICY))
        yield error(
            k8s_path("addonVersions.vpc-cni"),
            f"vpc-cni {cni} is older than v{need}, the first that enforces Kubernetes NetworkPolicies: "
            "the team namespaces' network isolation would not exist",
            f"use vpc-cni v{need} or later (gpucluster pins v1.20.1-eksbuild.3), or remove the override",
            cni,
            "vpc-cni-network-policy",
        )
