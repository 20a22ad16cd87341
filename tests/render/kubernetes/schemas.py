"""Offline, strict validation of the Kubernetes objects and Helm values gpucluster renders.

Built-in kinds go through ``kubernetes_validate`` (the Kubernetes 1.33 OpenAPI schemas, strict: unknown
fields rejected). Custom resources are checked against the ``openAPIV3Schema`` of the pinned upstream
CRD (a pinned file, see ``tests/pinned_files.py``), made strict the way the API server prunes: an object
with declared properties takes no others unless it says ``x-kubernetes-preserve-unknown-fields``. Helm
values are checked key by key against the pinned chart's ``values.yaml``.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.conftest import IN_CI
from tests.pinned_files import PinnedFileError, pinned_path

KUBERNETES_VERSION = "1.33"
# (apiVersion, kind) → pinned CRD file (tests/pinned_files.py PINS).
CRDS = {
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"): "kueue/v0.19.2/kueue.x-k8s.io_resourceflavors.yaml",
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"): "kueue/v0.19.2/kueue.x-k8s.io_clusterqueues.yaml",
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"): "kueue/v0.19.2/kueue.x-k8s.io_localqueues.yaml",
    ("kueue.x-k8s.io/v1beta2", "Topology"): "kueue/v0.19.2/kueue.x-k8s.io_topologies.yaml",
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): "jobset/v0.12.0/jobset.x-k8s.io_jobsets.yaml",
    ("kubeflow.org/v1", "PyTorchJob"): "trainer/v1.9.4/kubeflow.org_pytorchjobs.yaml",
    ("mellanox.com/v1alpha1", "NicClusterPolicy"): "network-operator/v26.4.1/mellanox.com_nicclusterpolicies.yaml",
    ("nvidia.com/v1", "ClusterPolicy"): "gpu-operator/v26.7.0/nvidia.com_clusterpolicies.yaml",
}
CHART_VALUES = {
    "gpu-operator": "gpu-operator/v26.7.0/values.yaml",
    "network-operator": "network-operator/v26.4.1/values.yaml",
    "aws-efa-k8s-device-plugin": "eks-charts/v0.0.242/values.yaml",
    "aws-fsx-csi-driver": "aws-fsx-csi-driver/v1.9.0/values.yaml",
}
KUEUE_MANAGER_CONFIG = "kueue/v0.19.2/controller_manager_config.yaml"
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def schema_file(relative: str) -> Path:
    """A pinned upstream file, verified by its sha256; in CI its absence fails the test with the reason."""
    try:
        return pinned_path(relative)
    except PinnedFileError as e:
        if IN_CI:
            pytest.fail(str(e))
        pytest.skip(str(e))


def strict(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` wherever the API server would prune unknown fields."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if "properties" in out and "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@functools.cache
def _crd_schema(relative: str, version: str) -> dict[str, Any]:
    doc = yaml.safe_load(schema_file(relative).read_text())
    for v in doc["spec"]["versions"]:
        if v["name"] == version:
            assert v.get("served", True), f"{relative} does not serve {version}"
            return strict(copy.deepcopy(v["schema"]["openAPIV3Schema"]))
    raise AssertionError(f"{relative} has no version {version}")


def crd_schema(api_version: str, kind: str) -> dict[str, Any]:
    relative = CRDS[(api_version, kind)]
    return _crd_schema(relative, api_version.split("/")[-1])


def validate_metadata(meta: Mapping[str, Any]) -> None:
    """ObjectMeta of a custom resource, as strictly as a built-in one (through a ConfigMap's schema)."""
    assert DNS_SUBDOMAIN.match(str(meta.get("name", ""))), f"metadata.name {meta.get('name')!r} is not a DNS subdomain"
    kubernetes_validate.validate(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": dict(meta)}, KUBERNETES_VERSION, strict=True
    )


def validate_object(doc: Mapping[str, Any]) -> str:
    """Validate one object strictly; returns how (``built-in`` or the CRD file). Raises on any error."""
    key = (doc.get("apiVersion"), doc.get("kind"))
    if key in CRDS:
        jsonschema.Draft7Validator(crd_schema(*key)).validate(dict(doc))
        validate_metadata(doc.get("metadata") or {})
        return CRDS[key]
    kubernetes_validate.validate(dict(doc), KUBERNETES_VERSION, strict=True)
    return "built-in"


def unknown_values(values: Any, defaults: Any, path: str = "") -> list[str]:
    """Paths in ``values`` that the chart's ``values.yaml`` does not have. Free-form maps (an empty
    map in the defaults, e.g. ``nodeSelector: {}``) take any key; lists are not descended into."""
    if not isinstance(values, Mapping):
        return []
    if not isinstance(defaults, Mapping):
        return [path or "."]
    if not defaults:
        return []
    out: list[str] = []
    for key, value in values.items():
        sub = f"{path}.{key}" if path else str(key)
        if key not in defaults:
            out.append(sub)
        else:
            out += unknown_values(value, defaults[key], sub)
    return out


def chart_defaults(chart: str) -> Any:
    return yaml.safe_load(schema_file(CHART_VALUES[chart]).read_text())


# Keys of Kueue's v1beta2 Configuration that the default file neither sets nor shows commented out, each from the API
# types (kubernetes-sigs/kueue apis/config/v1beta2/configuration_types.go): ControllerMetrics.EnableClusterQueueResources
# (`json:"enableClusterQueueResources,omitempty"`, "the cluster queue resource usage and quotas metrics will be
# reported").
KUEUE_API_KEYS: dict[str, dict[str, Any]] = {"metrics": {"enableClusterQueueResources": False}}


def kueue_config_keys() -> Any:
    """The default Kueue manager Configuration with its commented-out examples (``#waitForPodsReady:``…)
    uncommented: every key an upstream v1beta2 Configuration documents there."""
    lines = []
    for line in schema_file(KUEUE_MANAGER_CONFIG).read_text().splitlines():
        # "#key:" and "#  child:" lose the "#"; "# key: v" and "  # - item" lose "# " (one space).
        line = re.sub(r"^(\s*)# (?=\S)", r"\1", line)
        line = re.sub(r"^(\s*)#", r"\1", line)
        lines.append(line.split(" #", 1)[0].rstrip())
    keys = yaml.safe_load("\n".join(lines))
    for section, extra in KUEUE_API_KEYS.items():
        keys.setdefault(section, {}).update(extra)
    return keys


def plan_objects(plan: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(resource name, object)`` for every Kubernetes object a plan registers (Helm releases and
    providers aside), and every manifest shipped inside a ConfigMap."""
    for r in plan.resources:
        if not r.custom or not r.type.startswith("kubernetes:") or r.type == "kubernetes:helm.sh/v3:Release":
            continue
        doc = {k: v for k, v in r.inputs.items() if k not in ("__defaults",)}
        yield r.name, doc
        if doc.get("kind") == "ConfigMap":
            for key, text in (doc.get("data") or {}).items():
                if key.endswith(".yaml"):
                    for manifest in yaml.safe_load_all(text):
                        yield f"{r.name}/{key}", manifest
