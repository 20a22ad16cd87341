"""What the Kubernetes layer renders, as pure functions: Helm values, Kueue and Network Operator custom
resources, node labels and taints, nodeadm user data and the example training job.

No Pulumi here: components place these values, tests validate them (Helm values against each pinned
chart's ``values.yaml``, custom resources against the pinned CRD schemas) and pin them in golden files.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from gpucluster.config.kubernetes import MigStrategy, flavor_name
from gpucluster.config.node_group import NodeGroupSpec
from gpucluster.facts.catalog import InstanceFacts
from gpucluster.facts.efa import efa_interface_count, interface_layout
from gpucluster.facts.nccl import nccl_environment
from gpucluster.render.core import USER_DATA_LIMIT, render, to_yaml

Platform = Literal["eks", "on-prem"]

KUEUE_API = "kueue.x-k8s.io/v1beta2"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
NIC_CLUSTER_POLICY_API = "mellanox.com/v1alpha1"

GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
# Every GPU node carries this taint; only pods that tolerate it (GPU work, GPU daemons) land there.
GPU_TAINT = {"key": GPU_RESOURCE, "value": "true", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
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


def node_labels(group: NodeGroupSpec, facts: InstanceFacts) -> dict[str, str]:
    """Kubernetes labels of a GPU node group's nodes: the group, its GPU flavor, EFA; then the user's."""
    labels = {LABEL_NODE_GROUP: group.name}
    if facts.gpu_count:
        labels[LABEL_GPU] = flavor_name(facts)
    if group.enable_efa_support and facts.efa_supported:
        labels[LABEL_EFA] = "true"
    return {**labels, **group.labels}


def node_taints(facts: InstanceFacts) -> list[dict[str, str]]:
    return [dict(GPU_TAINT)] if facts.gpu_count else []


def node_config(facts: InstanceFacts, instance_store_for_pods: bool) -> dict[str, Any]:
    """The nodeadm ``NodeConfig`` merged with EKS's own: RAID 0 over the instance-store NVMe disks for
    containerd and kubelet (container images of training jobs are large) when the node has them."""
    spec: dict[str, Any] = {}
    if instance_store_for_pods and facts.nvme_disk_count:
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
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
    else:
        driver: dict[str, Any] = {"enabled": True, "rdma": {"enabled": enable_rdma, "useHostMofed": use_host_mofed}}
        if driver_version:
            driver["version"] = driver_version
        values["driver"] = driver
        values["toolkit"] = {"enabled": True}
    return values


def efa_device_plugin_values() -> dict[str, Any]:
    """The EFA device plugin runs on EFA nodes only and tolerates the GPU taint."""
    return {"nodeSelector": {LABEL_EFA: "true"}, "tolerations": [dict(GPU_TOLERATION)]}


def fsx_csi_addon_configuration(region: str) -> dict[str, Any]:
    """Configuration of the aws-fsx-csi-driver add-on (its chart's values): the controller is told its
    region, because pods cannot reach the instance metadata service (IMDSv2, hop limit 1)."""
    return {"controller": {"region": region}}


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
        "metrics": {"bindAddress": ":8443"},
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


# --- Kueue objects --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Flavor:
    """A GPU flavor and what one GPU of it brings along (the other resources' quotas follow its GPUs).

    Shares are exact fractions: a p4d has 4 EFA interfaces for 8 GPUs, so 16 GPUs come with 8 of them.
    """

    name: str
    cpu_per_gpu: Fraction
    memory_gib_per_gpu: Fraction
    efa_per_gpu: Fraction

    @classmethod
    def of(cls, groups: Sequence[tuple[NodeGroupSpec, InstanceFacts]]) -> list[Flavor]:
        """One flavor per GPU model of ``groups``, in first-seen order; the largest share where several
        instance types have the model."""
        out: dict[str, Flavor] = {}
        for group, facts in groups:
            if not facts.gpu_count:
                continue
            efa = efa_interface_count(interface_layout(facts, bool(group.enable_efa_support), group.efa_layout))
            gpus = facts.gpu_count
            mine = cls(
                flavor_name(facts),
                Fraction(facts.vcpus, gpus),
                Fraction(facts.memory_mib // 1024, gpus),
                Fraction(efa, gpus),
            )
            seen = out.get(mine.name)
            if seen is not None:
                mine = cls(
                    mine.name,
                    max(seen.cpu_per_gpu, mine.cpu_per_gpu),
                    max(seen.memory_gib_per_gpu, mine.memory_gib_per_gpu),
                    max(seen.efa_per_gpu, mine.efa_per_gpu),
                )
            out[mine.name] = mine
        return list(out.values())

    def quota(self, gpus: int) -> dict[str, int | str]:
        """Nominal quota of every covered resource for ``gpus`` GPUs of this flavor (rounded up)."""
        return {
            "cpu": math.ceil(gpus * self.cpu_per_gpu),
            "memory": f"{math.ceil(gpus * self.memory_gib_per_gpu)}Gi",
            GPU_RESOURCE: gpus,
            EFA_RESOURCE: math.ceil(gpus * self.efa_per_gpu),
        }


def resource_flavor(flavor: Flavor, topology: str | None) -> dict[str, Any]:
    """Nodes of a GPU type; admitted pods get the GPU toleration; TAS over ``topology``."""
    spec: dict[str, Any] = {"nodeLabels": {LABEL_GPU: flavor.name}, "tolerations": [dict(GPU_TOLERATION)]}
    if topology:
        spec["topologyName"] = topology
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": flavor.name}, "spec": spec}


def topology(levels: Sequence[str], name: str = TOPOLOGY_NAME) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": level} for level in levels]},
    }


def covered_resources(flavors: Sequence[Flavor]) -> list[str]:
    """Every resource a GPU job requests must be covered by its ClusterQueue, or Kueue never admits it."""
    resources = ["cpu", "memory", GPU_RESOURCE]
    if any(f.efa_per_gpu for f in flavors):
        resources.append(EFA_RESOURCE)
    return resources


def cluster_queue(name: str, namespace: str, quota: Mapping[str, int], flavors: Sequence[Flavor], cohort: str) -> dict[str, Any]:
    """A team's ClusterQueue: nominal quota per flavor (the other resources follow its GPUs), in a cohort
    whose idle quota every team may borrow, and reclaimed from borrowers when the lender needs it."""
    covered = covered_resources(flavors)
    groups = []
    for f in flavors:
        amounts = f.quota(quota.get(f.name, 0))
        groups.append({"name": f.name, "resources": [{"name": r, "nominalQuota": amounts[r]} for r in covered]})
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "queueingStrategy": "BestEffortFIFO",
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": covered, "flavors": groups}] if flavors else [],
        },
    }


def local_queue(name: str, namespace: str, cluster_queue_name: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue_name},
    }


# --- teams ----------------------------------------------------------------------------------------------

# What a team member may do in the team's namespace: run and manage jobs, read their pods and logs,
# read queues and workloads. No access to Secrets, RBAC or the namespace itself.
TEAM_ROLE_RULES: list[dict[str, list[str]]] = [
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "delete", "get", "list", "watch", "patch", "update"]},
    {
        "apiGroups": ["jobset.x-k8s.io"],
        "resources": ["jobsets"],
        "verbs": ["create", "delete", "get", "list", "watch", "patch", "update"],
    },
    {
        "apiGroups": ["kubeflow.org"],
        "resources": ["pytorchjobs"],
        "verbs": ["create", "delete", "get", "list", "watch", "patch", "update"],
    },
    {"apiGroups": [""], "resources": ["pods", "pods/log", "events", "services"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "delete", "get", "list", "watch", "patch", "update"]},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues", "workloads"], "verbs": ["get", "list", "watch"]},
]


# --- on-prem networking -----------------------------------------------------------------------------------


def nic_cluster_policy(
    if_names: Sequence[str], resource_name: str = "rdma_shared_device_a", rdma_hca_max: int = 63
) -> dict[str, Any]:
    """The Network Operator's NicClusterPolicy for RoCE: an RDMA shared device plugin over the Mellanox
    (vendor 15b3) NICs named ``if_names``, Multus and the CNI plugins for a secondary network, and
    NVIDIA IPAM. The NIC driver (DOCA-OFED) is the host's."""
    image = {"repository": NETWORK_OPERATOR_IMAGES, "version": NETWORK_OPERATOR_COMPONENT_VERSION}
    selectors: dict[str, Any] = {"vendors": [MELLANOX_VENDOR], "linkTypes": ["ether"]}
    if if_names:
        selectors["ifNames"] = list(if_names)
    config = {"configList": [{"resourceName": resource_name, "rdmaHcaMax": rdma_hca_max, "selectors": selectors}]}
    return {
        "apiVersion": NIC_CLUSTER_POLICY_API,
        "kind": "NicClusterPolicy",
        "metadata": {"name": "nic-cluster-policy"},
        "spec": {
            "rdmaSharedDevicePlugin": {**image, "image": "k8s-rdma-shared-dev-plugin", "config": json.dumps(config, indent=2)},
            "secondaryNetwork": {
                "cniPlugins": {**image, "image": "plugins"},
                "multus": {**image, "image": "multus-cni"},
            },
            "nvIpam": {**image, "image": "nvidia-k8s-ipam", "enableWebhook": False},
        },
    }


# --- the example training job -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SharedClaim:
    """A team's PersistentVolumeClaim of a shared file system, and where the job mounts it."""

    claim: str
    mount_point: str


def training_job(
    *,
    name: str,
    namespace: str,
    queue: str,
    group: NodeGroupSpec,
    facts: InstanceFacts,
    nodes: int,
    image: str,
    preferred_topology: str | None,
    claim: SharedClaim | None,
) -> str:
    """A JobSet (jobset.x-k8s.io/v1alpha2) running ``torchrun`` on ``nodes`` whole nodes of ``group``:
    every GPU and EFA interface of each node (counted from the instance's own network cards), the
    NCCL/EFA environment, the shared file system, queued through Kueue and placed by TAS."""
    efa = bool(group.enable_efa_support) and facts.efa_supported
    efa_count = efa_interface_count(interface_layout(facts, efa, group.efa_layout))
    gpus = facts.gpu_count
    limits: dict[str, int | str] = {
        "cpu": facts.vcpus * 3 // 4,
        "memory": f"{facts.memory_mib * 3 // 4 // 1024}Gi",
        GPU_RESOURCE: gpus,
    }
    if efa_count:
        limits[EFA_RESOURCE] = efa_count
    script = f"{claim.mount_point}/train.py" if claim else "/workspace/train.py"
    rendezvous = f"{name}-workers-0-0.{name}"
    torchrun = (
        f"torchrun --nnodes={nodes} --nproc-per-node={gpus} --node-rank=${{JOB_COMPLETION_INDEX}} "
        f"--master-addr={rendezvous} --master-port=29500 {script}"
    )
    env = [{"name": k, "value": v} for k, v in nccl_environment(facts, efa, group.nccl_env).items()]
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    if claim:
        mounts.insert(0, {"name": "shared", "mountPath": claim.mount_point})
        volumes.insert(0, {"name": "shared", "persistentVolumeClaim": {"claimName": claim.claim}})
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "nodeSelector": {LABEL_NODE_GROUP: group.name},
        "tolerations": [dict(GPU_TOLERATION)] if gpus else [],
        "containers": [
            {
                "name": "trainer",
                "image": image,
                "command": ["bash", "-c", torchrun],
                "env": env,
                "resources": {"requests": dict(limits), "limits": dict(limits)},
                "volumeMounts": mounts,
            }
        ],
        "volumes": volumes,
    }
    pod: dict[str, Any] = {"spec": pod_spec}
    if preferred_topology:
        pod = {"metadata": {"annotations": {PREFERRED_TOPOLOGY: preferred_topology}}, **pod}
    job = {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "failurePolicy": {"maxRestarts": 3},
            "network": {"enableDNSHostnames": True},
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": nodes,
                            "completions": nodes,
                            "completionMode": "Indexed",
                            "backoffLimit": 0,
                            "template": pod,
                        }
                    },
                }
            ],
        },
    }
    # Every value goes through the YAML emitter (to_yaml), none is pasted into YAML text.
    return render(
        "kubernetes/training-job.yaml.j2",
        job=job,
        namespace=namespace,
        nodes=nodes,
        instance_type=facts.instance_type,
        efa_interfaces=efa_count,
    )
