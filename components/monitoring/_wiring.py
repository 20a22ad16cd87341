"""What the cluster's other parts hand the monitoring part."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi


@dataclass
class MonitoringWiring:
    """What the cluster's other parts hand over: the roles of the Slurm nodes, the EKS cluster to scrape."""

    tags: dict[str, str]
    head_role_id: pulumi.Input[str] | None = None
    """The Slurm head node's role (its collector remote-writes, its log shipper writes the head streams); none without one."""
    node_role_id: pulumi.Input[str] | None = None
    """The Slurm compute nodes' role (their log shipper writes the compute streams)."""
    login_role_id: pulumi.Input[str] | None = None
    """The Slurm login nodes' role (their log shipper writes the login streams)."""
    eks_cluster_arn: pulumi.Input[str] | None = None
    eks_subnet_ids: Sequence[pulumi.Input[str]] = field(default_factory=list)
    eks_security_group_ids: Sequence[pulumi.Input[str]] = field(default_factory=list)
    eks_cluster_name: pulumi.Input[str] | None = None
    kubernetes_provider: pulumi.ProviderResource | None = None
    vpc_id: pulumi.Input[str] | None = None
    private_subnet_ids: Sequence[pulumi.Input[str]] = field(default_factory=list)
    vpc_cidr: pulumi.Input[str] | None = None
    lustre_file_system_id: pulumi.Input[str] | None = None
    """The cluster's FSx for Lustre file system: its CloudWatch alarms (throughput near its tier, capacity near full)."""
