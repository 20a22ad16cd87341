"""What keeps the teams of a Kubernetes cluster apart, as objects (pure: the components only place them).

- :func:`pod_security_labels`: Pod Security admission at ``restricted`` on every team namespace (enforced,
  warned and audited, pinned to the cluster's Kubernetes version).
- :func:`team_pod_policy` and :func:`team_pod_policy_binding`: one ValidatingAdmissionPolicy for the
  cluster that holds every pod of a team namespace to the team's POSIX identity (user IDs, group) and
  to the team's own claims, and keeps it off the node's namespaces and file system. The team table
  (namespace → user IDs, group, claims) is written into the policy's CEL as constants: no parameter
  object a tenant could edit, and the expressions the tests evaluate are the ones that ship.
- :func:`team_network_policies`: default deny in and out, then the team's own namespace, cluster DNS, and
  the world outside the cluster's networks (datasets, registries, package indexes).

No API server runs offline: the CEL is proven by evaluating it (tests/render/kubernetes/test_admission_cel.py),
the objects by the pinned Kubernetes schemas.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpucluster.config.kubernetes.team_posix import TeamPosix

PSA = "pod-security.kubernetes.io"
ADMISSION_API = "admissionregistration.k8s.io/v1"
NETWORKING_API = "networking.k8s.io/v1"
TEAM_POD_POLICY = "gpucluster-team-pods"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
DEFAULT_DENY = "gpucluster-default-deny"
# Volume kinds a team pod may mount besides its claims: data the pod or the API server provides, nothing
# of the node's. (hostPath, csi inline and generic ephemeral volumes are refused: the last two could name
# any storage class or driver, out of reach of the claims' pre-bound PersistentVolumes.)
POD_VOLUMES = ("configMap", "secret", "emptyDir", "projected", "downwardAPI")
# Networks a team pod never reaches except its own namespace's pods: RFC 1918 (the VPC, peered VPCs, the
# EKS service CIDRs 10.100.0.0/16 and 172.20.0.0/16, a site's networks), shared address space (RFC 6598,
# used for pods by some CNIs) and link-local (the instance metadata service, 169.254.169.254).
PRIVATE_NETWORKS = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16")


def pod_security_labels(level: str, version: str) -> dict[str, str]:
    """Pod Security admission labels: ``level`` enforced, and warned and audited at the same level, all
    pinned to ``version`` (``v1.33``, or ``latest``) so a control-plane upgrade does not change the rules."""
    labels = {}
    for mode in ("enforce", "warn", "audit"):
        labels[f"{PSA}/{mode}"] = level
        labels[f"{PSA}/{mode}-version"] = version
    return labels


def psa_version(kubernetes_version: str | None) -> str:
    """The Pod Security version label for a cluster: its minor version on EKS, ``latest`` elsewhere."""
    return f"v{kubernetes_version}" if kubernetes_version else "latest"


@dataclass(frozen=True)
class TeamTenancy:
    """What the admission policy holds one team namespace to."""

    namespace: str
    posix: TeamPosix
    claims: tuple[str, ...]
    """The persistentVolumeClaims of the team (its claims on the shared file systems)."""


def _cel_map(entries: Mapping[str, str]) -> str:
    """A CEL map literal from namespace to an expression, looked up by the request's namespace."""
    body = ", ".join(f"{_cel_str(k)}: {v}" for k, v in sorted(entries.items()))
    return "{" + body + "}[request.namespace]"


def _cel_str(value: str) -> str:
    if "'" in value or "\\" in value:
        raise ValueError(f"{value!r} cannot be written as a CEL string here")
    return f"'{value}'"


def _every_container(test: str) -> str:
    """``test`` (of ``c``) holds for every container, init and ephemeral containers included. Each list is
    walked on its own: CEL types Container and EphemeralContainer apart, so the lists cannot be joined."""
    return " && ".join(
        [f"object.spec.containers.all(c, {test})"]
        + [
            f"(!has(object.spec.{kind}) || object.spec.{kind}.all(c, {test}))"
            for kind in ("initContainers", "ephemeralContainers")
        ]
    )


def _effective(field: str, pod_variable: str) -> str:
    """A container's ``securityContext.<field>``, else the pod's (the variable is ``-1`` when neither sets it)."""
    return f"(has(c.securityContext) && has(c.securityContext.{field}) ? c.securityContext.{field} : variables.{pod_variable})"


def _pod_field(field: str) -> str:
    path = f"object.spec.securityContext.{field}"
    return f"has(object.spec.securityContext) && has({path}) ? {path} : -1"


def _team_validations() -> list[tuple[str, str | None, str | None]]:
    """(expression, message, message expression) of each rule of :func:`team_pod_policy`."""
    in_range = "({x} >= variables.uidFirst && {x} < variables.uidFirst + variables.uidCount)"
    user = _effective("runAsUser", "podUser")
    group = _effective("runAsGroup", "podGroup")
    users = "string(variables.uidFirst) + '-' + string(variables.uidFirst + variables.uidCount - 1)"
    volume_ok = " || ".join(
        [f"has(v.{kind})" for kind in POD_VOLUMES]
        + ["(has(v.persistentVolumeClaim) && v.persistentVolumeClaim.claimName in variables.claims)"]
    )
    host = " && ".join(f"!(has(object.spec.{f}) && object.spec.{f})" for f in ("hostNetwork", "hostPID", "hostIPC"))
    # Pod Security "restricted" says the same; said again here so that a namespace label removed by mistake
    # does not leave the team's pods free to escalate (a setuid or file-capability binary of the image).
    unprivileged = (
        "has(c.securityContext) && !(has(c.securityContext.privileged) && c.securityContext.privileged) && "
        "has(c.securityContext.allowPrivilegeEscalation) && !c.securityContext.allowPrivilegeEscalation && "
        "(!has(c.securityContext.capabilities) || !has(c.securityContext.capabilities.add) || "
        "c.securityContext.capabilities.add.all(a, a == 'NET_BIND_SERVICE'))"
    )
    return [
        (host, "a team pod may not share the node's network, process or IPC namespace (hostNetwork, hostPID, hostIPC)", None),
        (
            _every_container(unprivileged),
            "every container of a team pod must set allowPrivilegeEscalation: false, and may not be privileged nor add "
            "a capability (NET_BIND_SERVICE aside)",
            None,
        ),
        (
            f"!has(object.spec.volumes) || object.spec.volumes.all(v, {volume_ok})",
            "a team pod may mount configMap, secret, emptyDir, projected and downwardAPI volumes and its team's own "
            "persistentVolumeClaims, nothing else (no hostPath, no inline CSI or ephemeral volumes, no other team's claim)",
            None,
        ),
        (
            "variables.podUser == -1 || " + in_range.format(x="variables.podUser"),
            None,
            f"'the pod runAsUser must be a user ID of the team: ' + {users}",
        ),
        (
            _every_container(in_range.format(x=user)),
            None,
            "'every container (init and ephemeral ones included) must run as a user ID of the team, set as runAsUser "
            f"in the pod or the container (the USER of the image is not trusted): ' + {users}",
        ),
        (
            "(variables.podGroup == -1 || variables.podGroup == variables.gid) && "
            + _every_container(f"{group} == variables.gid"),
            None,
            "'every container must run with the group of the team as runAsGroup, set in the pod or the container: ' + string(variables.gid)",
        ),
        (
            "!has(object.spec.securityContext) || ((!has(object.spec.securityContext.fsGroup) || "
            "object.spec.securityContext.fsGroup == variables.gid) && (!has(object.spec.securityContext.supplementalGroups) || "
            "object.spec.securityContext.supplementalGroups.all(g, g == variables.gid)))",
            None,
            "'fsGroup and supplementalGroups may only name the group of the team: ' + string(variables.gid)",
        ),
    ]


def team_pod_policy(teams: Sequence[TeamTenancy]) -> dict[str, Any]:
    """The ValidatingAdmissionPolicy of the team namespaces' pods (bound by :func:`team_pod_policy_binding`):
    the team table as variables looked up by the request's namespace, then :func:`_team_validations`."""
    return {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": TEAM_POD_POLICY, "labels": {"app.kubernetes.io/part-of": "gpucluster"}},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    # A pod's security context and volumes cannot change after it is created; ephemeral
                    # containers (kubectl debug) are added later, through their subresource.
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["UPDATE"],
                        "resources": ["pods/ephemeralcontainers"],
                    },
                ]
            },
            "variables": [
                {"name": "uidFirst", "expression": _cel_map({t.namespace: str(t.posix.uid_first) for t in teams})},
                {"name": "uidCount", "expression": _cel_map({t.namespace: str(t.posix.uid_count) for t in teams})},
                {"name": "gid", "expression": _cel_map({t.namespace: str(t.posix.gid) for t in teams})},
                {
                    "name": "claims",
                    "expression": _cel_map({t.namespace: "[" + ", ".join(_cel_str(c) for c in t.claims) + "]" for t in teams}),
                },
                {"name": "podUser", "expression": _pod_field("runAsUser")},
                {"name": "podGroup", "expression": _pod_field("runAsGroup")},
            ],
            "validations": [
                {"expression": expr, **({"message": msg} if msg else {}), **({"messageExpression": mexpr} if mexpr else {})}
                for expr, msg, mexpr in _team_validations()
            ],
        },
    }


def team_pod_policy_binding(namespaces: Sequence[str]) -> dict[str, Any]:
    """Binds :func:`team_pod_policy` to exactly the team namespaces, refusing (``Deny``) what it fails."""
    return {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": TEAM_POD_POLICY, "labels": {"app.kubernetes.io/part-of": "gpucluster"}},
        "spec": {
            "policyName": TEAM_POD_POLICY,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {
                    "matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": sorted(namespaces)}]
                }
            },
        },
    }


def outside_networks(extra: Sequence[str] = ()) -> list[str]:
    """What a team pod's egress excludes from 0.0.0.0/0: :data:`PRIVATE_NETWORKS` and ``extra`` (the VPC
    CIDR, a site's networks) where those lie outside them, merged."""
    nets = [ipaddress.ip_network(c) for c in (*PRIVATE_NETWORKS, *extra)]
    return [str(n) for n in ipaddress.collapse_addresses(n for n in nets if isinstance(n, ipaddress.IPv4Network))]


def network_policy(namespace: str, name: str, spec: dict[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": NETWORKING_API,
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": spec,
    }


def default_deny(namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """Every pod of ``namespace`` takes no traffic in and sends none out but what another policy allows."""
    return network_policy(namespace, DEFAULT_DENY, {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}, labels)


def dns_egress(namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """Cluster DNS: the kube-dns pods (CoreDNS) of kube-system, port 53 over UDP and TCP."""
    to = {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: "kube-system"}},
        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
    }
    ports = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    spec = {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [to], "ports": ports}]}
    return network_policy(namespace, "gpucluster-dns", spec, labels)


def team_network_policies(
    namespace: str, labels: Mapping[str, str], cluster_networks: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """A team namespace's NetworkPolicies: default deny; its own pods to and from each other (NCCL's TCP
    bootstrap, torchrun's rendezvous, a job's headless service); cluster DNS; and the internet outside the
    cluster's own networks (``cluster_networks`` and :data:`PRIVATE_NETWORKS`), where datasets, model hubs,
    registries and package indexes are. EFA traffic is not IP and no policy sees it; FSx for Lustre is
    mounted by the node's CSI driver, not the pod."""
    same = {"podSelector": {}}
    outside = {"ipBlock": {"cidr": "0.0.0.0/0", "except": outside_networks(cluster_networks)}}
    return [
        default_deny(namespace, labels),
        network_policy(
            namespace,
            "gpucluster-same-namespace",
            {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [{"from": [same]}], "egress": [{"to": [same]}]},
            labels,
        ),
        dns_egress(namespace, labels),
        network_policy(
            namespace,
            "gpucluster-internet",
            {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [outside]}]},
            labels,
        ),
    ]
