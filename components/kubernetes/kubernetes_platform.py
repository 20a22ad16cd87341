"""KubernetesPlatform: what GPU training needs on a Kubernetes cluster, on EKS or on-prem.

The NVIDIA GPU Operator; the EFA device plugin on EKS, or the NVIDIA Network Operator with a RoCE
``NicClusterPolicy`` on-prem; a namespace per team with RBAC, shared-storage claims and an example
multi-node job; and Kueue with a ClusterQueue per team. It takes its Kubernetes provider through
``opts`` — :attr:`EksCluster.provider <gpucluster.components.kubernetes.eks_cluster.EksCluster.provider>`, or one built from
an on-prem cluster's kubeconfig — and never makes one.
"""

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Required

import pulumi
import pulumi_kubernetes as k8s

from gpucluster.components._shared.build import adopt
from gpucluster.components._shared.config_types import KubernetesConfig, NodeGroupConfig
from gpucluster.components._shared.edge import Adapted, ArgsError, at_edge, required
from gpucluster.components.kubernetes._args import resolve_section
from gpucluster.components.kubernetes._helm import helm_release
from gpucluster.components.kubernetes._objects import place_objects
from gpucluster.components.kubernetes.efa_device_plugin import EfaDevicePlugin, EfaDevicePluginArgs
from gpucluster.components.kubernetes.gpu_operator import GpuOperator, GpuOperatorArgs
from gpucluster.components.kubernetes.kueue import Kueue, KueueArgs
from gpucluster.components.kubernetes.network_operator import NetworkOperator, NetworkOperatorArgs
from gpucluster.components.kubernetes.team_namespace import TeamNamespace, TeamNamespaceArgs, claim_name
from gpucluster.components.storage.shared_storage import SharedStorage, as_shared_storage
from gpucluster.config.errors import error, raise_for
from gpucluster.config.hybrid import HybridSpec
from gpucluster.config.kubernetes import TeamSpec
from gpucluster.facts.catalog import load_catalog
from gpucluster.render.hybrid.eks_nodes import CNI_NAMESPACE, cni_chart, cni_values
from gpucluster.render.kubernetes import Platform
from gpucluster.render.kubernetes.health import sweep_objects
from gpucluster.render.kubernetes.tenancy import TeamTenancy, psa_version, team_pod_policy, team_pod_policy_binding
from gpucluster.render.kubernetes.training_job import SharedClaim, training_job
from gpucluster.render.slurm.agent import agent_bundle
from gpucluster.resolve.kubernetes import ResolvedKubernetes
from gpucluster_agents.contract.health import to_json

TOKEN = "gpucluster:index:KubernetesPlatform"
EXAMPLE_JOB_NAME = "example-training"
PLATFORMS = ("eks", "on-prem")


class KubernetesPlatformArgs(KubernetesConfig, total=False):
    """Inputs of :class:`KubernetesPlatform`: the ``gpucluster:kubernetes`` section (GPU Operator, teams,
    Kueue, the example job; validated, checked and resolved like the stack's) and its wiring."""

    cluster_name: Required[str]
    """Cluster name: the default Kueue cohort and a label on team objects. Required."""

    node_groups: list[NodeGroupConfig]
    """The GPU node groups the cluster runs (Kueue flavors, EFA, the example job's shape), validated and
    resolved like a stack's node group. Default: none."""

    platform: str
    """``eks`` or ``on-prem``. Default ``eks``. (A ``str``, checked at construction: the schema analyzer
    has no ``Literal``.)"""

    provider: k8s.Provider
    """The Kubernetes provider of the cluster (``EksCluster.provider``, or one built from an on-prem
    kubeconfig). Default: the provider given through ``opts``."""

    region: str
    """AWS region of the cluster (stand-in values of Output fields). Default ``us-east-1``."""

    shared_storage: list[SharedStorage]
    """The cluster's file systems (Lustre ones become claims in team namespaces). Default: none."""

    rdma_interfaces: list[str]
    """On-prem: the RoCE NICs for the RDMA shared device plugin. Default: every Mellanox Ethernet NIC."""

    driver_version: str
    """On-prem: the NVIDIA driver version the GPU Operator installs. Default: the chart's."""


def example_job(resolved: ResolvedKubernetes, team: TeamSpec, storage: Sequence[SharedStorage]) -> str | None:
    """The example training job of ``team``, or None when no node group has GPUs."""
    job = resolved.example_job
    if job is None:
        return None
    lustre = next((s for s in storage if s.fs_type == "lustre"), None) if team.mount_shared_storage else None
    return training_job(
        name=EXAMPLE_JOB_NAME,
        namespace=resolved.team_namespaces[team.name],
        queue=team.name,
        group=job.node_group.node,
        nodes=job.nodes,
        image=job.image,
        preferred_topology=job.preferred_topology,
        claim=SharedClaim(claim_name(lustre), lustre.mount_point) if lustre else None,
        posix=team.effective_posix,
    )


class KubernetesPlatform(pulumi.ComponentResource):
    """GPU Operator, EFA device plugin or Network Operator, team namespaces and Kueue."""

    team_namespaces: pulumi.Output[dict[str, str]]
    """The Kubernetes namespace of each team, by team name."""
    # The child components are Python-only attributes, annotated where __init__ sets them (the schema
    # analyzer reads every class annotation as an output): gpu_operator, efa_device_plugin,
    # network_operator, teams, kueue.

    def __init__(self, name: str, args: KubernetesPlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        with at_edge("KubernetesPlatform"):
            adapted = from_args(args)  # every error before any resource
        if "provider" in args:
            opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(providers=[args["provider"]]))
        super().__init__(TOKEN, name, None, opts)
        adopt(self, build_kubernetes_platform(self, name, adapted.resolved, adapted.wiring))


def from_args(args: KubernetesPlatformArgs) -> "Adapted[ResolvedKubernetes, PlatformWiring]":
    """``args`` validated, checked and resolved as the stack's Kubernetes section is; errors name ``args.<field>``.
    The provider (``args.provider``) is not wiring: it reaches the children through the component's options."""
    storage = as_shared_storage(args.get("shared_storage", []))
    platform = args.get("platform", "eks")
    if platform not in PLATFORMS:
        raise ArgsError("KubernetesPlatform", [error("args.platform", f"is {platform!r}", " or ".join(PLATFORMS), platform)])
    raise_for(required(args, {"cluster_name": "clusterName"}), "KubernetesPlatform args")
    lustre = any(s.fs_type == "lustre" for s in storage)
    region = args.get("region", "us-east-1")
    resolved, _ = resolve_section(
        "KubernetesPlatform", args, load_catalog(), args_type=KubernetesPlatformArgs, region=region, lustre=lustre
    )
    wiring = PlatformWiring(
        platform="on-prem" if platform == "on-prem" else "eks",
        shared_storage=tuple(storage),
        driver_version=args.get("driver_version"),
        rdma_interfaces=tuple(args.get("rdma_interfaces", [])),
    )
    return Adapted(resolved, wiring)


@dataclass(frozen=True)
class PlatformWiring:
    """What the platform runs on and with: the platform, the cluster's file systems, the on-prem details."""

    platform: Platform = "eks"
    shared_storage: tuple[SharedStorage, ...] = ()
    driver_version: str | None = None
    rdma_interfaces: tuple[str, ...] = ()
    hybrid: HybridSpec | None = None
    """The stack's hybrid section; with ``kubernetes`` set on EKS, the CNI of the hybrid nodes and the site's Kueue
    flavor and queues (the stack's path only)."""


class PlatformParts:
    """What :func:`build_kubernetes_platform` made: the child components and the teams' namespaces."""

    gpu_operator: GpuOperator
    efa_device_plugin: EfaDevicePlugin | None
    network_operator: NetworkOperator | None
    teams: dict[str, TeamNamespace]
    kueue: Kueue
    team_namespaces: pulumi.Output[dict[str, str]]


def build_kubernetes_platform(
    parent: pulumi.ComponentResource, name: str, resolved: ResolvedKubernetes, wiring: PlatformWiring
) -> PlatformParts:
    """The GPU platform of ``resolved``, children of ``parent`` (its Kubernetes provider comes through ``parent``'s
    options); registers ``parent``'s outputs."""
    parts = PlatformParts()
    platform, storage = wiring.platform, list(wiring.shared_storage)
    spec = resolved.spec
    child = pulumi.ResourceOptions(parent=parent)
    op = spec.gpu_operator
    parts.gpu_operator = GpuOperator(
        f"{name}-gpu-operator",
        GpuOperatorArgs(
            platform=platform,
            mig_strategy=op.mig_strategy,
            enable_dcgm_exporter=op.enable_dcgm_exporter,
            dcgm_health_counters=spec.health.dcgm_health_counters,
            driver_version=wiring.driver_version,
        ),
        opts=child,
    )
    if spec.health.sweep and any(g.facts.gpus for g in resolved.node_groups):
        # After the operator: its RuntimeClass ``nvidia`` gives the sweep the GPUs.
        # the sweep runs in a pod, which does not see the node's mounts: no shared_fs check
        configs = {
            g.group.name: to_json(replace(g.node.health, shared_fs_mount=None, shared_fs_type="lustre"))
            for g in resolved.node_groups
            if g.node.health is not None
        }
        objects = sweep_objects(spec.health, agent_bundle(), configs)
        place_objects(f"{name}-health", objects, parent, depends_on=[parts.gpu_operator])
    hybrid = wiring.hybrid if wiring.hybrid is not None and wiring.hybrid.kubernetes is not None and platform == "eks" else None
    if hybrid is not None and hybrid.kubernetes is not None:
        # The VPC CNI keeps off hybrid nodes (its own anti-affinity); this one runs on them only.
        nodes = hybrid.kubernetes
        helm_release(f"{name}-hybrid-cni", nodes.cni, cni_chart(nodes), CNI_NAMESPACE[nodes.cni], parent, cni_values(nodes))
    parts.efa_device_plugin = parts.network_operator = None
    if platform == "eks" and resolved.efa:
        parts.efa_device_plugin = EfaDevicePlugin(f"{name}-efa", EfaDevicePluginArgs(), opts=child)
    if platform == "on-prem":
        parts.network_operator = NetworkOperator(
            f"{name}-network-operator",
            NetworkOperatorArgs(rdma_interfaces=list(wiring.rdma_interfaces)),
            opts=child,
        )

    parts.teams = _teams(parent, name, resolved, storage, platform)
    parts.kueue = Kueue(
        f"{name}-kueue",
        KueueArgs(
            cohort=resolved.cohort,
            kueue=spec.kueue,
            node_groups=[g.node for g in resolved.node_groups],
            teams=list(spec.teams),
            team_namespaces={n: t.namespace for n, t in parts.teams.items()},
            hybrid=hybrid,
        ),
        opts=child,
    )
    names = list(parts.teams)
    parts.team_namespaces = pulumi.Output.all(*[t.namespace for t in parts.teams.values()]).apply(
        lambda spaces: dict(zip(names, spaces, strict=True))
    )
    parent.register_outputs({"teams": {n: t.namespace for n, t in parts.teams.items()}, "teamNamespaces": parts.team_namespaces})
    return parts


def _teams(
    parent: pulumi.ComponentResource, name: str, resolved: ResolvedKubernetes, storage: Sequence[SharedStorage], platform: str
) -> dict[str, TeamNamespace]:
    """A TeamNamespace per team, and one admission policy for every team namespace: its pods run as the
    team's users and group and mount only the team's claims."""
    spec = resolved.spec
    teams = {
        team.name: TeamNamespace(
            f"{name}-team-{team.name}",
            TeamNamespaceArgs(
                team=team,
                shared_storage=storage,
                example_job=example_job(resolved, team, storage),
                labels={"gpucluster/cluster": resolved.cluster_name},
                pod_security_version=psa_version(spec.version if platform == "eks" else None),
                cluster_networks=list(resolved.cluster_networks),
            ),
            opts=pulumi.ResourceOptions(parent=parent),
        )
        for team in spec.teams
    }
    if teams:
        tenancy = [
            TeamTenancy(t.effective_namespace, t.effective_posix, tuple(teams[t.name].claims.values())) for t in spec.teams
        ]
        objects = [team_pod_policy(tenancy), team_pod_policy_binding([t.namespace for t in tenancy])]
        place_objects(f"{name}-tenancy", objects, parent)
    return teams
