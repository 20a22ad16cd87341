"""The whole cluster: what one stack config describes."""

from __future__ import annotations

from pydantic import Field, field_validator

from gpucluster.config.base import FIX_MARK, SpecModel, check_name
from gpucluster.config.hybrid import HybridSpec
from gpucluster.config.kubernetes import KubernetesSpec
from gpucluster.config.network import NetworkSpec
from gpucluster.config.node_group import NodeGroupSpec
from gpucluster.config.slurm import SlurmSpec
from gpucluster.config.storage import StorageSpec


class ClusterSpec(SpecModel):
    """A GPU cluster. Each field is one ``gpucluster:<field>`` key of the stack config, except
    ``region``, which is ``aws:region``."""

    name: str
    """Cluster name, used as the prefix of every resource name and in tags. Default: the stack name."""

    region: str = Field(pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d$")
    """AWS region, from ``aws:region``. Required."""

    network: NetworkSpec = NetworkSpec()
    """Where nodes live. Default: a new VPC with a private subnet in each zone a node group uses."""

    node_groups: tuple[NodeGroupSpec, ...] = Field(min_length=1)
    """The accelerated node groups. Required: at least one."""

    storage: StorageSpec | None = None
    """Shared file system (FSx for Lustre, sized from the workload), data bucket, NVMe scratch.
    Default: none."""

    slurm: SlurmSpec | None = None
    """A Slurm cluster for the node groups with ``scheduler: slurm``: a head node (slurmctld, optional
    slurmdbd, the node agent), a partition per group, dynamic nodes launched on demand. Default: none
    (no Slurm)."""

    kubernetes: KubernetesSpec | None = None
    """An Amazon EKS cluster for the node groups with ``scheduler: kubernetes``: GPU Operator, EFA device
    plugin, Kueue and a namespace per team. Default: none (no Kubernetes)."""

    hybrid: HybridSpec | None = None
    """An on-premises site that bursts into the Slurm node groups (its own slurmctld stays the controller) or
    joins the EKS cluster with EKS Hybrid Nodes: the link, the credentials, the bundle for the site. Default:
    none."""

    tags: dict[str, str] = Field(default_factory=dict)
    """Tags on every taggable resource, merged with the cluster tags gpucluster adds. Default: none."""

    @field_validator("region", mode="before")
    @classmethod
    def _region_as_written(cls, value: object) -> object:
        # Blanks would be stripped here, but the AWS provider takes aws:region as written (and asks another region).
        if isinstance(value, str) and value != value.strip():
            raise ValueError(f"region {value!r} has blanks around it: the AWS provider uses it as written{FIX_MARK}"
                             "write the region alone, e.g. us-east-1")  # fmt: skip
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value, "cluster name")

    def node_group(self, name: str) -> NodeGroupSpec:
        for group in self.node_groups:
            if group.name == name:
                return group
        raise KeyError(name)

    @property
    def schedulers(self) -> list[str]:
        """The schedulers this cluster configures (``slurm``, ``kubernetes``), in that order."""
        return [name for name in ("slurm", "kubernetes") if getattr(self, name, None) is not None]

    def groups_for(self, scheduler: str) -> list[NodeGroupSpec]:
        """Node groups run by ``scheduler`` (``none`` for plain Auto Scaling groups). Resolved specs only."""
        return [g for g in self.node_groups if g.scheduler == scheduler]

    @property
    def zones(self) -> list[str]:
        """Every zone the cluster needs a subnet in, in first-use order."""
        zones: list[str] = list(self.network.availability_zones)
        for group in self.node_groups:
            zones += [z for z in group.availability_zones if z not in zones]
        head = self.slurm.head_node.availability_zone if self.slurm is not None else None
        if head and head not in zones:
            zones.append(head)
        return zones
