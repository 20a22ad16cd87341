"""Kubernetes objects rendered as plain dicts (``gpucluster.render``) placed as typed Pulumi resources,
so the plan shows and the tests validate exactly what the renderer made."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

# kind → (resource class, top-level fields besides apiVersion/kind/metadata, as the class's arguments)
_KINDS: dict[str, tuple[Any, dict[str, str]]] = {
    "Namespace": (k8s.core.v1.Namespace, {}),
    "ServiceAccount": (k8s.core.v1.ServiceAccount, {"automountServiceAccountToken": "automount_service_account_token"}),
    "ConfigMap": (k8s.core.v1.ConfigMap, {"data": "data", "binaryData": "binary_data"}),
    "ClusterRole": (k8s.rbac.v1.ClusterRole, {"rules": "rules"}),
    "ClusterRoleBinding": (k8s.rbac.v1.ClusterRoleBinding, {"roleRef": "role_ref", "subjects": "subjects"}),
    "DaemonSet": (k8s.apps.v1.DaemonSet, {"spec": "spec"}),
    "NetworkPolicy": (k8s.networking.v1.NetworkPolicy, {"spec": "spec"}),
    "ValidatingAdmissionPolicy": (k8s.admissionregistration.v1.ValidatingAdmissionPolicy, {"spec": "spec"}),
    "ValidatingAdmissionPolicyBinding": (k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding, {"spec": "spec"}),
}
# Kinds that run pods: they wait for the admission policies (and bindings) of their list, so no pod of
# theirs runs before the policy that limits it.
_WORKLOADS = ("DaemonSet",)


def place_objects(
    name: str, objects: Sequence[dict[str, Any]], parent: pulumi.Resource, depends_on: Sequence[pulumi.Resource] = ()
) -> list[pulumi.CustomResource]:
    """One resource per object, named ``<name>-<kind>-<object name>`` (lower case); namespaced objects wait
    for the Namespace among them, a policy binding for the policies before it, and a workload for every
    admission policy and binding of the list."""
    placed: list[pulumi.CustomResource] = []
    namespaces: list[pulumi.Resource] = []
    policies: list[pulumi.Resource] = []
    for obj in objects:
        kind = obj["kind"]
        cls, fields = _KINDS[kind]
        unknown = set(obj) - {"apiVersion", "kind", "metadata", *fields}
        if unknown:
            raise ValueError(f"{kind} {obj['metadata']['name']}: no place for {sorted(unknown)}")
        deps = [*depends_on, *(namespaces if kind != "Namespace" else [])]
        if kind == "ValidatingAdmissionPolicyBinding" or kind in _WORKLOADS:
            deps += policies
        resource = cls(
            f"{name}-{kind.lower()}-{obj['metadata']['name']}",
            metadata=obj["metadata"],
            **{arg: obj[key] for key, arg in fields.items() if key in obj},
            opts=pulumi.ResourceOptions(parent=parent, depends_on=deps),
        )
        if kind == "Namespace":
            namespaces.append(resource)
        elif kind.startswith("ValidatingAdmissionPolicy"):
            policies.append(resource)
        placed.append(resource)
    return placed
