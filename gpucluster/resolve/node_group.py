"""One node group resolved as a type: what its launch template is built from, every choice made.

``resolve_group`` fills the spec's "let gpucluster choose" fields but keeps the spec's Optional types;
components then re-asked ``bool(group.enable_efa_support)`` or ``image_id or parameter`` and could
diverge. :class:`ResolvedNodeGroup` states the decisions without Optional and carries the facts they
came from (the instance's catalog entry and its interface layout), so the launch-template core reads
values instead of re-deciding them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.node_group import NodeGroupSpec
from gpucluster.facts.catalog import Catalog, InstanceFacts
from gpucluster.facts.efa import InterfaceSlot, interface_layout
from gpucluster.resolve.cluster import resolve_group


@dataclass(frozen=True)
class ResolvedImage:
    """Where the AMI comes from: an AMI id, or an SSM parameter read at deploy time."""

    source: Literal["ami", "ssm-parameter"]
    value: str


@dataclass(frozen=True)
class ResolvedNodeGroup:
    """A node group after resolution: the resolved spec plus the decisions stated without Optional."""

    spec: NodeGroupSpec
    """The resolved spec (sizes, volumes, capacity and tags are read from it)."""
    facts: InstanceFacts
    interfaces: tuple[InterfaceSlot, ...]
    """The launch template's interfaces, primary first (EFA cards per ``efa_layout``)."""
    scheduler: Literal["slurm", "kubernetes", "none"]
    desired_size: int
    efa: bool
    create_placement_group: bool
    image: ResolvedImage

    @property
    def name(self) -> str:
        return self.spec.name


def resolve_node_group(group: NodeGroupSpec, catalog: Catalog, spec: ClusterSpec | None = None) -> ResolvedNodeGroup:
    """``group`` resolved (see :func:`resolve_group`) and stated as a :class:`ResolvedNodeGroup`. ``group`` must be valid."""
    group = resolve_group(group, catalog, spec)
    facts = catalog[group.instance_type]
    efa = bool(group.enable_efa_support)
    if group.image_id:
        image = ResolvedImage("ami", group.image_id)
    else:
        assert group.image_ssm_parameter is not None, "resolve_group names an image parameter when no AMI is given"
        image = ResolvedImage("ssm-parameter", group.image_ssm_parameter)
    assert group.scheduler in ("slurm", "kubernetes", "none") and group.desired_size is not None
    return ResolvedNodeGroup(
        spec=group,
        facts=facts,
        interfaces=interface_layout(facts, efa, group.efa_layout),
        scheduler=group.scheduler,
        desired_size=group.desired_size,
        efa=efa,
        create_placement_group=bool(group.create_placement_group),
        image=image,
    )
