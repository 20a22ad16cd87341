"""The Kubernetes tenancy rules: a team namespace (a Namespace labelled ``gpucluster/team``) enforces Pod
Security, and has a NetworkPolicy that denies all traffic by default.

Without the first, a team member's Job may run a privileged pod with the node's network and file system:
root on the GPU node, the node role through the metadata service, every team's data. Without the second,
a team's pods reach every other team's pods and the cluster's services.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpucluster.policy import types as t
from gpucluster.policy.model import UNKNOWN, Resource, Violation, dig, items, violation

POD_SECURITY = "team-namespace-pod-security"
DEFAULT_DENY = "team-namespace-default-deny"
ENFORCE = "pod-security.kubernetes.io/enforce"
ENFORCED_LEVELS = ("restricted", "baseline")


def is_team_namespace(r: Resource) -> bool:
    """A Namespace gpucluster made for a team (``None``-safe: an unknown label set is not a team's)."""
    labels = r.get("metadata", "labels")
    return r.type == t.NAMESPACE and isinstance(labels, Mapping) and t.TEAM_LABEL in labels


def team_namespace_pod_security(r: Resource) -> list[Violation]:
    """A team namespace enforces Pod Security ``restricted`` (or ``baseline``): its label
    ``pod-security.kubernetes.io/enforce``. Without it Kubernetes admits privileged pods."""
    if not is_team_namespace(r):
        return []
    level = r.get("metadata", "labels", ENFORCE)
    if level is UNKNOWN or level in ENFORCED_LEVELS:
        return []
    got = "not set (Kubernetes then admits privileged pods)" if level is None else f"{level!r}"
    return [
        violation(
            POD_SECURITY,
            r,
            f"metadata.labels.{ENFORCE}",
            f"is {got}: a team member's job can run a privileged pod with the node's network and file system",
            f'label the namespace {ENFORCE}: "restricted" (gpucluster\'s TeamNamespace does), or "baseline" at least',
        )
    ]


def _empty_selector(selector: Any) -> bool:
    return isinstance(selector, Mapping) and not selector.get("matchLabels") and not selector.get("matchExpressions")


def denies_by_default(policy: Resource) -> bool | None:
    """The NetworkPolicy selects every pod of its namespace for ingress and egress and allows nothing
    (``None``: not known before ``pulumi up``)."""
    spec = policy.get("spec")
    if spec is UNKNOWN:
        return None
    types = items(dig(spec, "policyTypes"))
    if UNKNOWN in types or dig(spec, "podSelector") is UNKNOWN:
        return None
    return (
        _empty_selector(dig(spec, "podSelector"))
        and {"Ingress", "Egress"} <= set(types)
        and not items(dig(spec, "ingress"))
        and not items(dig(spec, "egress"))
    )


def team_namespace_default_deny(resources: Sequence[Resource]) -> list[Violation]:
    """Every team namespace has a NetworkPolicy in it that denies all ingress and egress by default (the
    other policies of the namespace then allow what the team needs)."""
    policies = [r for r in resources if r.type == t.NETWORK_POLICY]
    out = []
    for ns in resources:
        if not is_team_namespace(ns):
            continue
        name = ns.get("metadata", "name")
        if name is UNKNOWN:
            continue
        # A policy whose namespace or rules are not known yet may be the one: cannot tell, no violation.
        if not any(
            denies_by_default(p) is not False
            for p in policies
            if (where := p.get("metadata", "namespace")) is UNKNOWN or where == name
        ):
            out.append(
                violation(
                    DEFAULT_DENY,
                    ns,
                    "networkPolicy",
                    "has no default-deny NetworkPolicy: its pods reach, and are reached by, every other team's pods",
                    "add a NetworkPolicy in the namespace with podSelector {} and policyTypes [Ingress, Egress] and no "
                    "rules (gpucluster's TeamNamespace adds gpucluster-default-deny), then allow what the team needs",
                )
            )
    return out
