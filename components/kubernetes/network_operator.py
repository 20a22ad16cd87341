"""NetworkOperator: the NVIDIA Network Operator and a RoCE ``NicClusterPolicy``, for on-prem clusters.

The policy runs the RDMA shared device plugin over the Mellanox (vendor 15b3) NICs, Multus and the
CNI plugins for a secondary network, and NVIDIA IPAM; the NIC driver is the hosts'. On EKS, EFA takes
this role (see :class:`~gpucluster.components.kubernetes.efa_device_plugin.EfaDevicePlugin`). Takes its Kubernetes provider
through ``opts``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from gpucluster.components.kubernetes._helm import helm_release
from gpucluster.config.kubernetes import NETWORK_OPERATOR_CHART
from gpucluster.render.kubernetes import network_operator_values
from gpucluster.render.kubernetes.objects import nic_cluster_policy

TOKEN = "gpucluster:index:NetworkOperator"


@dataclass
class NetworkOperatorArgs:
    """Inputs of :class:`NetworkOperator`."""

    rdma_interfaces: list[str] = field(default_factory=list)
    """Names of the RoCE NICs to share as ``rdma/<resource>`` (e.g. ``[ens1f0np0]``). Default: every
    Mellanox Ethernet NIC."""

    rdma_resource_name: str = "rdma_shared_device_a"
    """Resource name pods request, as ``rdma/<name>``. Default ``rdma_shared_device_a``."""

    namespace: str = "nvidia-network-operator"
    """Namespace of the release (created). Default ``nvidia-network-operator``."""


class NetworkOperator(pulumi.ComponentResource):
    """The NVIDIA Network Operator (chart 26.4.1) and its ``NicClusterPolicy`` for RoCE."""

    values: dict
    policy: dict
    """The NicClusterPolicy object, as computed (validated against the pinned CRD in the tests)."""

    def __init__(self, name: str, args: NetworkOperatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        self.values = network_operator_values()
        self.policy = nic_cluster_policy(args.rdma_interfaces, args.rdma_resource_name)
        release = helm_release(f"{name}-release", "network-operator", NETWORK_OPERATOR_CHART, args.namespace, self, self.values)
        k8s.apiextensions.CustomResource(
            f"{name}-nic-cluster-policy",
            api_version=self.policy["apiVersion"],
            kind=self.policy["kind"],
            metadata=self.policy["metadata"],
            spec=self.policy["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[release]),
        )
        self.register_outputs({"chart": NETWORK_OPERATOR_CHART[1], "version": NETWORK_OPERATOR_CHART[2]})
