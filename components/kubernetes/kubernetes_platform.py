"""KubernetesPlatform: what GPU training needs on a Kubernetes cluster, on EKS or on-prem.

The NVIDIA GPU Operator; the EFA device plugin on EKS, or the NVIDIA Network Operator with a RoCE
``NicClusterPolicy`` on-prem; a namespace per team with RBAC, shared-storage claims and an example
multi-node job; and Kueue with a ClusterQueue per team. It takes its Kubernetes provider through
``opts`` — :attr:`EksCluster.provider <gpucluster.components.kubernetes.eks_cluster.EksCluster.provider>`, or one built from
an on-prem cluster's kubeconfig — and never makes one.
"""

from collections.abc import Sequence
from typing import Required

import pulumi
import pulumi_kubernetes as k8s

from gpucluster.components._shared.config_types import KubernetesConfig, NodeGroupConfig
from gpucluster.components.kubernetes._args import resolve_args
from gpucluster.components.kubernetes._helm import helm_release
from gpucluster.components.kubernetes._objects import place_objects
from gpucluster.components.kubernetes.efa_device_plugin import EfaDevicePlugin, EfaDevicePluginArgs
from gpucluster.components.kubernetes.gpu_operator import GpuOperator, GpuOperatorArgs
from gpucluster.components.kubernetes.kueue import Kueue, KueueArgs
from gpucluster.components.kubernetes.network_operator import NetworkOperator, NetworkOperatorArgs
from gpucluster.components.kubernetes.team_namespace import TeamNamespace, TeamNamespaceArgs, claim_name
from gpucluster.components.storage.shared_storage import SharedStorage, as_shared_storage
from gpucluster.config.errors import ConfigError, Finding, Level
from gpucluster.config.hybrid import HybridSpec
from gpucluster.config.kubernetes import TeamSpec
from gpucluster.config.slurm_health import nvidia_gpus
from gpucluster.facts.catalog import Catalog, load_catalog
from gpucluster.render.health import health_config
from gpucluster.render.hybrid.eks_nodes import CNI_NAMESPACE, cni_chart, cni_values
from gpucluster.render.kubernetes_health import sweep_objects
from gpucluster.render.kubernetes_tenancy import TeamTenancy, psa_version, team_pod_policy, team_pod_policy_binding
from gpucluster.render.slurm.agent import agent_bundle
from gpucluster.render.training_job import SharedClaim, training_job
from gpucluster.resolve.kubernetes import ResolvedKubernetes
from gpucluster_agents.health.config import to_json

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

    def __init__(
        self,
        name: str,
        args: KubernetesPlatformArgs,
        opts: pulumi.ResourceOptions | None = None,
        *,
        _resolved: ResolvedKubernetes | None = None,
        _catalog: Catalog | None = None,
        _hybrid: HybridSpec | None = None,
    ) -> None:
        """``_resolved``: GpuCluster's path, the stack's own resolved section (``args``' config fields
        are then not read); otherwise ``args`` is validated, checked and resolved here, before any resource.
        ``_hybrid``: the stack's hybrid section; with ``kubernetes`` set on EKS, the CNI of the hybrid nodes and the
        site's Kueue flavor and queues."""
        storage = as_shared_storage(args.get("shared_storage", []))
        platform = args.get("platform", "eks")
        if platform not in PLATFORMS:
            raise ConfigError(
                [Finding(Level.ERROR, "args.platform", f"is {platform!r}", fix=" or ".join(PLATFORMS), value=platform)],
                source="KubernetesPlatform args",
            )
        if _resolved is None:
            lustre = any(s.fs_type == "lustre" for s in storage)
            region = args.get("region", "us-east-1")
            _resolved, _ = resolve_args("KubernetesPlatform", args, _catalog or load_catalog(), region=region, lustre=lustre)
        resolved = _resolved
        if "provider" in args:
            opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(providers=[args["provider"]]))
        super().__init__(TOKEN, name, None, opts)
        spec = resolved.spec
        child = pulumi.ResourceOptions(parent=self)
        op = spec.gpu_operator
        self.gpu_operator: GpuOperator = GpuOperator(
            f"{name}-gpu-operator",
            GpuOperatorArgs(
                platform=platform,
                mig_strategy=op.mig_strategy,
                enable_dcgm_exporter=op.enable_dcgm_exporter,
                dcgm_health_counters=spec.health.dcgm_health_counters,
                driver_version=args.get("driver_version"),
            ),
            opts=child,
        )
        if spec.health.sweep and any(g.facts.gpus for g in resolved.node_groups):
            # After the operator: its RuntimeClass ``nvidia`` gives the sweep the GPUs.
            configs = {
                g.group.name: to_json(health_config(g.facts, efa_count=g.node.efa_interfaces))
                for g in resolved.node_groups
                if nvidia_gpus(g.facts)
            }
            objects = sweep_objects(spec.health, agent_bundle(), configs)
            place_objects(f"{name}-health", objects, self, depends_on=[self.gpu_operator])
        hybrid = _hybrid if _hybrid is not None and _hybrid.kubernetes is not None and platform == "eks" else None
        if hybrid is not None and hybrid.kubernetes is not None:
            # The VPC CNI keeps off hybrid nodes (its own anti-affinity); this one runs on them only.
            nodes = hybrid.kubernetes
            helm_release(f"{name}-hybrid-cni", nodes.cni, cni_chart(nodes), CNI_NAMESPACE[nodes.cni], self, cni_values(nodes))
        self.efa_device_plugin: EfaDevicePlugin | None = None
        self.network_operator: NetworkOperator | None = None
        if platform == "eks" and resolved.efa:
            self.efa_device_plugin = EfaDevicePlugin(f"{name}-efa", EfaDevicePluginArgs(), opts=child)
        if platform == "on-prem":
            self.network_operator = NetworkOperator(
                f"{name}-network-operator",
                NetworkOperatorArgs(rdma_interfaces=list(args.get("rdma_interfaces", []))),
                opts=child,
            )

        self.teams: dict[str, TeamNamespace] = self._teams(name, resolved, storage, platform)
        self.kueue: Kueue = Kueue(
            f"{name}-kueue",
            KueueArgs(
                cohort=resolved.cohort,
                kueue=spec.kueue,
                node_groups=[g.group for g in resolved.node_groups],
                teams=list(spec.teams),
                team_namespaces={n: t.namespace for n, t in self.teams.items()},
                hybrid=hybrid,
            ),
            opts=child,
        )
        names = list(self.teams)
        self.team_namespaces = pulumi.Output.all(*[t.namespace for t in self.teams.values()]).apply(
            lambda spaces: dict(zip(names, spaces, strict=True))
        )
        self.register_outputs({"teams": {n: t.namespace for n, t in self.teams.items()}, "teamNamespaces": self.team_namespaces})

    def _teams(
        self, name: str, resolved: ResolvedKubernetes, storage: Sequence[SharedStorage], platform: str
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
                opts=pulumi.ResourceOptions(parent=self),
            )
            for team in spec.teams
        }
        if teams:
            tenancy = [
                TeamTenancy(t.effective_namespace, t.effective_posix, tuple(teams[t.name].claims.values())) for t in spec.teams
            ]
            objects = [team_pod_policy(tenancy), team_pod_policy_binding([t.namespace for t in tenancy])]
            place_objects(f"{name}-tenancy", objects, self)
        return teams
