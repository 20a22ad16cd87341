"""Resolution of the Kubernetes section: every "let gpucluster choose" field of an EKS cluster and the
GPU platform on it, decided once, so ``EksCluster`` and ``KubernetesPlatform`` only place values.

The stack (``GpuCluster``) and a component used on its own both come through :func:`resolve_kubernetes`,
so they cannot differ in defaults: add-on versions per Kubernetes version, the system node group's
size, each GPU group's AMI type, capacity type and desired size, team namespaces, the Kueue cohort,
whether the EFA device plugin is needed and which node group the example job runs on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpucluster.config.compute.node_group import CapacitySpec, NodeGroupSpec
from gpucluster.config.effective import effective_desired
from gpucluster.config.kubernetes import KubernetesSpec, eks_ami_type
from gpucluster.facts.catalog import Catalog, InstanceFacts
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup, resolve_node_group

# EKS managed node groups' capacity types, by how gpucluster buys the instances.
CAPACITY_TYPES = {
    "on-demand": "ON_DEMAND",
    "capacity-reservation": "ON_DEMAND",
    "spot": "SPOT",
    "capacity-block": "CAPACITY_BLOCK",
}


@dataclass(frozen=True)
class ResolvedSystemNodeGroup:
    """The system node group with its size and AMI type decided."""

    instance_type: str
    ami_type: str
    min_size: int
    max_size: int
    desired_size: int
    disk_size_gib: int


@dataclass(frozen=True)
class ResolvedEksNodeGroup:
    """A ``scheduler: kubernetes`` node group as an EKS managed node group runs it."""

    group: NodeGroupSpec
    """The resolved node group (EFA, placement group and desired size decided)."""
    facts: InstanceFacts
    ami_type: str
    capacity_type: str
    desired_size: int
    efa: bool
    """The group uses EFA (asked for and the instance type has it)."""
    node: ResolvedNodeGroup
    """The group as every node group is resolved: its interface layout, EFA devices, NCCL environment."""
    template: ResolvedNodeGroup
    """What the group's launch template is built from: ``node`` with Spot left out (EKS buys Spot itself and refuses
    a template that asks for it)."""


@dataclass(frozen=True)
class ResolvedExampleJob:
    """The example training job: the GPU node group it is sized for, and where TAS should place it."""

    node_group: ResolvedEksNodeGroup
    nodes: int
    image: str
    preferred_topology: str | None


@dataclass(frozen=True)
class ResolvedKubernetes:
    """The Kubernetes section with every choice made (``spec`` keeps the user's settings as given)."""

    spec: KubernetesSpec
    cluster_name: str
    addon_versions: dict[str, str | None]
    """Every managed add-on to install, in install order, and its version (``None``: EKS's default)."""
    system_node_group: ResolvedSystemNodeGroup
    node_groups: tuple[ResolvedEksNodeGroup, ...]
    instance_store_for_pods: bool
    """nodeadm puts containerd and kubelet on a RAID 0 of the instance-store disks (false when the
    disks are NVMe scratch space)."""
    efa: bool
    """Some node group uses EFA: on EKS the EFA device plugin is installed."""
    cohort: str
    """Kueue cohort of every team's ClusterQueue."""
    team_namespaces: dict[str, str]
    """Namespace per team name."""
    example_job: ResolvedExampleJob | None
    """``None`` when no node group has GPUs."""
    cluster_networks: tuple[str, ...] = ()
    """The cluster's own networks (the VPC, a site's node and pod networks): a team pod reaches them only
    within its namespace (the private ranges are always left out of its internet egress)."""


def resolve_eks_group(group: NodeGroupSpec, catalog: Catalog) -> ResolvedEksNodeGroup:
    """``group`` (already resolved as a node group) as an EKS managed node group."""
    facts = catalog[group.instance_type]
    spot = group.capacity.type == "spot"
    node = resolve_node_group(group, catalog)
    template_group = group.model_copy(update={"capacity": CapacitySpec()}) if spot else group
    return ResolvedEksNodeGroup(
        group=group,
        facts=facts,
        ami_type=eks_ami_type(facts),
        capacity_type=CAPACITY_TYPES[group.capacity.type],
        desired_size=effective_desired(group),
        efa=bool(group.enable_efa_support) and facts.efa_supported,
        node=node,
        template=resolve_node_group(template_group, catalog) if spot else node,
    )


def resolve_kubernetes(
    spec: KubernetesSpec,
    groups: Sequence[NodeGroupSpec],
    catalog: Catalog,
    *,
    cluster_name: str,
    lustre: bool = False,
    instance_store_for_pods: bool = True,
    cluster_networks: Sequence[str] = (),
) -> ResolvedKubernetes:
    """Decide everything ``spec`` leaves open for the resolved ``groups`` it runs. ``lustre``: the
    cluster has an FSx for Lustre file system (the FSx CSI driver add-on is installed);
    ``cluster_networks``: the VPC's and a site's CIDRs."""
    system = spec.system_node_group
    eks_groups = tuple(resolve_eks_group(g, catalog) for g in groups)
    return ResolvedKubernetes(
        spec=spec,
        cluster_name=cluster_name,
        addon_versions=spec.addon_versions_for(lustre),
        system_node_group=ResolvedSystemNodeGroup(
            instance_type=system.instance_type,
            ami_type=eks_ami_type(catalog[system.instance_type]),
            min_size=system.min_size,
            max_size=system.max_size,
            desired_size=system.effective_desired_size,
            disk_size_gib=system.disk_size_gib,
        ),
        node_groups=eks_groups,
        instance_store_for_pods=instance_store_for_pods,
        efa=any(g.efa for g in eks_groups),
        cohort=spec.kueue.cohort or cluster_name,
        team_namespaces={t.name: t.effective_namespace for t in spec.teams},
        example_job=_example_job(spec, eks_groups),
        cluster_networks=tuple(dict.fromkeys(cluster_networks)),
    )


def _example_job(spec: KubernetesSpec, groups: Sequence[ResolvedEksNodeGroup]) -> ResolvedExampleJob | None:
    job = spec.example_job
    gpu_groups = [g for g in groups if g.facts.gpu_count]
    chosen = next((g for g in gpu_groups if g.group.name == job.node_group), None) if job.node_group else None
    group = chosen or next(iter(gpu_groups), None)
    if group is None:
        return None
    levels = spec.kueue.topology_levels
    return ResolvedExampleJob(
        node_group=group,
        nodes=job.nodes,
        image=job.image,
        # The closest network level above the node itself: nodes under one layer-3 switch, if they fit.
        preferred_topology=levels[-2] if len(levels) > 1 else None,
    )
