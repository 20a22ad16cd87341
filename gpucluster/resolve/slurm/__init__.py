"""Resolution of the Slurm section: partitions, the default partition, the head node's zone and subnet, protection."""

from __future__ import annotations

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.effective import effective_protect, head_zone, partition_of, slurm_groups
from gpucluster.config.slurm import SlurmSpec
from gpucluster.facts.catalog import Catalog


def resolve_slurm(spec: ClusterSpec, catalog: Catalog) -> SlurmSpec | None:
    """The Slurm section with every choice made: one entry per Slurm node group (config order) with its
    partition and exactly one default, the head node's zone (and subnet with your own VPC), protection."""
    slurm = spec.slurm
    if slurm is None:
        return None
    groups = [g for _, g, _ in slurm_groups(spec, catalog)]
    entries = [slurm.group_settings(g.name) for g in groups]
    explicit = [e.name for e in entries if e.default]
    default = explicit[0] if explicit else (entries[0].name if entries else None)
    entries = [e.model_copy(update={"partition": partition_of(e), "default": e.name == default}) for e in entries]
    zone = head_zone(spec, catalog)
    head = slurm.head_node
    update: dict[str, object] = {"availability_zone": zone}
    if not spec.network.create_vpc and head.subnet_id is None:
        update["subnet_id"] = next((s.id for s in spec.network.subnets if s.availability_zone == zone), None)
    return slurm.model_copy(
        update={
            "node_groups": tuple(entries),
            "head_node": head.model_copy(update=update),
            "protect_data": effective_protect(spec),
        }
    )
