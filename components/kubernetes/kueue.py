"""Kueue: quota, all-or-nothing admission and topology-aware placement for GPU jobs.

The kueue chart (0.19.2) with ``waitForPodsReady`` in its manager configuration, and JobSet (0.12.0),
the multi-node job API the example uses. Then a Topology over the nodes' network labels, a
ResourceFlavor per GPU type, a ClusterQueue per team — its GPU quota per flavor, in one cohort so idle
quota is borrowed and reclaimed — and the team's LocalQueue in its namespace. Takes its Kubernetes
provider through ``opts``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpucluster.components.kubernetes._helm import helm_release
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.hybrid import HybridSpec
from gpucluster.config.kubernetes import JOBSET_CHART, KUEUE_CHART, KueueSpec, TeamSpec
from gpucluster.facts.catalog import load_catalog
from gpucluster.render.hybrid.eks_nodes import site_flavor, site_queues, site_resource_flavor
from gpucluster.render.kubernetes import TOPOLOGY_NAME, kueue_values
from gpucluster.render.kubernetes.objects import Flavor, cluster_queue, local_queue, resource_flavor, topology
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup, resolve_node_group

TOKEN = "gpucluster:index:Kueue"


@dataclass
class KueueArgs:
    """Inputs of :class:`Kueue`."""

    cohort: str
    """Cohort of every team's ClusterQueue. Required (GpuCluster uses the cluster name)."""

    kueue: KueueSpec = field(default_factory=KueueSpec)
    """Topology levels and admission settings. Default: TAS over EKS's network labels, waitForPodsReady."""

    node_groups: Sequence[ResolvedNodeGroup | NodeGroupSpec] = ()
    """The GPU node groups: one ResourceFlavor per GPU type. Resolved groups (``KubernetesPlatform`` passes its
    own), or specs, which are resolved here as the stack would. Default: none."""

    teams: Sequence[TeamSpec] = ()
    """Teams: a ClusterQueue and a LocalQueue each. Default: none."""

    team_namespaces: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """Namespace per team name (a TeamNamespace's output, so queues wait for their namespace).
    Default: each team's configured namespace."""

    install_jobset: bool = True
    """Install the JobSet controller too. Default true."""

    hybrid: HybridSpec | None = None
    """A site whose servers are EKS Hybrid Nodes (``hybrid.kubernetes``): its own flavor and queues, so a workload
    runs on one site. Default: none."""


class Kueue(pulumi.ComponentResource):
    """Kueue and JobSet releases, the Topology, ResourceFlavors, ClusterQueues and LocalQueues."""

    objects: list[dict[str, Any]]
    """Every Kueue object, as computed (validated against the pinned CRDs in the tests)."""
    values: dict

    def __init__(self, name: str, args: KueueArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        groups = [g if isinstance(g, ResolvedNodeGroup) else resolve_node_group(g, load_catalog()) for g in args.node_groups]
        super().__init__(TOKEN, name, None, opts)
        self.values = kueue_values(args.kueue.wait_for_pods_ready, args.kueue.pods_ready_timeout)
        release = helm_release(f"{name}-release", "kueue", KUEUE_CHART, "kueue-system", self, self.values)
        if args.install_jobset:
            helm_release(f"{name}-jobset", "jobset", JOBSET_CHART, "jobset-system", self)
        after_release = pulumi.ResourceOptions(parent=self, depends_on=[release])

        flavors = Flavor.of(groups)
        levels = list(args.kueue.topology_levels)
        cluster_scoped = [topology(levels)] if levels else []
        cluster_scoped += [resource_flavor(f, TOPOLOGY_NAME if levels else None) for f in flavors]
        self.objects = list(cluster_scoped)
        for obj in cluster_scoped:
            self._create(name, obj, after_release)

        for team in args.teams:
            cq = cluster_queue(team.name, team.effective_namespace, team.gpu_quota, flavors, args.cohort)
            self.objects.append(cq)
            created = self._create(name, cq, after_release)
            lq = local_queue(team.name, team.effective_namespace, team.name)
            self.objects.append(lq)
            namespace = args.team_namespaces.get(team.name, team.effective_namespace)
            self._create(
                name,
                {**lq, "metadata": {**lq["metadata"], "namespace": namespace}},
                pulumi.ResourceOptions(parent=self, depends_on=[release, created]),
            )
        names = [f.name for f in flavors]
        if args.hybrid is not None and args.hybrid.kubernetes is not None:
            names.append(self._site(name, args, flavors, release))
        self.register_outputs({"chart": KUEUE_CHART[1], "version": KUEUE_CHART[2], "flavors": names})

    def _site(self, name: str, args: KueueArgs, cloud: list[Flavor], release: pulumi.Resource) -> str:
        """The hybrid site's flavor, its quota-holding ClusterQueue, and each team's queue to it."""
        if args.hybrid is None:
            raise ValueError("the site queues are made only for a hybrid site")
        flavor = site_flavor(args.hybrid, cloud)
        after_release = pulumi.ResourceOptions(parent=self, depends_on=[release])
        self.objects.append(site_resource_flavor(args.hybrid))
        self._create(name, self.objects[-1], after_release)
        queues = site_queues(args.hybrid, flavor, args.teams, args.cohort)
        self.objects.extend(queues)
        created: pulumi.Resource = release
        namespaces = {t.effective_namespace: t.name for t in args.teams}
        for obj in queues:
            meta = obj["metadata"]
            if obj["kind"] == "ClusterQueue":
                created = self._create(name, obj, after_release)
                continue
            namespace = args.team_namespaces.get(namespaces[meta["namespace"]], meta["namespace"])
            local = {**obj, "metadata": {**meta, "namespace": namespace}}
            self._create(
                f"{name}-{namespaces[meta['namespace']]}",
                local,
                pulumi.ResourceOptions(parent=self, depends_on=[release, created]),
            )
        return flavor.name

    def _create(self, name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
        meta = obj["metadata"]
        suffix = f"{obj['kind'].lower()}-{meta['name']}"
        return k8s.apiextensions.CustomResource(
            f"{name}-{suffix}",
            api_version=obj["apiVersion"],
            kind=obj["kind"],
            metadata=meta,
            spec=obj["spec"],
            opts=opts,
        )
