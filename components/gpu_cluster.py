"""GpuCluster: the whole cluster from one resolved spec — network, then node groups."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.bootstrap import base_bootstrap
from components.gpu_node_group import GpuNodeGroup, GpuNodeGroupArgs
from components.naming import cluster_tags
from components.network import Network, NetworkArgs
from components.render import render_cloud_config
from components.shared_storage import SharedStorage
from components.spec.catalog import load_catalog
from components.spec.cluster import ClusterSpec
from components.spec.cost import Estimate, estimate
from components.spec.node_group import NodeGroupSpec

TOKEN = "gpucluster:index:GpuCluster"


@dataclass
class GpuClusterArgs:
    """Inputs of :class:`GpuCluster`."""

    spec: ClusterSpec
    """The resolved cluster spec (``components.spec.load_spec(...).spec``). Required."""


class GpuCluster(pulumi.ComponentResource):
    """A GPU cluster: :class:`Network` and one :class:`GpuNodeGroup` per node group."""

    network: Network
    node_groups: dict[str, GpuNodeGroup]
    user_data: dict[str, str]
    """Rendered cloud-init user data per node group (plain text)."""
    estimate: Estimate
    shared_storage: list[SharedStorage]
    """File systems nodes mount, in the one shape storage, Slurm and Kubernetes share."""

    def __init__(self, name: str, args: GpuClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        spec = args.spec
        catalog = load_catalog()
        tags = cluster_tags(spec.name, spec.tags)
        child = pulumi.ResourceOptions(parent=self)
        self.estimate = estimate(spec, catalog)

        # Render everything that can fail before the first resource is registered.
        self.user_data = {
            g.name: render_cloud_config(
                f"gpucluster {spec.name} / node group {g.name} ({g.instance_type})",
                base_bootstrap(spec.name, g, catalog[g.instance_type]),
            )
            for g in spec.node_groups
        }

        self.network = Network(
            f"{name}-network",
            NetworkArgs(network=spec.network, cluster_name=spec.name, region=spec.region, tags=tags),
            opts=child,
        )
        self.security_group_ids = [self.network.efa_security_group_id, self.network.node_security_group_id]
        self.shared_storage: list[SharedStorage] = []
        self.node_groups = {}
        # Groups a scheduler runs (slurm, kubernetes) are built by that scheduler's component; the
        # rest are plain Auto Scaling groups.
        for g in spec.groups_for("none"):
            self.node_groups[g.name] = GpuNodeGroup(
                f"{name}-{g.name}",
                GpuNodeGroupArgs(
                    node_group=g,
                    cluster_name=spec.name,
                    subnet_ids=self.subnets_for(g),
                    security_group_ids=self.security_group_ids,
                    user_data=self.user_data[g.name],
                    tags=tags,
                ),
                opts=child,
            )
        self.register_outputs(
            {
                "vpcId": self.network.vpc_id,
                "nodeGroups": {n: ng.launch_template_id for n, ng in self.node_groups.items()},
            }
        )

    def subnets_for(self, group: NodeGroupSpec) -> list[pulumi.Input[str]]:
        """The subnets a node group launches in: its own (BYO VPC) or the private subnet of each zone."""
        if group.subnet_ids:
            return list(group.subnet_ids)
        return [self.network.private_subnet_ids[z] for z in group.availability_zones]
