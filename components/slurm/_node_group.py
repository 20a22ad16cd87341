"""Slurm's variant of the GPU node group: the launch-template core with the Slurm node profile and the
instance tags readable from IMDS (a node learns its Slurm node name from its tag). Dynamic groups stop
at the template (the head node's agent launches from it on demand); static groups add the Auto Scaling
group that keeps them running — Slurm's ``mode`` decides, not the caller."""

from __future__ import annotations

import pulumi

from gpucluster.components.compute._launch_template import SLURM, TOKEN, NodeGroupResource, NodeWiring
from gpucluster.resolve.compute.node_group import ResolvedNodeGroup


class SlurmNodeGroup(NodeGroupResource):
    """One Slurm compute group's launch template (and, for static groups, its Auto Scaling group)."""

    def __init__(
        self,
        name: str,
        group: ResolvedNodeGroup,
        wiring: NodeWiring,
        *,
        static: bool,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """``group``: the resolved group its template is laid out from; ``wiring``: the subnets, security groups,
        user data and instance profile it takes from the cluster; ``static``: the group's Slurm ``mode`` is
        static (add the Auto Scaling group that keeps its nodes running)."""
        super().__init__(TOKEN, name, None, opts)
        self._build(name, group, wiring, SLURM, auto_scaling=static)
