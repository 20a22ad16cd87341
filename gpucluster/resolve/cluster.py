"""Resolve a validated spec into a :class:`ResolvedCluster`: every "let gpucluster choose" field decided once.

:func:`resolve` is the one place the instance catalog is read after the config checks: renderers and components
take the :class:`ResolvedCluster` (its node groups carry their facts, interface layout, NCCL environment and
mounts; its Slurm section its groups' partitions) and never the catalog.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.effective import burst_group_names, effective_flow_log_protect, effective_protect_data
from gpucluster.config.network import NetworkSpec
from gpucluster.config.slurm import SLURM_VERSION, UBUNTU_RELEASE, SlurmSpec
from gpucluster.config.slurm.containers import containers_wanted
from gpucluster.config.slurm.health import nvidia_gpus
from gpucluster.facts.catalog import Catalog
from gpucluster.facts.images import default_image_parameter
from gpucluster.resolve.compute.node_group import (
    ResolvedNodeGroup,
    SlurmGroup,
    as_slurm_group,
    bakes,
    resolve_group,
    resolve_node_group,
    slurm_release,
)
from gpucluster.resolve.cost.estimate import Estimate, estimate
from gpucluster.resolve.kubernetes import ResolvedKubernetes, resolve_kubernetes
from gpucluster.resolve.monitoring import ResolvedMonitoring, resolve_monitoring
from gpucluster.resolve.slurm import resolve_slurm
from gpucluster.resolve.slurm.identity import ResolvedHome, ResolvedIdentity, ResolvedLogin
from gpucluster.resolve.slurm.people import resolve_people
from gpucluster.resolve.slurm.teams import ResolvedTeams, resolve_teams
from gpucluster.resolve.storage import ResolvedStorage, resolve_storage, resolved_storage


@dataclass(frozen=True)
class ResolvedSlurm:
    """The Slurm section resolved: its node groups with their partitions (exactly one default), the head node's
    zone (and subnet with your own VPC), protection."""

    spec: SlurmSpec
    """The resolved section (head node, accounting, health, power saving … as the renderers read them)."""
    node_groups: tuple[SlurmGroup, ...]
    """Every Slurm node group of the cluster, config order."""
    protect: bool
    head_zone: str
    """The head node's zone (``slurm.headNode.availabilityZone``, else the first Slurm group's)."""
    head_image_parameter: str
    """The SSM parameter of the head node's default image (Ubuntu for its instance type's architecture), used
    unless ``slurm.headNode.imageId`` is set."""
    version: str = SLURM_VERSION
    """The Slurm version the cluster's files are rendered for: the head node's release's (Ubuntu 24.04's 23.11), or a
    hybrid site's own controller's (``hybrid.controller.slurmVersion``), which then reads them."""
    identity: ResolvedIdentity | None = None
    """Who the people are (``slurm.identity``); ``None`` = decided: no users (admins only, through IAM)."""
    login: ResolvedLogin | None = None
    """Login nodes (``slurm.loginNodes``); ``None`` = decided: none."""
    home: ResolvedHome | None = None
    """The shared ``/home`` (``slurm.home``, present when ``identity`` is); ``None`` = decided: none."""
    teams: ResolvedTeams | None = None
    """The teams (``slurm.teams``) with their limits, fair share and QOS decided; ``None`` = decided: no teams."""

    @property
    def partitions(self) -> dict[str, str]:
        """Partition → node group, config order."""
        return {g.partition: g.name for g in self.node_groups}


@dataclass(frozen=True)
class ResolvedCluster:
    """A cluster after resolution: the resolved spec's sections plus the typed decisions the renderers read."""

    spec: ClusterSpec
    """The resolved spec (every default filled), for the sections not stated as types yet."""
    node_groups: tuple[ResolvedNodeGroup, ...]
    """Every node group, config order; the Slurm ones are :class:`SlurmGroup`."""
    slurm: ResolvedSlurm | None
    kubernetes: ResolvedKubernetes | None
    """The Kubernetes section resolved for the ``scheduler: kubernetes`` groups (add-on versions, the system node
    group, each GPU group as EKS runs it, teams, the example job), or ``None`` without one."""
    estimate: Estimate
    """What the cluster costs (and draws) per hour and month, from the catalog's and the price data's figures."""
    storage: ResolvedStorage | None
    """The storage section with the file system's zone, subnet and admin hosts decided, or ``None`` without one."""
    protect_data: bool
    """The cluster's data, keys and logs are protected and retained on delete (``storage.protectData``, on unless
    turned off)."""
    monitoring: ResolvedMonitoring | None = None
    """Metrics, logs and alerts (``monitoring``), or ``None`` when off or with no scheduler to monitor."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def region(self) -> str:
        return self.spec.region

    @property
    def zones(self) -> tuple[str, ...]:
        return tuple(self.spec.zones)

    @property
    def tags(self) -> dict[str, str]:
        return dict(self.spec.tags)

    @property
    def network(self) -> NetworkSpec:
        return self.spec.network

    def node_group(self, name: str) -> ResolvedNodeGroup:
        for g in self.node_groups:
            if g.name == name:
                return g
        raise KeyError(f"cluster {self.name!r} has no node group {name!r}")

    def groups_for(self, scheduler: str) -> Iterator[ResolvedNodeGroup]:
        return (g for g in self.node_groups if g.scheduler == scheduler)

    @property
    def burst_groups(self) -> tuple[ResolvedNodeGroup, ...]:
        """The node groups a hybrid site bursts into (:func:`gpucluster.config.effective.burst_group_names`)."""
        return tuple(self.node_group(n) for n in burst_group_names(self.spec))


def with_groups(cluster: ResolvedCluster, change: Callable[[ResolvedNodeGroup], ResolvedNodeGroup]) -> ResolvedCluster:
    """``cluster`` with ``change`` applied to each node group (its Slurm section's groups the same objects)."""
    groups = tuple(change(g) for g in cluster.node_groups)
    slurm = cluster.slurm
    if slurm is not None:
        slurm = replace(slurm, node_groups=tuple(g for g in groups if isinstance(g, SlurmGroup)))
    return replace(cluster, node_groups=groups, slurm=slurm)


def resolve_spec(spec: ClusterSpec, catalog: Catalog) -> ClusterSpec:
    """``spec`` with node-group choices made and the network's zones listed. ``spec`` must be valid."""
    groups = tuple(resolve_group(g, catalog, spec) for g in spec.node_groups)
    flow_logs = spec.network.flow_logs.model_copy(update={"protect": effective_flow_log_protect(spec)})
    network = spec.network.model_copy(update={"availability_zones": tuple(spec.zones), "flow_logs": flow_logs})
    resolved = spec.model_copy(update={"node_groups": groups, "network": network})
    resolved = resolved.model_copy(update={"storage": resolve_storage(resolved, catalog)})
    return resolved.model_copy(update={"slurm": resolve_slurm(resolved, catalog)})


def resolve(spec: ClusterSpec, catalog: Catalog) -> ResolvedCluster:
    """``spec`` resolved (:func:`resolve_spec`) and stated as a :class:`ResolvedCluster`. ``spec`` must be valid."""
    spec = resolve_spec(spec, catalog)
    slurm = spec.slurm
    groups: list[ResolvedNodeGroup] = []
    for g in spec.node_groups:
        group = resolve_node_group(g, catalog, spec)
        if slurm is not None and group.scheduler == "slurm":
            entry = slurm.group_settings(g.name)
            containers = containers_wanted(slurm.containers, entry.containers, nvidia_gpus(group.facts))
            group = as_slurm_group(group, entry, bakes(spec, g.name), containers)
        groups.append(group)
    resolved_slurm = None
    if slurm is not None:
        slurm_groups = tuple(g for g in groups if isinstance(g, SlurmGroup))
        zone = slurm.head_node.availability_zone
        if zone is None:  # resolve_slurm chose one: a valid spec has a zone
            raise ValueError(
                f"cluster {spec.name!r}: no availability zone for the Slurm head node; set slurm.headNode.availabilityZone"
            )
        image = default_image_parameter(catalog[slurm.head_node.instance_type], UBUNTU_RELEASE)
        site = spec.hybrid.controller if spec.hybrid is not None else None
        version = site.slurm_version if site is not None else SLURM_VERSION
        identity, login, home = resolve_people(spec, slurm, catalog, zone)
        resolved_slurm = ResolvedSlurm(
            slurm,
            slurm_groups,
            bool(slurm.protect_data),
            zone,
            image,
            version,
            identity=identity,
            login=login,
            home=home,
            teams=resolve_teams(slurm, spec, catalog),
        )
    return ResolvedCluster(
        spec,
        tuple(groups),
        resolved_slurm,
        _kubernetes(spec, groups, catalog),
        estimate(spec, catalog),
        resolved_storage(spec),
        effective_protect_data(spec),
        resolve_monitoring(spec, catalog),
    )


def _kubernetes(spec: ClusterSpec, groups: list[ResolvedNodeGroup], catalog: Catalog) -> ResolvedKubernetes | None:
    """The Kubernetes section of resolved ``spec`` for its ``scheduler: kubernetes`` groups: the FSx CSI driver with
    Lustre, pods on the instance store unless NVMe scratch takes it, team pods kept inside the VPC's and a site's
    networks."""
    if spec.kubernetes is None:
        return None
    storage, hybrid = spec.storage, spec.hybrid
    site = list(hybrid.on_prem_cidrs) if hybrid else []
    if hybrid and hybrid.kubernetes:
        site += [*hybrid.kubernetes.remote_node_cidrs, *hybrid.kubernetes.remote_pod_cidrs]
    return resolve_kubernetes(
        spec.kubernetes,
        [g.spec for g in groups if g.scheduler == "kubernetes"],
        catalog,
        cluster_name=spec.name,
        lustre=storage is not None and storage.lustre is not None,
        instance_store_for_pods=storage is None or storage.nvme_scratch is None,
        cluster_networks=[spec.network.vpc_cidr, *site],
    )


__all__ = ["ResolvedCluster", "ResolvedSlurm", "resolve", "resolve_group", "resolve_spec", "slurm_release", "with_groups"]
