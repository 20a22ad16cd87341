"""Kubernetes section of the spec: an EKS cluster, the NVIDIA GPU Operator, teams and Kueue.

Every pinned version below names its source. Node groups with ``scheduler: kubernetes`` (the default
when ``gpucluster:kubernetes`` is the only scheduler) become EKS managed node groups; everything else
here describes the cluster around them.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from gpucluster.config.base import SpecModel, check_image, check_label_key, check_name
from gpucluster.config.images import GpuNodeUpdateSpec
from gpucluster.config.kubernetes.health import NODE_MONITORING_AGENT_ADDON, KubernetesHealthSpec
from gpucluster.config.kubernetes.team_posix import TeamPosix, TeamPosixSpec
from gpucluster.facts.catalog import InstanceFacts

# EKS standard (1.32–1.34) and extended (1.30–1.31) support. Source: Amazon EKS User Guide,
# "Understand the Kubernetes version lifecycle on EKS" (awsdocs/amazon-eks-user-guide,
# latest/ug/versioning/kubernetes-versions.adoc). 1.29 is gone: its extended support ended on 2026-03-23,
# and the tenancy rests on what 1.30 made generally available — ValidatingAdmissionPolicy v1 (KEP-3488) and
# the node name in a pod's service-account token (feature ServiceAccountTokenPodNodeInfo, beta and on by
# default from 1.30, GA in 1.32: kubernetes pkg/features/kube_features.go).
SUPPORTED_EKS_VERSIONS = ("1.30", "1.31", "1.32", "1.33", "1.34")
DEFAULT_EKS_VERSION = "1.33"

# "You must have VPC CNI version 1.18.5 or later for EFA-only interfaces"; multi-EFA nodes (p4d, p5)
# need 1.7.10 or later. Source: Amazon EKS User Guide, "Run machine learning training on Amazon EKS
# with Elastic Fabric Adapter" (latest/ug/ml/node-efa.adoc).
VPC_CNI_MIN_EFA_ONLY = (1, 18, 5)
VPC_CNI_MIN_EFA = (1, 7, 10)

# Managed add-ons gpucluster installs, and the versions it pins per Kubernetes version range. Source:
# Amazon EKS User Guide, the add-on version tables of "Amazon VPC CNI" (managing-vpc-cni.adoc:
# v1.20.1-eksbuild.3 for 1.27–1.33) and "CoreDNS" (managing-coredns.adoc, per Kubernetes version).
# A Kubernetes version outside every range of an add-on gets no pin: EKS installs the version it marks
# default for that Kubernetes version (always compatible), and the plan says so (``addon-unpinned``).
# Kubernetes 1.34 has no sourced pin yet, so vpc-cni and coredns take EKS's 1.34 default there.
CORE_ADDONS = ("vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent")
FSX_CSI_ADDON = "aws-fsx-csi-driver"
KNOWN_ADDONS = (*CORE_ADDONS, FSX_CSI_ADDON, NODE_MONITORING_AGENT_ADDON)
# {add-on: ((first Kubernetes version, last Kubernetes version, pinned version), ...)}
ADDON_PINS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "vpc-cni": (("1.27", "1.33", "v1.20.1-eksbuild.3"),),
    "coredns": (
        ("1.29", "1.32", "v1.11.4-eksbuild.22"),
        ("1.33", "1.33", "v1.12.3-eksbuild.1"),
    ),
}
VPC_CNI_VERSION = ADDON_PINS["vpc-cni"][0][2]
ADDON_VERSION_RE = r"^v\d+\.\d+\.\d+-eksbuild\.\d+$"

# Helm charts, pinned. Values are checked against each chart's values.yaml in the tests.
GPU_OPERATOR_CHART = ("https://helm.ngc.nvidia.com/nvidia", "gpu-operator", "v26.7.0")
NETWORK_OPERATOR_CHART = ("https://helm.ngc.nvidia.com/nvidia", "network-operator", "26.4.1")
EFA_DEVICE_PLUGIN_CHART = ("https://aws.github.io/eks-charts", "aws-efa-k8s-device-plugin", "v0.5.30")
FLUENT_BIT_CHART = ("https://aws.github.io/eks-charts", "aws-for-fluent-bit", "0.2.0")
KUEUE_CHART = ("oci://registry.k8s.io/kueue/charts", "kueue", "0.19.2")
JOBSET_CHART = ("oci://registry.k8s.io/jobset/charts", "jobset", "0.12.0")

# GPUs with Multi-Instance GPU. Source: NVIDIA Multi-Instance GPU User Guide, "Supported GPUs" and
# "Deployment Considerations" (A100, A30, H100, H20, H200, B200, GB200, B300).
MIG_CAPABLE_GPUS = ("A100", "A30", "H100", "H20", "H200", "B200", "GB200", "B300", "GB300")

# The labels EKS puts on nodes from EC2 DescribeInstanceTopology (layer 1 is the farthest, at the
# spine; layer 3 the closest), then the node itself: Kueue's Topology levels, broadest first.
AWS_TOPOLOGY_LEVELS = (
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-3",
    "kubernetes.io/hostname",
)

# Namespaces gpucluster or Kubernetes own: no team may take them.
RESERVED_NAMESPACES = (
    "default",
    "kube-system",
    "kube-public",
    "kube-node-lease",
    "gpu-operator",
    "kueue-system",
    "nvidia-network-operator",
)

AccessPolicy = Literal["AmazonEKSClusterAdminPolicy", "AmazonEKSAdminPolicy", "AmazonEKSEditPolicy", "AmazonEKSViewPolicy"]
PRINCIPAL_ARN = r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$"
DURATION = r"^\d+(s|m|h)$"
LogType = Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]
MigStrategy = Literal["none", "single", "mixed"]

# An AWS Deep Learning Container (PyTorch training, EC2 flavour): CUDA, NCCL, the EFA installer and the
# aws-ofi-nccl plugin. Source: AWS Deep Learning Containers release notes, PyTorch 2.7 training.
EXAMPLE_IMAGE = "public.ecr.aws/deep-learning-containers/pytorch-training:2.7.1-gpu-py312-cu128-ubuntu22.04-ec2"


def flavor_name(facts: InstanceFacts) -> str:
    """The Kueue ResourceFlavor of a GPU type: its model in lower case (``H100`` → ``h100``)."""
    return re.sub(r"[^a-z0-9]+", "-", (facts.accelerator_model or facts.instance_type).lower()).strip("-")


def eks_ami_type(facts: InstanceFacts) -> str:
    """The EKS-optimized Amazon Linux 2023 AMI type for an instance: NVIDIA, Neuron or standard."""
    arm = "arm64" in facts.architectures and "x86_64" not in facts.architectures
    kinds = {a.kind for a in facts.accelerators}
    if "gpu" in kinds:
        return "AL2023_ARM_64_NVIDIA" if arm else "AL2023_x86_64_NVIDIA"
    if "neuron" in kinds:
        return "AL2023_x86_64_NEURON"
    return "AL2023_ARM_64_STANDARD" if arm else "AL2023_x86_64_STANDARD"


def minor_tuple(version: str) -> tuple[int, int] | None:
    """``1.33`` → ``(1, 33)``; ``None`` when it is not a Kubernetes minor version."""
    match = re.fullmatch(r"(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def pinned_addon_version(addon: str, kubernetes_version: str) -> str | None:
    """gpucluster's pin of ``addon`` for ``kubernetes_version``; ``None``: EKS's default for it."""
    minor = minor_tuple(kubernetes_version)
    if minor is None:
        return None
    for first, last, pin in ADDON_PINS.get(addon, ()):
        low, high = minor_tuple(first), minor_tuple(last)
        if low is not None and high is not None and low <= minor <= high:
            return pin
    return None


def version_tuple(version: str) -> tuple[int, ...]:
    """``v1.20.1-eksbuild.3`` → ``(1, 20, 1)``."""
    match = re.match(r"^v?(\d+)\.(\d+)\.(\d+)", version)
    return tuple(int(p) for p in match.groups()) if match else ()


class EndpointSpec(SpecModel):
    """Who reaches the Kubernetes API server, and from where."""

    private_access: bool = True
    """Serve the API inside the VPC (nodes, and `pulumi up` run from the VPC or a VPN). Default true."""

    public_access: bool = False
    """Also serve the API on the internet. Default false: a private endpoint only. When on, list the
    networks that may connect in ``publicAccessCidrs``."""

    public_access_cidrs: tuple[str, ...] = ()
    """CIDRs allowed to reach a public endpoint, e.g. ``[203.0.113.0/24]``. Default: none. Only with
    ``publicAccess``; ``0.0.0.0/0`` opens the API to the internet (a warning)."""

    @field_validator("public_access_cidrs")
    @classmethod
    def _cidrs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        import ipaddress

        for cidr in value:
            try:
                ipaddress.ip_network(cidr, strict=True)
            except ValueError:
                raise ValueError(f"{cidr!r} is not a network CIDR such as 203.0.113.0/24") from None
        return value


class AccessEntrySpec(SpecModel):
    """An IAM principal allowed into the cluster (EKS access entry, API authentication mode)."""

    principal_arn: str = Field(pattern=PRINCIPAL_ARN)
    """IAM role or user ARN, e.g. ``arn:aws:iam::123456789012:role/platform-admins``. Required."""

    policies: tuple[AccessPolicy, ...] = ()
    """EKS access policies to associate, e.g. ``[AmazonEKSClusterAdminPolicy]``. Default: none (the
    principal gets only the Kubernetes groups below, bound by RBAC)."""

    namespaces: tuple[str, ...] = ()
    """Limit the access policies to these namespaces. Default: none (cluster-wide)."""

    kubernetes_groups: tuple[str, ...] = ()
    """Kubernetes groups the principal belongs to, for RBAC (a team's ``groups``). Default: none."""


class SystemNodeGroupSpec(SpecModel):
    """The small CPU node group that runs cluster services (CoreDNS, operators, Kueue)."""

    instance_type: str = "m7i.xlarge"
    """EC2 instance type. Default ``m7i.xlarge`` (4 vCPU, 16 GiB)."""

    min_size: int = Field(default=2, ge=1)
    """Fewest nodes. Default 2 (CoreDNS and the webhooks stay up while a node is replaced)."""

    max_size: int = Field(default=4, ge=1)
    """Most nodes. Default 4."""

    desired_size: int | None = Field(default=None, ge=1)
    """Nodes to run now. Default: ``minSize``."""

    disk_size_gib: int = Field(default=50, ge=20, le=16384)
    """Root volume size. Default 50 GiB."""

    @property
    def effective_desired_size(self) -> int:
        return self.min_size if self.desired_size is None else self.desired_size


class GpuOperatorSpec(SpecModel):
    """The NVIDIA GPU Operator (Helm chart v26.7.0). On EKS the AL2023 NVIDIA AMI already carries the
    driver and container toolkit, so the operator runs the device plugin, GPU feature discovery, DCGM
    exporter and MIG manager only."""

    mig_strategy: MigStrategy = "none"
    """How MIG slices are advertised: ``none`` (whole GPUs), ``single`` (every slice as
    ``nvidia.com/gpu``) or ``mixed`` (``nvidia.com/mig-<profile>``). Default ``none``. Needs GPUs with
    MIG (A100, H100, H200, B200…)."""

    enable_dcgm_exporter: bool = True
    """Export GPU metrics (DCGM exporter, for Prometheus). Default true."""


class TeamSpec(SpecModel):
    """A team: a namespace, RBAC for its people, a LocalQueue, and a GPU quota per GPU flavor."""

    name: str
    """Short name, unique in the cluster (``research``); names its ClusterQueue and LocalQueue. Required."""

    namespace: str | None = None
    """Kubernetes namespace of the team. Default: the team name."""

    gpu_quota: dict[str, int] = Field(default_factory=dict)
    """GPUs guaranteed per GPU flavor (the lower-case GPU model of a Kubernetes node group: ``h100``,
    ``a100``, ``l40s``), e.g. ``{h100: 64}``. Idle quota of other teams can be borrowed. Default: none
    (the team only borrows)."""

    groups: tuple[str, ...] = ()
    """Kubernetes groups bound to the team's Role (give them to IAM principals with
    ``accessEntries[].kubernetesGroups``). Default: none."""

    users: tuple[str, ...] = ()
    """Kubernetes user names bound to the team's Role. Default: none."""

    mount_shared_storage: bool = True
    """A PersistentVolumeClaim for each shared Lustre file system of the cluster in the team's
    namespace. Default true."""

    posix: TeamPosixSpec = TeamPosixSpec()
    """The user IDs the team's pods may run as (``uidFirst``, ``uidCount``) and the team's group (``gid``);
    the namespace's admission policy refuses pods outside them. Default: 10000 IDs chosen from the team's
    name in a reserved band (2000200000–2147349999), the group being the first of them."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value, "team name")

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", value):
            raise ValueError(f"namespace {value!r} is not a DNS label: lowercase letters, digits and '-', at most 63")
        return value

    @field_validator("gpu_quota")
    @classmethod
    def _quota(cls, value: dict[str, int]) -> dict[str, int]:
        for flavor, gpus in value.items():
            if gpus < 0:
                raise ValueError(f"gpuQuota {flavor!r} is {gpus}; a quota is a number of GPUs, 0 or more")
        return value

    @property
    def effective_namespace(self) -> str:
        return self.namespace or self.name

    @property
    def effective_posix(self) -> TeamPosix:
        """The team's user ID range and group ID, every default decided (from the team's name)."""
        return self.posix.resolve(self.name)


class KueueSpec(SpecModel):
    """Kueue (Helm chart 0.19.2): quota per team, all-or-nothing admission and topology-aware placement."""

    topology_levels: tuple[str, ...] = Field(default=AWS_TOPOLOGY_LEVELS, min_length=1, max_length=16)
    """Node labels of the Topology for Topology Aware Scheduling, broadest first. Default: EKS's
    ``topology.k8s.aws/network-node-layer-1..3`` and ``kubernetes.io/hostname``."""

    wait_for_pods_ready: bool = True
    """All-or-nothing admission: a workload whose pods are not all ready within the timeout is evicted
    and requeued, so half-started jobs do not hold GPUs. Default true."""

    pods_ready_timeout: str = Field(default="10m", pattern=DURATION)
    """How long a workload's pods may take to be ready (``10m``, ``1h``). Default ``10m``."""

    cohort: str | None = None
    """Cohort all team ClusterQueues share, so idle quota can be borrowed. Default: the cluster name."""

    @field_validator("topology_levels")
    @classmethod
    def _levels(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for level in value:
            check_label_key(level, "topology level")
        return value


class ExampleJobSpec(SpecModel):
    """The example multi-node training job written to each team's namespace (a ConfigMap to apply)."""

    image: str = EXAMPLE_IMAGE
    """Container image with PyTorch, NCCL and the aws-ofi-nccl plugin. Default: the AWS Deep Learning
    Container for PyTorch 2.7.1 training on EC2."""

    nodes: int = Field(default=2, ge=1)
    """Nodes the job spans. Default 2."""

    node_group: str | None = None
    """The Kubernetes node group to size the job for (GPUs, EFA interfaces). Default: the first."""

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        return check_image(value)


class KubernetesSpec(SpecModel):
    """An Amazon EKS cluster for the node groups with ``scheduler: kubernetes``, with the GPU Operator,
    the EFA device plugin, Kueue and a namespace per team."""

    version: str = DEFAULT_EKS_VERSION
    """Kubernetes version of the EKS cluster. Default ``1.33``. Supported: 1.30–1.34."""

    endpoint: EndpointSpec = EndpointSpec()
    """Where the API server is reachable. Default: inside the VPC only."""

    access_entries: tuple[AccessEntrySpec, ...] = ()
    """IAM principals let into the cluster (API authentication mode). Default: only the identity that
    runs ``pulumi up`` (cluster admin)."""

    secrets_kms_key_arn: str | None = Field(default=None, pattern=r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[0-9a-f-]+$")
    """KMS key that envelope-encrypts Kubernetes Secrets. Default: a new key with yearly rotation.
    Secrets are always encrypted."""

    enabled_log_types: tuple[LogType, ...] = ("api", "audit", "authenticator")
    """Control-plane logs sent to CloudWatch. Default ``[api, audit, authenticator]``."""

    addon_versions: dict[str, str] = Field(default_factory=dict)
    """EKS add-on versions overriding gpucluster's pins (``vpc-cni`` v1.20.1-eksbuild.3 for Kubernetes
    1.27–1.33, ``coredns`` per Kubernetes version; none yet for 1.34, which gets EKS's defaults), e.g. ``{kube-proxy: v1.33.3-eksbuild.6}``. Add-ons without a version get
    EKS's default for the cluster version. Default: none."""

    system_node_group: SystemNodeGroupSpec = SystemNodeGroupSpec()
    """CPU nodes for cluster services. Default: 2 × ``m7i.xlarge``."""

    gpu_node_update: GpuNodeUpdateSpec = GpuNodeUpdateSpec()
    """How GPU managed node groups roll to a new image: strategy ``MINIMAL``, 10 % at a time. Default: that."""

    gpu_operator: GpuOperatorSpec = GpuOperatorSpec()
    """NVIDIA GPU Operator options. Default: whole GPUs, DCGM exporter on."""

    teams: tuple[TeamSpec, ...] = ()
    """Teams sharing the GPUs. Default: none (no queues; GPUs are used without quota)."""

    kueue: KueueSpec = KueueSpec()
    """Queueing options. Default: all-or-nothing admission and TAS over EKS's topology labels."""

    example_job: ExampleJobSpec = ExampleJobSpec()
    """The example training job each team gets. Default: 2 nodes of the first Kubernetes node group."""

    health: KubernetesHealthSpec = KubernetesHealthSpec()
    """GPU node health: the EKS node monitoring agent with auto repair, DCGM error counters, the sweep
    DaemonSet. Default: all on."""

    @field_validator("addon_versions")
    @classmethod
    def _addon_versions(cls, value: dict[str, str]) -> dict[str, str]:
        for name, version in value.items():
            if name not in KNOWN_ADDONS:
                raise ValueError(f"add-on {name!r} is not one gpucluster installs; known: {', '.join(KNOWN_ADDONS)}")
            if not re.fullmatch(ADDON_VERSION_RE, version):
                raise ValueError(f"{name} version {version!r} is not an EKS add-on version such as v1.20.1-eksbuild.3")
        return value

    def addon_versions_for(self, lustre: bool) -> dict[str, str | None]:
        """Every add-on to install and its version (``None``: EKS's default for the cluster version)."""
        pinned = {name: pinned_addon_version(name, self.version) for name in ADDON_PINS}
        names = (*CORE_ADDONS, FSX_CSI_ADDON) if lustre else CORE_ADDONS
        if self.health.node_monitoring_agent:
            names = (*names, NODE_MONITORING_AGENT_ADDON)
        return {name: self.addon_versions.get(name, pinned.get(name)) for name in names}
