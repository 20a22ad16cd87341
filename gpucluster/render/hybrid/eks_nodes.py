"""EKS Hybrid Nodes, as pure functions: what the site's GPU servers need to join this cluster's EKS control plane
(a ``nodeadm`` ``NodeConfig`` and the install steps), the CNI that runs on them, and the Kueue objects that keep
every workload on one site.

No Pulumi here: :mod:`gpucluster.components.kubernetes._eks_hybrid` and the Kubernetes platform place these values once
AWS knows the ARNs; tests validate them (Kueue objects against the pinned CRDs, the script with ``bash -n``, the
``NodeConfig`` against the fields nodeadm documents) and pin them in golden files.

**Why a workload never mixes sites.** The site's nodes form one Kueue ResourceFlavor (``<site>-<gpuType>``,
selecting ``eks.amazonaws.com/compute-type: hybrid`` and ``gpucluster/site: <site>``), and that flavor appears only
in ClusterQueues of its own (``<team>-<site>``), never next to the cloud flavors. A workload is admitted by the one
ClusterQueue its LocalQueue names, so all of its podsets get flavors of one site; within a podset Kueue assigns a
single flavor per resource group anyway (every pod of the podset gets that flavor's node selector), and
``flavorFungibility`` only chooses whether to try the next flavor or to borrow/preempt in the current one — it never
splits a podset. The cloud flavors select ``gpucluster/gpu``, which hybrid nodes never carry (their labels are set
here, by their own kubelet), so a cloud flavor never lands a pod on the site either.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from gpucluster.config.errors import ConfigError, Finding, Level
from gpucluster.config.hybrid import HybridNodesSpec, HybridSpec
from gpucluster.config.kubernetes import TeamSpec
from gpucluster.facts.downloads import NODEADM_URL
from gpucluster.render.core import render, to_yaml
from gpucluster.render.kubernetes import GPU_RESOURCE, GPU_TAINT, GPU_TOLERATION, KUEUE_API
from gpucluster.render.kubernetes.objects import Flavor, local_queue

NODEADM_API = "node.eks.aws/v1alpha1"
COMPUTE_TYPE_LABEL = "eks.amazonaws.com/compute-type"
"""The label EKS puts on every hybrid node (``hybrid``); the VPC CNI's DaemonSet keeps off nodes that carry it."""
HYBRID = "hybrid"
LABEL_SITE = "gpucluster/site"

# The CNIs EKS supports on hybrid nodes, pinned (EKS user guide, "Configure CNI for hybrid nodes": Cilium 1.16.x,
# Calico 3.29.x at the time of writing).
CILIUM_CHART = ("https://helm.cilium.io", "cilium", "1.16.7")
CALICO_CHART = ("https://docs.tigera.io/calico/charts", "tigera-operator", "v3.29.2")
CNI_NAMESPACE = {"cilium": "kube-system", "calico": "tigera-operator"}
# Cilium hands each node a /25 of the pod networks (128 addresses: ample for GPU servers' pods).
POD_BLOCK_PREFIX = 25

# CPU and memory a site GPU brings to its Kueue quota when no cloud node group has the same GPU model: an
# 8-GPU server with 192 CPUs and 2 TiB (the p5 / DGX H100 class).
DEFAULT_CPU_PER_GPU = Fraction(24)
DEFAULT_MEMORY_GIB_PER_GPU = Fraction(256)

# nodeadm install's containerd source per OS: Ubuntu's own package, Docker's repository on RHEL (RHEL ships none),
# the distribution's on AL2023.
CONTAINERD_SOURCE = {"ubuntu24": "distro", "ubuntu22": "distro", "rhel9": "docker", "al2023": "distro"}
NODE_NAME_PLACEHOLDER = "@NODE_NAME@"
ACTIVATION_ID_PLACEHOLDER = "@ACTIVATION_ID@"
ACTIVATION_CODE_PLACEHOLDER = "@ACTIVATION_CODE@"
FLAVOR_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
KUBERNETES_VERSION_RE = re.compile(r"^1\.\d{1,2}$")
ARN_RE = re.compile(r"^arn:aws[a-z-]*:[a-z0-9-]+:[a-z0-9-]*:\d{12}:[A-Za-z0-9/_+=.@:-]+$")


def hybrid_affinity() -> dict[str, Any]:
    """Pods with this affinity run on hybrid nodes only."""
    term = {"matchExpressions": [{"key": COMPUTE_TYPE_LABEL, "operator": "In", "values": [HYBRID]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def hybrid_node_labels(hybrid: HybridSpec) -> dict[str, str]:
    """Labels the site's kubelets register with (EKS adds ``eks.amazonaws.com/compute-type: hybrid`` itself)."""
    return {LABEL_SITE: hybrid.site, "gpucluster/node-group": hybrid.site}


def cni_values(nodes: HybridNodesSpec) -> dict[str, Any]:
    """Helm values of the CNI on the hybrid nodes: overlay (VXLAN), pod addresses from ``remotePodCidrs``, and
    every component pinned to hybrid nodes (cloud nodes keep the VPC CNI)."""
    if not nodes.remote_pod_cidrs:
        finding = Finding(
            Level.ERROR,
            "gpucluster:hybrid.kubernetes.remotePodCidrs",
            f"is empty: {nodes.cni} on the hybrid nodes needs the pod networks it hands addresses out of",
            fix="list the site's pod networks (routable from the VPC, not overlapping it), e.g. remotePodCidrs: [10.96.0.0/16]",
            value=[],
            code="hybrid-pod-cidrs-missing",
        )
        raise ConfigError([finding])
    pods = list(nodes.remote_pod_cidrs)
    if nodes.cni == "cilium":
        return {
            "affinity": hybrid_affinity(),
            "ipam": {
                "mode": "cluster-pool",
                "operator": {"clusterPoolIPv4PodCIDRList": pods, "clusterPoolIPv4MaskSize": POD_BLOCK_PREFIX},
            },
            "operator": {"affinity": hybrid_affinity(), "unmanagedPodWatcher": {"restart": False}},
            "envoy": {"enabled": False},
        }
    on_hybrid = {"spec": {"template": {"spec": {"nodeSelector": {COMPUTE_TYPE_LABEL: HYBRID}}}}}
    pools = [
        {
            "cidr": cidr,
            "blockSize": 26,
            "encapsulation": "VXLAN",
            "natOutgoing": "Enabled",
            "nodeSelector": f'{COMPUTE_TYPE_LABEL} == "{HYBRID}"',
        }
        for cidr in pods
    ]
    return {
        "installation": {
            "enabled": True,
            "cni": {"type": "Calico", "ipam": {"type": "Calico"}},
            "calicoNetwork": {"bgp": "Disabled", "ipPools": pools},
            "controlPlaneReplicas": 1,
            "controlPlaneNodeSelector": {COMPUTE_TYPE_LABEL: HYBRID},
            "calicoNodeDaemonSet": on_hybrid,
            "csiNodeDriverDaemonSet": on_hybrid,
            "calicoKubeControllersDeployment": on_hybrid,
            "typhaDeployment": on_hybrid,
        },
        "nodeSelector": {COMPUTE_TYPE_LABEL: HYBRID},
    }


def cni_chart(nodes: HybridNodesSpec) -> tuple[str, str, str]:
    return CILIUM_CHART if nodes.cni == "cilium" else CALICO_CHART


# --- nodeadm ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HybridNodeIdentity:
    """What AWS knows once the stack is up: the hybrid node role and, with Roles Anywhere, the anchor and profile."""

    role_arn: str
    trust_anchor_arn: str | None = None
    profile_arn: str | None = None


def node_config(hybrid: HybridSpec, *, cluster_name: str, region: str, identity: HybridNodeIdentity) -> dict[str, Any]:
    """The ``NodeConfig`` every site node runs ``nodeadm init`` with; the node's own name (Roles Anywhere) or the
    site's activation (SSM) is filled in by ``install.sh`` from its arguments."""
    creds = hybrid.credentials
    if creds.type == "rolesanywhere":
        if not (identity.trust_anchor_arn and identity.profile_arn):
            raise ValueError("a Roles Anywhere NodeConfig needs the trust anchor and profile ARNs")
        credential: dict[str, Any] = {
            "iamRolesAnywhere": {
                "nodeName": NODE_NAME_PLACEHOLDER,
                "trustAnchorArn": identity.trust_anchor_arn,
                "profileArn": identity.profile_arn,
                "roleArn": identity.role_arn,
                "certificatePath": creds.certificate_path,
                "privateKeyPath": creds.private_key_path,
            }
        }
    else:
        credential = {"ssm": {"activationCode": ACTIVATION_CODE_PLACEHOLDER, "activationId": ACTIVATION_ID_PLACEHOLDER}}
    for arn in (identity.role_arn, identity.trust_anchor_arn, identity.profile_arn):
        if arn is not None and not ARN_RE.match(arn):
            raise ValueError(f"{arn!r} is not an ARN; refusing to render it into a NodeConfig")
    labels = ",".join(f"{k}={v}" for k, v in hybrid_node_labels(hybrid).items())
    taint = f"{GPU_TAINT['key']}={GPU_TAINT['value']}:{GPU_TAINT['effect']}"
    return {
        "apiVersion": NODEADM_API,
        "kind": "NodeConfig",
        "spec": {
            "cluster": {"name": cluster_name, "region": region},
            "hybrid": credential,
            "kubelet": {"flags": [f"--node-labels={labels}", f"--register-with-taints={taint}"]},
        },
    }


def node_name_prefix(hybrid: HybridSpec) -> str:
    """What every hybrid node's name (its certificate's common name) starts with: ``<certificateCn>-``. The hybrid
    node role trusts only certificates so named (``gpucluster.components.kubernetes._eks_hybrid``)."""
    return f"{hybrid.credentials.certificate_cn}-"


def site_nodes(hybrid: HybridSpec) -> HybridNodesSpec:
    """The site's EKS Hybrid Nodes (``hybrid.kubernetes``); a ValueError for a site without them."""
    if hybrid.kubernetes is None:
        raise ValueError("the hybrid section has no kubernetes part: no EKS Hybrid Nodes to render")
    return hybrid.kubernetes


def render_hybrid_nodes_bundle(
    hybrid: HybridSpec, *, cluster_name: str, region: str, kubernetes_version: str, identity: HybridNodeIdentity
) -> dict[str, str]:
    """The files an administrator copies to each site node: ``nodeConfig.yaml`` and ``install.sh`` (nodeadm
    install for the site's OS and credential provider, then ``nodeadm init``)."""
    nodes = site_nodes(hybrid)
    if not KUBERNETES_VERSION_RE.match(kubernetes_version):
        raise ValueError(f"Kubernetes version {kubernetes_version!r} is not MAJOR.MINOR")
    config = node_config(hybrid, cluster_name=cluster_name, region=region, identity=identity)
    creds = hybrid.credentials
    script = render(
        "hybrid/eks/install.sh.j2",
        cluster_name=cluster_name,
        site=hybrid.site,
        node_os=nodes.node_os,
        kubernetes_version=kubernetes_version,
        credential_provider="iam-ra" if creds.type == "rolesanywhere" else "ssm",
        containerd_source=CONTAINERD_SOURCE[nodes.node_os],
        certificate_path=creds.certificate_path,
        node_name_prefix=node_name_prefix(hybrid),
        nodeadm=nodes.nodeadm,
        nodeadm_url=NODEADM_URL.format(version=nodes.nodeadm.version if nodes.nodeadm else "", arch="${arch}"),
        node_name_placeholder=NODE_NAME_PLACEHOLDER,
        activation_id_placeholder=ACTIVATION_ID_PLACEHOLDER,
        activation_code_placeholder=ACTIVATION_CODE_PLACEHOLDER,
    )
    return {"nodeConfig.yaml": to_yaml(config) + "\n", "install.sh": script}


# --- Kueue ------------------------------------------------------------------------------------------------


def site_flavor_name(hybrid: HybridSpec) -> str:
    """``<site>-<gpuType>``: a Kubernetes object name, so ``gpuType`` is refused unless it makes one."""
    nodes = site_nodes(hybrid)
    name = f"{hybrid.site}-{nodes.gpu_type}"
    if not FLAVOR_NAME_RE.match(name) or len(name) > 63:
        finding = Finding(
            Level.ERROR,
            "gpucluster:hybrid.kubernetes.gpuType",
            f"makes the site's Kueue flavor {name!r}, which is not a Kubernetes name",
            fix="use lowercase letters, digits and -, e.g. gpuType: h100",
            value=nodes.gpu_type,
            code="hybrid-gpu-type-name",
        )
        raise ConfigError([finding])
    return name


def site_flavor(hybrid: HybridSpec, cloud: Sequence[Flavor]) -> Flavor:
    """The site's flavor; CPU and memory per GPU follow a cloud flavor of the same GPU model when there is one."""
    gpu_type = site_nodes(hybrid).gpu_type
    same = next((f for f in cloud if f.name == gpu_type), None)
    cpu = same.cpu_per_gpu if same else DEFAULT_CPU_PER_GPU
    memory = same.memory_gib_per_gpu if same else DEFAULT_MEMORY_GIB_PER_GPU
    return Flavor(site_flavor_name(hybrid), cpu, memory, Fraction(0))


SITE_RESOURCES = ["cpu", "memory", GPU_RESOURCE]


def site_resource_flavor(hybrid: HybridSpec) -> dict[str, Any]:
    """The site's nodes: hybrid nodes labelled with the site; admitted pods tolerate the GPU taint."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": {"name": site_flavor_name(hybrid)},
        "spec": {
            "nodeLabels": {COMPUTE_TYPE_LABEL: HYBRID, LABEL_SITE: hybrid.site},
            "tolerations": [dict(GPU_TOLERATION)],
        },
    }


def _site_queue(name: str, flavor: Flavor, gpus: int, cohort: str, namespace: str | None) -> dict[str, Any]:
    amounts = flavor.quota(gpus)
    spec: dict[str, Any] = {
        "cohortName": cohort,
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        "resourceGroups": [
            {
                "coveredResources": list(SITE_RESOURCES),
                "flavors": [
                    {"name": flavor.name, "resources": [{"name": r, "nominalQuota": amounts[r]} for r in SITE_RESOURCES]}
                ],
            }
        ],
    }
    if namespace is not None:
        spec["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def site_queues(hybrid: HybridSpec, flavor: Flavor, teams: Sequence[TeamSpec], cohort: str) -> list[dict[str, Any]]:
    """The site's quota and each team's way to it, in the cohort of the cloud queues.

    ``<site>``: a ClusterQueue no namespace submits to, holding the site's GPUs as nominal quota. ``<team>-<site>``
    per team: the site flavor only, no quota of its own, borrowing the site's from the cohort; its LocalQueue is
    ``<site>`` in the team's namespace. A workload sent to ``<site>`` runs on the site's nodes, one sent to the
    team's cloud queue on cloud nodes: never both."""
    site = hybrid.site
    objects = [_site_queue(site, flavor, site_nodes(hybrid).gpus, cohort, None)]
    for team in teams:
        objects.append(_site_queue(f"{team.name}-{site}", flavor, 0, cohort, team.effective_namespace))
        objects.append(local_queue(site, team.effective_namespace, f"{team.name}-{site}"))
    return objects
