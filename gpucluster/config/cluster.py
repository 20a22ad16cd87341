"""The whole cluster: what one stack config describes."""

from __future__ import annotations

import difflib
import re

from pydantic import Field, field_validator

from gpucluster.config.base import FIX_MARK, SpecModel, check_name
from gpucluster.config.compute.node_group import NodeGroupSpec
from gpucluster.config.estimate import EstimateSpec
from gpucluster.config.hybrid import HybridSpec
from gpucluster.config.kubernetes import KubernetesSpec
from gpucluster.config.monitoring import MonitoringSpec
from gpucluster.config.network import NetworkSpec
from gpucluster.config.slurm import SlurmSpec
from gpucluster.config.storage import StorageSpec
from gpucluster.facts.regions import aws_partition_of, known_regions, zone_in_region

REGION_SHAPE = re.compile(r"[a-z]{2}(-gov)?-[a-z]+-\d")
"""How AWS writes a region: ``us-east-1``, ``us-gov-west-1``."""


def region_problem(region: str) -> tuple[str, str]:
    """``(message, fix)`` for an ``aws:region`` that is not a known region: what it looks like instead (a zone, a
    region written in capitals or with underscores) or the nearest known regions, and the value to set."""
    regions = known_regions()
    guess = region.strip().lower().replace("_", "-").replace(" ", "-")
    of_zone = next((r for r in regions if zone_in_region(guess, r)), None)
    if of_zone is not None:
        return f"region {region!r} is an Availability Zone of {of_zone}, not a region", (
            f"set aws:region to {of_zone}; zones go in each node group's availabilityZones"
        )
    if guess in regions:
        return f"region {region!r} is not written as AWS writes it", f"set aws:region to {guess}"
    close = difflib.get_close_matches(guess, regions, n=3, cutoff=0.6)
    if close:
        return f"region {region!r} is not an AWS region; the nearest are {', '.join(close)}", (
            f"set aws:region to the one you meant, e.g. `pulumi config set aws:region {close[0]}`"
        )
    return f"region {region!r} is not an AWS region (aws, aws-cn or aws-us-gov partition)", (
        f"set aws:region to one of: {', '.join(regions)}"
    )


def known_region(region: str) -> bool:
    """Whether ``region`` is one AWS has (zones are only checked against a known region: an unknown one has its
    own finding, and every zone would be "not in" it)."""
    return aws_partition_of(region) is not None


class ClusterSpec(SpecModel):
    """A GPU cluster. Each field is one ``gpucluster:<field>`` key of the stack config, except
    ``region``, which is ``aws:region``."""

    name: str
    """Cluster name, used as the prefix of every resource name and in tags. Default: the stack name."""

    region: str
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

    monitoring: MonitoringSpec = MonitoringSpec()
    """Metrics (Amazon Managed Service for Prometheus), logs (CloudWatch Logs), alerts (to an SNS topic) and
    dashboards of the fleet. Default: on for a cluster with ``slurm`` or ``kubernetes``."""

    tags: dict[str, str] = Field(default_factory=dict)
    """Tags on every taggable resource, merged with the cluster tags gpucluster adds. Default: none."""

    estimate: EstimateSpec = EstimateSpec()
    """The plan's cost estimate: a price per hour for any line beside the node groups (``pricePerHour``). Default:
    the price file's figures."""

    @field_validator("region", mode="before")
    @classmethod
    def _region_as_written(cls, value: object) -> object:
        # Blanks would be stripped here, but the AWS provider takes aws:region as written (and asks another region).
        if isinstance(value, str) and value != value.strip():
            raise ValueError(f"region {value!r} has blanks around it: the AWS provider uses it as written{FIX_MARK}"
                             "write the region alone, e.g. us-east-1")  # fmt: skip
        if isinstance(value, str) and not REGION_SHAPE.fullmatch(value):
            message, fix = region_problem(value)
            raise ValueError(f"{message}{FIX_MARK}{fix}")
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
