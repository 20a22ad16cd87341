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
    "ServiceAccount": (k8s.core.v1.ServiceAccount, {}),
    "ConfigMap": (k8s.core.v1.ConfigMap, {"data": "data", "binaryData": "binary_data"}),
    "ClusterRole": (k8s.rbac.v1.ClusterRole, {"rules": "rules"}),
    "ClusterRoleBinding": (k8s.rbac.v1.ClusterRoleBinding, {"roleRef": "role_ref", "subjects": "subjects"}),
    "DaemonSet": (k8s.apps.v1.DaemonSet, {"spec": "spec"}),
}


def place_objects(
    name: str, objects: Sequence[dict[str, Any]], parent: pulumi.Resource, depends_on: Sequence[pulumi.Resource] = ()
) -> list[pulumi.CustomResource]:
    """One resource per object, named ``<name>-<kind>-<object name>`` (lower case); namespaced objects wait
    for the Namespace among them."""
    placed: list[pulumi.CustomResource] = []
    namespaces: list[pulumi.Resource] = []
    for obj in objects:
        cls, fields = _KINDS[obj["kind"]]
        unknown = set(obj) - {"apiVersion", "kind", "metadata", *fields}
        if unknown:
            raise ValueError(f"{obj['kind']} {obj['metadata']['name']}: no place for {sorted(unknown)}")
        deps = [*depends_on, *(namespaces if obj["kind"] != "Namespace" else [])]
        resource = cls(
            f"{name}-{obj['kind'].lower()}-{obj['metadata']['name']}",
            metadata=obj["metadata"],
            **{arg: obj[key] for key, arg in fields.items() if key in obj},
            opts=pulumi.ResourceOptions(parent=parent, depends_on=deps),
        )
        if obj["kind"] == "Namespace":
            namespaces.append(resource)
        placed.append(resource)
    return placed
