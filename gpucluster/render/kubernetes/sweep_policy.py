"""What the health sweep's service account may change on a node, as a ValidatingAdmissionPolicy (pure).

RBAC cannot say "only your own node" nor "only this taint": the sweep's ClusterRole lets it patch nodes
and their status, and this policy narrows every such update to

- the node the sweep's pod runs on: the node name Kubernetes puts in the pod's bound service-account
  token (``authentication.kubernetes.io/node-name`` in the request's user extra; feature
  ServiceAccountTokenPodNodeInfo, on by default from Kubernetes 1.30, GA in 1.32);
- its own taints: the fault taint, added (exactly ``gpucluster.io/gpu-unhealthy=true:NoSchedule``) or
  removed, and the boot taint, removed only; every other taint stays as it was, in order;
- its own condition (``GpuclusterHealthy``); every other condition stays as it was;
- nothing else: labels, annotations, owners, finalizers, the rest of the spec and of the status equal
  before and after. The fields compared are those of Node in Kubernetes 1.30, the oldest version
  gpucluster supports (a CEL expression naming a field the cluster's schema lacks would not compile);
  ``status.features`` (1.31+, kubelet's feature flags) is therefore not compared.

A compromised sweep pod (it runs privileged, so it is root on its node) can then still taint its own node
and mark it unhealthy — which the node's root could do anyway by breaking the GPU — but no longer steer
other teams' pods by relabelling, untainting or re-advertising any node, its own included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpucluster.render.kubernetes.tenancy import ADMISSION_API

NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
# Node fields of Kubernetes 1.30 (its OpenAPI schema) the sweep must leave alone; taints and conditions,
# which it may change in part, are checked apart.
METADATA_FIELDS = ("labels", "annotations", "ownerReferences", "finalizers")
SPEC_FIELDS = ("podCIDR", "podCIDRs", "providerID", "unschedulable", "configSource", "externalID")
STATUS_FIELDS = (
    "addresses",
    "allocatable",
    "capacity",
    "config",
    "daemonEndpoints",
    "images",
    "nodeInfo",
    "phase",
    "runtimeHandlers",
    "volumesAttached",
    "volumesInUse",
)


def _same(path: str) -> str:
    """``path`` (below ``object``) is set in both or neither of the old and new node, and equal."""
    new, old = f"object.{path}", f"oldObject.{path}"
    head, _, field = path.rpartition(".")
    has_new, has_old = f"has(object.{head}.{field})", f"has(oldObject.{head}.{field})"
    return f"({has_new} == {has_old} && (!{has_new} || {new} == {old}))"


def _all_same(section: str, fields: Sequence[str]) -> str:
    return " && ".join(_same(f"{section}.{f}") for f in fields)


def _list(obj: str, path: str) -> str:
    return f"has({obj}.{path}) ? {obj}.{path} : []"


def _strings(values: Sequence[str]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def sweep_node_policy(
    name: str, username: str, condition: str, fault_taint: dict[str, str], boot_taint_key: str
) -> list[dict[str, Any]]:
    """The policy (named ``name``) for requests of ``username`` (the sweep's service account), and its
    binding: every node, ``Deny`` on failure."""
    fault = fault_taint["key"]
    own = _strings([fault, boot_taint_key])
    validations = [
        (
            f"has(request.userInfo.extra) && '{NODE_NAME_EXTRA}' in request.userInfo.extra && "
            f"request.userInfo.extra['{NODE_NAME_EXTRA}'] == [object.metadata.name]",
            "the health sweep may change only the node its pod runs on (the node named in its service-account token)",
        ),
        (
            _all_same("metadata", METADATA_FIELDS),
            "the health sweep may not change a node's labels, annotations, owners or finalizers",
        ),
        (_all_same("spec", SPEC_FIELDS), "the health sweep may change no part of a node's spec but its own taints"),
        (
            f"variables.newTaints.filter(t, !(t.key in {own})) == variables.oldTaints.filter(t, !(t.key in {own}))",
            "the health sweep may not add, remove or change any taint but its own",
        ),
        (
            f"variables.newTaints.filter(t, t.key == '{fault}').all(t, t.value == '{fault_taint['value']}' && "
            f"t.effect == '{fault_taint['effect']}')",
            f"the health sweep's taint is exactly {fault}={fault_taint['value']}:{fault_taint['effect']}",
        ),
        (
            f"variables.newTaints.filter(t, t.key == '{boot_taint_key}').all(t, t in variables.oldTaints)",
            f"the health sweep may remove the boot taint {boot_taint_key}, never add or change it",
        ),
        (
            f"variables.newConditions.filter(c, c.type != '{condition}') == variables.oldConditions.filter(c, c.type != '{condition}')",
            f"the health sweep may change no node condition but {condition}",
        ),
        (_all_same("status", STATUS_FIELDS), "the health sweep may change no part of a node's status but its own condition"),
    ]
    labels = {"app.kubernetes.io/part-of": "gpucluster"}
    policy = {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes", "nodes/status"]}
                ]
            },
            "matchConditions": [{"name": "health-sweep", "expression": f"request.userInfo.username == '{username}'"}],
            "variables": [
                {"name": "oldTaints", "expression": _list("oldObject", "spec.taints")},
                {"name": "newTaints", "expression": _list("object", "spec.taints")},
                {"name": "oldConditions", "expression": _list("oldObject", "status.conditions")},
                {"name": "newConditions", "expression": _list("object", "status.conditions")},
            ],
            "validations": [{"expression": e, "message": m} for e, m in validations],
        },
    }
    binding = {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": labels},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }
    return [policy, binding]
