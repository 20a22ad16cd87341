"""GPU node health on Kubernetes, as objects and settings (pure: the components only place them).

- :func:`dcgm_metrics_configmap`: the DCGM exporter's metric list (``dcgm-metrics.csv``) with the error
  counters its default list leaves out (ECC, row remapping, XIDs, NVLink CRC/replay/recovery), named by the
  GPU Operator's ``dcgmExporter.config.name`` (:func:`dcgm_exporter_values`).
- :func:`node_repair_config`: EKS node auto repair on a GPU managed node group.
- :func:`sweep_objects`: the sweep DaemonSet and what it needs. How the program reaches the pod: the node
  package (the same zip the Slurm nodes install, with NVIDIA's one-module NVML binding ``pynvml.py`` inside)
  in a ConfigMap, imported straight from the zip (``python3 -I -c SWEEP_MAIN …/gpucluster_agents.zip``: the
  sweep is :mod:`gpucluster_agents.health.k8s_sweep`), so no image of ours has to be built or pushed and
  nothing is downloaded when the pod starts (nodes in private subnets reach no PyPI); a stock Python image
  runs it. Its settings come along as data, ``sweep.json`` (:func:`sweep_settings`), and so do the
  thresholds: one ``health-<group>.json`` per GPU node group of the cluster, picked by the node's
  ``gpucluster/node-group`` label. The GPU is visible
  without taking one from the jobs: the ``nvidia`` runtime class with ``NVIDIA_VISIBLE_DEVICES=all`` and
  the ``utility`` (NVML) and ``compute`` (libcuda, for the boot mode's HBM copy) capabilities, and no
  ``nvidia.com/gpu`` request. The pod's service account may only get and patch nodes and patch node
  status, and a ValidatingAdmissionPolicy (:mod:`gpucluster.render.kubernetes.sweep_policy`) narrows that
  to its own node, its own taints and its own condition. Its namespace denies all traffic but DNS and the
  API server (HTTPS).

What the sweep pod keeps, and why (docs/kubernetes.md, "Exceptions, and why"): ``privileged``, because the
kernel log (``/dev/kmsg``, where XIDs are) is a character device, and Kubernetes lets a container open a
host device only when it is privileged (or through a device plugin); root, because reading the kernel log
needs CAP_SYSLOG where ``kernel.dmesg_restrict`` is 1, and a non-root process has no effective
capabilities even in a privileged container; the host path ``/dev/kmsg``, read-only. The GPUs come from
the NVIDIA runtime (``NVIDIA_VISIBLE_DEVICES=all``), not a host path. The API token is mounted explicitly
(automounting off), expiring after an hour.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from gpucluster.config.kubernetes.health import KubernetesHealthSpec
from gpucluster.render.kubernetes import BOOT_TAINT, BOOT_TOLERATION, GPU_TOLERATION, LABEL_GPU, LABEL_NODE_GROUP
from gpucluster.render.kubernetes.sweep_policy import sweep_node_policy
from gpucluster.render.kubernetes.tenancy import PSA, default_deny, dns_egress, network_policy
from gpucluster_agents.contract.boot import HEALTH_BOOT_TIMEOUT
from gpucluster_agents.contract.sweep import SWEEP_MAIN, SweepSettings
from gpucluster_agents.contract.sweep import to_json as settings_json

NAMESPACE = "gpucluster-health"
SWEEP_NAME = "gpucluster-health-sweep"
CONDITION = "GpuclusterHealthy"
TAINT_KEY = "gpucluster.io/gpu-unhealthy"
TAINT_VALUE = "true"
DCGM_CONFIGMAP = "gpucluster-dcgm-metrics"
DCGM_CSV_KEY = "dcgm-metrics.csv"  # the key the GPU Operator mounts for DCGM_EXPORTER_COLLECTORS
PACKAGE_KEY = "gpucluster_agents.zip"
SETTINGS_KEY = "sweep.json"
CODE_DIR = "/opt/gpucluster"  # where the ConfigMap's files lie in the pod
# Labels GPU nodes carry: gpucluster's EKS node groups, or the GPU Operator's feature discovery (on-prem).
GPU_NODE_LABELS = ((LABEL_GPU, "Exists", None), ("nvidia.com/gpu.present", "In", "true"))
SWEEP_BUDGET_SECONDS = 120
SWEEP_USER = f"system:serviceaccount:{NAMESPACE}:{SWEEP_NAME}"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"  # where the sweep reads its token and CA
API_SERVER = "https://kubernetes.default.svc"
TOKEN_SECONDS = 3600
# The boot mode's own budget is 120 s (docs/health.md); it gets as long to finish as on the Slurm nodes.
BOOT_BUDGET_SECONDS = HEALTH_BOOT_TIMEOUT

# The fields of dcgm-exporter's default list (NVIDIA/dcgm-exporter@d5e5f510a1b6b393f39a43293ccd9dc985defc79
# etc/default-counters.csv, the lines not commented out). Our ConfigMap *replaces* that file, so every one
# of them is kept here (tests/render/kubernetes/test_node_health.py pins the list).
DCGM_UPSTREAM_DEFAULT_COMMIT = "d5e5f510a1b6b393f39a43293ccd9dc985defc79"
DCGM_UPSTREAM_DEFAULT: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock (MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock (MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "HBM temperature (C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Energy used since boot (mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "PCIe replays."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilisation (%)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilisation (%)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilisation (%)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilisation (%)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Last XID error of the GPU."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Free frame buffer (MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Used frame buffer (MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Reserved frame buffer (MiB)."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "NVLink traffic (all links)."),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU license status."),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Rows remapped after uncorrected errors."),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Rows remapped after corrected errors."),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "1: a remap failed (replace the GPU)."),
    ("DCGM_FI_DRIVER_VERSION", "label", "Driver version."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active."),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "PCIe transmit rate (bytes/s)."),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "PCIe receive rate (bytes/s)."),
)

# What gpucluster adds: the error counters its alerts and health checks need (upstream has them commented
# out), the throttle counters and clock event reasons, and SM activity. Field names: DCGM's dcgm_fields.h.
DCGM_ADDED: tuple[tuple[str, str, str], ...] = (
    # ECC
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Corrected (single-bit) ECC errors since the last reset."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Uncorrected (double-bit) ECC errors since the last reset."),
    ("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", "Corrected ECC errors over the GPU's life."),
    ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "Uncorrected ECC errors over the GPU's life."),
    # row remapping (A100, H100 and later: they replace page retirement)
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "1: a remap waits for the next GPU reset."),
    # NVLink
    ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter", "NVLink flow-control CRC errors (all links)."),
    ("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter", "NVLink data CRC errors (all links)."),
    ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter", "NVLink replays (all links)."),
    ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "counter", "NVLink recoveries (all links)."),
    # throttling
    ("DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling duration due to power constraints (ns)."),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "Throttling duration due to thermal constraints (ns)."),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Current clock event reasons (bitmask)."),
    # activity
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "Ratio of cycles an SM has at least one warp assigned."),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "Ratio of warps resident on an SM to its maximum."),
)

# (DCGM field, Prometheus type or "label", help): upstream's default list, then ours.
DCGM_METRICS: tuple[tuple[str, str, str], ...] = DCGM_UPSTREAM_DEFAULT + DCGM_ADDED


def dcgm_metrics_csv() -> str:
    lines = [
        f"# DCGM exporter metrics of gpucluster: dcgm-exporter's default list ({DCGM_UPSTREAM_DEFAULT_COMMIT[:7]}), then ours"
    ]
    lines += [f"{field}, {kind}, {text}" for field, kind, text in DCGM_METRICS]
    return "\n".join(lines) + "\n"


def dcgm_metrics_configmap(namespace: str) -> dict[str, Any]:
    """The metric list, in the GPU Operator's namespace (where ``dcgmExporter.config.name`` looks)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": DCGM_CONFIGMAP, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": "gpucluster"}},
        "data": {DCGM_CSV_KEY: dcgm_metrics_csv()},
    }


def dcgm_exporter_values() -> dict[str, Any]:
    """What the GPU Operator's ``dcgmExporter`` values add: the ConfigMap above."""
    return {"config": {"name": DCGM_CONFIGMAP}}


def node_repair_config(health: KubernetesHealthSpec) -> dict[str, Any] | None:
    """``aws.eks.NodeGroup(node_repair_config=…)`` (pulumi-aws argument names), or None when it is off."""
    if not health.auto_repair:
        return None
    config: dict[str, Any] = {"enabled": True}
    if health.max_unhealthy_percentage is not None:
        config["max_unhealthy_node_threshold_percentage"] = health.max_unhealthy_percentage
    if health.max_parallel_repairs_percentage is not None:
        config["max_parallel_nodes_repaired_percentage"] = health.max_parallel_repairs_percentage
    return config


def sweep_settings(interval: int) -> SweepSettings:
    """What the sweep (:mod:`gpucluster_agents.health.k8s_sweep`) reads from ``sweep.json`` in the pod (schema:
    :mod:`gpucluster_agents.contract.sweep`)."""
    return SweepSettings(
        condition=CONDITION,
        taint_key=TAINT_KEY,
        taint_value=TAINT_VALUE,
        boot_taint_key=BOOT_TAINT["key"],
        group_label=LABEL_NODE_GROUP,
        interval_seconds=interval,
        sweep_budget_seconds=SWEEP_BUDGET_SECONDS,
        boot_budget_seconds=BOOT_BUDGET_SECONDS,
        api=API_SERVER,
        service_account_dir=SA_DIR,
        health_config_dir=CODE_DIR,
        package=f"{CODE_DIR}/{PACKAGE_KEY}",
    )


def sweep_config(interval: int) -> str:
    """The text of ``sweep.json``."""
    return settings_json(sweep_settings(interval))


def config_key(group: str) -> str:
    """The ConfigMap key (and file name in the pod's ``health_config_dir``) of one node group's health config."""
    return f"health-{group}.json"


def _sweep_pod(health: KubernetesHealthSpec, runtime_class: str, affinity: dict[str, Any]) -> dict[str, Any]:
    code = CODE_DIR
    token = {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_SECONDS}}
    ca = {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
    return {
        "serviceAccountName": SWEEP_NAME,
        # The token is mounted below, for the one container that calls the API, expiring after an hour.
        "automountServiceAccountToken": False,
        "runtimeClassName": runtime_class,
        "priorityClassName": "system-node-critical",
        "affinity": affinity,
        # GPU nodes carry the GPU taint; the sweep must also keep running on a node it tainted itself, and
        # run on a new node before anything else: it is what takes the boot taint off.
        "tolerations": [
            dict(GPU_TOLERATION),
            {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
            dict(BOOT_TOLERATION),
        ],
        # Root, said rather than left to the image: reading /dev/kmsg needs CAP_SYSLOG where
        # kernel.dmesg_restrict=1, and only a root process keeps a privileged container's capabilities.
        "securityContext": {"runAsUser": 0, "runAsGroup": 0},
        "containers": [
            {
                "name": "sweep",
                "image": health.sweep_image,
                # the sweep, the health program and its NVML binding from the zip alone (nothing installed
                # at start), isolated: no working directory or PYTHON* variable reaches the imports
                "command": ["python3", "-I", "-c", SWEEP_MAIN, f"{code}/{PACKAGE_KEY}", "--config", f"{code}/{SETTINGS_KEY}"],
                "env": [
                    {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                    {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"},
                ],
                "volumeMounts": [
                    {"name": "code", "mountPath": code, "readOnly": True},
                    {"name": "api-token", "mountPath": SA_DIR, "readOnly": True},
                    # XID history lives in the kernel log
                    {"name": "kmsg", "mountPath": "/dev/kmsg", "readOnly": True},
                ],
                # Privileged: the kernel log /dev/kmsg is a host character device, which the container's
                # device cgroup lets a container open only when it is privileged. Nothing else needs it.
                "securityContext": {"privileged": True},
                "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"cpu": "2", "memory": "512Mi"}},
            }
        ],
        "volumes": [
            {"name": "code", "configMap": {"name": SWEEP_NAME}},
            {"name": "api-token", "projected": {"sources": [token, ca]}},
            {"name": "kmsg", "hostPath": {"path": "/dev/kmsg", "type": "CharDevice"}},
        ],
    }


def sweep_namespace_objects(labels: dict[str, str]) -> list[dict[str, Any]]:
    """The sweep's namespace (Pod Security ``privileged``, said explicitly: the sweep is the one pod that
    needs it) and its NetworkPolicies: nothing in; out, cluster DNS and HTTPS (the API server, which the
    pod reaches through the ``kubernetes`` service)."""
    https = {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"ports": [{"protocol": "TCP", "port": 443}]}]}
    namespace_labels = {**labels, f"{PSA}/enforce": "privileged"}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": namespace_labels}},
        default_deny(NAMESPACE, labels),
        dns_egress(NAMESPACE, labels),
        network_policy(NAMESPACE, "gpucluster-api-server", https, labels),
    ]


def sweep_objects(
    health: KubernetesHealthSpec, package: bytes, configs: Mapping[str, str], runtime_class: str = "nvidia"
) -> list[dict[str, Any]]:
    """The sweep DaemonSet and what it needs: its namespace and NetworkPolicies, service account, cluster
    role and binding (nodes get/patch, nodes/status patch), the admission policy that narrows those rights
    to its own node, taints and condition, and the ConfigMap with the sweep's settings, the node package (NVML
    binding included) and ``configs``: each GPU node group's ``health.json`` text
    (:func:`gpucluster.resolve.compute.health.health_config`), by node group name."""
    labels = {"app.kubernetes.io/name": SWEEP_NAME, "app.kubernetes.io/part-of": "gpucluster"}

    def meta(name: str, namespaced: bool = True) -> dict[str, Any]:
        return {"name": name, "labels": dict(labels), **({"namespace": NAMESPACE} if namespaced else {})}

    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": k, "operator": op, **({"values": [v]} if v else {})}]}
                    for k, op, v in GPU_NODE_LABELS
                ]
            }
        }
    }
    fault = {"key": TAINT_KEY, "value": TAINT_VALUE, "effect": "NoSchedule"}
    return [
        *sweep_namespace_objects(labels),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(SWEEP_NAME), "automountServiceAccountToken": False},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": meta(SWEEP_NAME, namespaced=False),
            "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
                {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": meta(SWEEP_NAME, namespaced=False),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": SWEEP_NAME},
            "subjects": [{"kind": "ServiceAccount", "name": SWEEP_NAME, "namespace": NAMESPACE}],
        },
        *sweep_node_policy(SWEEP_NAME, SWEEP_USER, CONDITION, fault, BOOT_TAINT["key"]),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta(SWEEP_NAME),
            "data": {
                SETTINGS_KEY: sweep_config(health.sweep_interval_seconds),
                **{config_key(g): text for g, text in sorted(configs.items())},
            },
            "binaryData": {PACKAGE_KEY: base64.b64encode(package).decode()},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": meta(SWEEP_NAME),
            "spec": {
                "selector": {"matchLabels": {"app.kubernetes.io/name": SWEEP_NAME}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
                "template": {"metadata": {"labels": dict(labels)}, "spec": _sweep_pod(health, runtime_class, affinity)},
            },
        },
    ]
