"""KubernetesPlatform: what GPU training needs on a Kubernetes cluster, on EKS or on-prem.

The NVIDIA GPU Operator; the EFA device plugin on EKS, or the NVIDIA Network Operator with a RoCE
``NicClusterPolicy`` on-prem; a namespace per team with RBAC, shared-storage claims and an example
multi-node job; and Kueue with a ClusterQueue per team. It takes its Kubernetes provider through
``opts`` — :attr:`EksCluster.provider <gpucluster.components.eks_cluster.EksCluster.provider>`, or one built from
an on-prem cluster's kubeconfig — and never makes one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi

from gpucluster.components.efa_device_plugin import EfaDevicePlugin, EfaDevicePluginArgs
from gpucluster.components.gpu_operator import GpuOperator, GpuOperatorArgs
from gpucluster.components.kueue import Kueue, KueueArgs
from gpucluster.components.network_operator import NetworkOperator, NetworkOperatorArgs
from gpucluster.components.shared_storage import SharedStorage
from gpucluster.components.team_namespace import TeamNamespace, TeamNamespaceArgs, claim_name
from gpucluster.config.kubernetes import KubernetesSpec, TeamSpec
from gpucluster.config.node_group import NodeGroupSpec
from gpucluster.facts.catalog import load_catalog
from gpucluster.render.kubernetes import Platform
from gpucluster.render.training_job import SharedClaim, training_job

TOKEN = "gpucluster:index:KubernetesPlatform"
EXAMPLE_JOB_NAME = "example-training"


@dataclass
class KubernetesPlatformArgs:
    """Inputs of :class:`KubernetesPlatform`."""

    cluster_name: str
    """Cluster name: the default Kueue cohort and a label on team objects. Required."""

    kubernetes: KubernetesSpec
    """GPU Operator options, teams, Kueue settings and the example job. Required."""

    node_groups: Sequence[NodeGroupSpec] = ()
    """The resolved GPU node groups the cluster runs (flavors, the example job's shape). Default: none."""

    platform: Platform = "eks"
    """``eks`` or ``on-prem``. Default ``eks``."""

    shared_storage: Sequence[SharedStorage] = ()
    """The cluster's file systems (Lustre ones become claims in team namespaces). Default: none."""

    rdma_interfaces: list[str] = field(default_factory=list)
    """On-prem: the RoCE NICs for the RDMA shared device plugin. Default: every Mellanox Ethernet NIC."""

    driver_version: str | None = None
    """On-prem: the NVIDIA driver version the GPU Operator installs. Default: the chart's."""


def example_job(
    spec: KubernetesSpec, team: TeamSpec, groups: Sequence[NodeGroupSpec], storage: Sequence[SharedStorage]
) -> str | None:
    """The example training job of ``team``, or None when no node group has GPUs."""
    catalog = load_catalog()
    job = spec.example_job
    gpu_groups = [g for g in groups if catalog[g.instance_type].gpu_count]
    chosen = next((g for g in gpu_groups if g.name == job.node_group), None) if job.node_group else None
    group = chosen or next(iter(gpu_groups), None)
    if group is None:
        return None
    lustre = next((s for s in storage if s.fs_type == "lustre"), None) if team.mount_shared_storage else None
    levels = spec.kueue.topology_levels
    return training_job(
        name=EXAMPLE_JOB_NAME,
        namespace=team.effective_namespace,
        queue=team.name,
        group=group,
        facts=catalog[group.instance_type],
        nodes=job.nodes,
        image=job.image,
        # The closest network level above the node itself: nodes under one layer-3 switch, if they fit.
        preferred_topology=levels[-2] if len(levels) > 1 else None,
        claim=SharedClaim(claim_name(lustre), lustre.mount_point) if lustre else None,
    )


class KubernetesPlatform(pulumi.ComponentResource):
    """GPU Operator, EFA device plugin or Network Operator, team namespaces and Kueue."""

    gpu_operator: GpuOperator
    efa_device_plugin: EfaDevicePlugin | None
    network_operator: NetworkOperator | None
    teams: dict[str, TeamNamespace]
    kueue: Kueue

    def __init__(self, name: str, args: KubernetesPlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        spec = args.kubernetes
        catalog = load_catalog()
        child = pulumi.ResourceOptions(parent=self)
        op = spec.gpu_operator
        self.gpu_operator = GpuOperator(
            f"{name}-gpu-operator",
            GpuOperatorArgs(
                platform=args.platform,
                mig_strategy=op.mig_strategy,
                enable_dcgm_exporter=op.enable_dcgm_exporter,
                driver_version=args.driver_version,
            ),
            opts=child,
        )
        efa = any(g.enable_efa_support and catalog[g.instance_type].efa_supported for g in args.node_groups)
        self.efa_device_plugin = None
        self.network_operator = None
        if args.platform == "eks" and efa:
            self.efa_device_plugin = EfaDevicePlugin(f"{name}-efa", EfaDevicePluginArgs(), opts=child)
        if args.platform == "on-prem":
            self.network_operator = NetworkOperator(
                f"{name}-network-operator", NetworkOperatorArgs(rdma_interfaces=list(args.rdma_interfaces)), opts=child
            )

        self.teams = {
            team.name: TeamNamespace(
                f"{name}-team-{team.name}",
                TeamNamespaceArgs(
                    team=team,
                    shared_storage=list(args.shared_storage),
                    example_job=example_job(spec, team, args.node_groups, args.shared_storage),
                    labels={"gpucluster/cluster": args.cluster_name},
                ),
                opts=child,
            )
            for team in spec.teams
        }
        self.kueue = Kueue(
            f"{name}-kueue",
            KueueArgs(
                cohort=spec.kueue.cohort or args.cluster_name,
                kueue=spec.kueue,
                node_groups=list(args.node_groups),
                teams=list(spec.teams),
                team_namespaces={n: t.namespace for n, t in self.teams.items()},
            ),
            opts=child,
        )
        self.register_outputs({"teams": {n: t.namespace for n, t in self.teams.items()}})
