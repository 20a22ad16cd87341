"""The custom resources and RBAC the Kubernetes layer creates, as pure functions: Kueue's
ResourceFlavor per GPU type, Topology, ClusterQueue per team and LocalQueue; a team's Role rules; the
Network Operator's NicClusterPolicy for RoCE on-prem.

Tests validate each object against its pinned CRD schema (Kubernetes 1.33 schemas for built-in kinds)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from gpucluster.config.kubernetes import flavor_name
from gpucluster.render.kubernetes import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    GPU_TOLERATION,
    KUEUE_API,
    LABEL_GPU,
    MELLANOX_VENDOR,
    NETWORK_OPERATOR_COMPONENT_VERSION,
    NETWORK_OPERATOR_IMAGES,
    NIC_CLUSTER_POLICY_API,
    TOPOLOGY_NAME,
)
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup


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
    def of(cls, groups: Sequence[ResolvedNodeGroup]) -> list[Flavor]:
        """One flavor per GPU model of ``groups``, in first-seen order; the largest share where several
        instance types have the model."""
        out: dict[str, Flavor] = {}
        for group in groups:
            facts = group.facts
            if not facts.gpu_count:
                continue
            efa = group.efa_interfaces
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
