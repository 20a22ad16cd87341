"""What the Kubernetes layer renders for nodes and charts, as pure functions: the labels, taints and
API names every Kubernetes module shares, node labels and taints, nodeadm user data, and the Helm values
of each chart. Custom resources are :mod:`gpucluster.render.kubernetes.objects`, the example job
:mod:`gpucluster.render.kubernetes.training_job`.

No Pulumi here: components place these values, tests validate them (Helm values against each pinned
chart's ``values.yaml``, custom resources against the pinned CRD schemas) and pin them in golden files.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from gpucluster.config.kubernetes import MigStrategy, flavor_name
from gpucluster.facts.catalog import InstanceFacts
from gpucluster.render.core import USER_DATA_LIMIT, render, to_yaml
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup

Platform = Literal["eks", "on-prem"]

KUEUE_API = "kueue.x-k8s.io/v1beta2"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
NIC_CLUSTER_POLICY_API = "mellanox.com/v1alpha1"

GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
# Every GPU node carries this taint; only pods that tolerate it (GPU work, GPU daemons) land there.
GPU_TAINT = {"key": GPU_RESOURCE, "value": "true", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
# GPU nodes of EKS register with this taint too (kubelet --register-with-taints): no pod but the GPU daemons
# lands before the health sweep's first run, in ``boot`` mode, passed and took it off.
BOOT_TAINT = {"key": "gpucluster.io/health-boot", "value": "pending", "effect": "NoSchedule"}
BOOT_TOLERATION = {"key": BOOT_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}
# Node labels gpucluster sets on its EKS node groups.
LABEL_NODE_GROUP = "gpucluster/node-group"
LABEL_GPU = "gpucluster/gpu"
LABEL_EFA = "gpucluster/efa"
# Label of team namespaces: Kueue manages every job in them.
TEAM_LABEL = "gpucluster/team"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
TOPOLOGY_NAME = "network"

# Images of the Network Operator's components: the chart's own pattern (values.yaml v26.4.1 pulls its init
# container from nvcr.io/nvidia/mellanox at version network-operator-v26.4.1; names from hack/release.yaml).
NETWORK_OPERATOR_IMAGES = "nvcr.io/nvidia/mellanox"
NETWORK_OPERATOR_COMPONENT_VERSION = "network-operator-v26.4.1"
MELLANOX_VENDOR = "15b3"


# --- node groups --------------------------------------------------------------------------------------


def node_labels(group: ResolvedNodeGroup) -> dict[str, str]:
    """Kubernetes labels of a GPU node group's nodes: the group, its GPU flavor, EFA; then the user's."""
    facts = group.facts
    labels = {LABEL_NODE_GROUP: group.name}
    if facts.gpu_count:
        labels[LABEL_GPU] = flavor_name(facts)
    if group.uses_efa:
        labels[LABEL_EFA] = "true"
    return {**labels, **group.spec.labels}


def node_taints(facts: InstanceFacts) -> list[dict[str, str]]:
    return [dict(GPU_TAINT)] if facts.gpu_count else []


def taint_flag(taints: list[dict[str, str]]) -> str:
    """kubelet's ``--register-with-taints`` (``key=value:Effect``, comma separated)."""
    return "--register-with-taints=" + ",".join(f"{t['key']}={t['value']}:{t['effect']}" for t in taints)


def node_config(facts: InstanceFacts, instance_store_for_pods: bool, boot_gate: bool = False) -> dict[str, Any]:
    """The nodeadm ``NodeConfig`` merged with EKS's own: RAID 0 over the instance-store NVMe disks for
    containerd and kubelet (container images of training jobs are large) when the node has them; with
    ``boot_gate`` (the health sweep is on) a GPU node registers with :data:`BOOT_TAINT`. The flag names the GPU
    taint as well: kubelet keeps the last ``--register-with-taints`` it is given, so the flag must carry every
    taint the node registers with, not only ours."""
    spec: dict[str, Any] = {}
    if instance_store_for_pods and facts.nvme_disk_count:
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    if boot_gate and facts.gpu_count:
        spec["kubelet"] = {"flags": [taint_flag([*node_taints(facts), dict(BOOT_TAINT)])]}
    return {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}


def nodeadm_text(cloud_config: str, config: Mapping[str, Any]) -> str:
    """MIME multi-part user data for an EKS managed node group on AL2023 (no size check)."""
    return render("kubernetes/eks-user-data.mime.j2", node_config=to_yaml(dict(config)), cloud_config=cloud_config)


def nodeadm_user_data(cloud_config: str, config: Mapping[str, Any]) -> str:
    """MIME multi-part user data for an EKS managed node group on AL2023: a nodeadm ``NodeConfig`` part
    and the node's cloud-config part. EKS merges its own part (cluster endpoint, CA) into it, so it
    stays uncompressed MIME text (EKS refuses gzip'd launch-template user data): the 16 KB limit
    applies to the text."""
    text = nodeadm_text(cloud_config, config)
    if len(text.encode()) > USER_DATA_LIMIT:
        raise ValueError(f"EKS user data is {len(text.encode())} bytes; EC2 allows {USER_DATA_LIMIT}")
    return text


# --- Helm values ---------------------------------------------------------------------------------------


def gpu_operator_values(
    platform: Platform,
    mig_strategy: MigStrategy = "none",
    enable_dcgm_exporter: bool = True,
    enable_rdma: bool = False,
    use_host_mofed: bool = True,
    driver_version: str | None = None,
) -> dict[str, Any]:
    """Values of the NVIDIA GPU Operator chart. On EKS the AL2023 NVIDIA AMI carries the driver and the
    container toolkit: the operator must not install them. On-prem it manages the driver, with GPUDirect
    RDMA (``driver.rdma``) for RoCE/InfiniBand, using the host's or the Network Operator's MOFED."""
    values: dict[str, Any] = {
        "mig": {"strategy": mig_strategy},
        "migManager": {"enabled": mig_strategy != "none"},
        "dcgmExporter": {"enabled": enable_dcgm_exporter},
        "devicePlugin": {"enabled": True},
    }
    if platform == "eks":
        values["driver"] = {"enabled": False}
        values["toolkit"] = {"enabled": False}
        # Helm replaces a list: the chart's own tolerations (values.yaml v26.7.0), then the boot taint, so the
        # operands (device plugin, DCGM exporter, validator…) and NFD are up when the boot check passes.
        gpu_any = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
        control_plane = {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"}
        values["daemonsets"] = {"tolerations": [gpu_any, dict(BOOT_TOLERATION)]}
        values["node-feature-discovery"] = {"worker": {"tolerations": [control_plane, gpu_any, dict(BOOT_TOLERATION)]}}
    else:
        driver: dict[str, Any] = {"enabled": True, "rdma": {"enabled": enable_rdma, "useHostMofed": use_host_mofed}}
        if driver_version:
            driver["version"] = driver_version
        values["driver"] = driver
        values["toolkit"] = {"enabled": True}
    return values


def efa_device_plugin_values() -> dict[str, Any]:
    """The EFA device plugin runs on EFA nodes only and tolerates the GPU taint and the boot taint."""
    return {"nodeSelector": {LABEL_EFA: "true"}, "tolerations": [dict(GPU_TOLERATION), dict(BOOT_TOLERATION)]}


def fsx_csi_addon_configuration(region: str) -> dict[str, Any]:
    """Configuration of the aws-fsx-csi-driver add-on (its chart's values): the controller is told its
    region, because pods cannot reach the instance metadata service (IMDSv2, hop limit 1)."""
    return {"controller": {"region": region}}


def vpc_cni_addon_configuration() -> dict[str, Any]:
    """Configuration of the vpc-cni add-on: its network policy agent on, so the team namespaces'
    NetworkPolicies are enforced (a string, as the add-on's schema wants it). Source: Amazon EKS User Guide,
    "Restrict Pod network traffic with Kubernetes network policies" (VPC CNI 1.14 or later)."""
    return {"enableNetworkPolicy": "true"}


def network_operator_values() -> dict[str, Any]:
    """The Network Operator chart: node feature discovery (for NIC labels), no SR-IOV operator."""
    return {"nfd": {"enabled": True, "deployNodeFeatureRules": True}, "sriovNetworkOperator": {"enabled": False}}


def kueue_manager_config(wait_for_pods_ready: bool, pods_ready_timeout: str) -> dict[str, Any]:
    """Kueue's ``Configuration`` (config.kueue.x-k8s.io/v1beta2): the chart's defaults, JobSet and
    PyTorchJob integrations, and all-or-nothing admission (``waitForPodsReady``)."""
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        # Per-ClusterQueue usage and quota series (kueue_cluster_queue_resource_usage, …_nominal_quota): GPU-hours per
        # team on the monitoring dashboards.
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 5,
                "LocalQueue.kueue.x-k8s.io": 1,
                "ClusterQueue.kueue.x-k8s.io": 1,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "clientConnection": {"qps": 50, "burst": 100},
        "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/pytorchjob", "pod"]},
        # Quotas hold only if nothing bypasses the queues: in team namespaces, a job without a queue
        # label is suspended rather than run unmanaged.
        "manageJobsWithoutQueueName": True,
        "managedJobsNamespaceSelector": {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]},
    }
    if wait_for_pods_ready:
        config["waitForPodsReady"] = {
            "timeout": pods_ready_timeout,
            "blockAdmission": True,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600},
        }
    return config


def kueue_values(wait_for_pods_ready: bool, pods_ready_timeout: str) -> dict[str, Any]:
    """Values of the kueue chart: the manager configuration (as YAML text, as the chart takes it)."""
    return {
        "managerConfig": {"controllerManagerConfigYaml": to_yaml(kueue_manager_config(wait_for_pods_ready, pods_ready_timeout))}
    }
