"""GpuOperator: the NVIDIA GPU Operator Helm release, on any Kubernetes cluster.

It takes its Kubernetes provider through ``opts`` (an EKS cluster's, or an on-prem cluster's from a
kubeconfig) and never makes one. The values depend on the platform: the EKS AL2023 NVIDIA AMI already
has the driver and the container toolkit; on-prem the operator installs the driver, with GPUDirect
RDMA (nvidia-peermem) for RoCE or InfiniBand.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from gpucluster.components.kubernetes._helm import helm_release
from gpucluster.components.kubernetes._objects import place_objects
from gpucluster.config.kubernetes import GPU_OPERATOR_CHART, MigStrategy
from gpucluster.render.kubernetes import Platform, gpu_operator_values
from gpucluster.render.kubernetes.health import dcgm_exporter_values, dcgm_metrics_configmap

TOKEN = "gpucluster:index:GpuOperator"


@dataclass
class GpuOperatorArgs:
    """Inputs of :class:`GpuOperator`."""

    platform: Platform = "eks"
    """``eks`` (driver and toolkit come with the AMI) or ``on-prem`` (the operator manages the driver).
    Default ``eks``."""

    mig_strategy: MigStrategy = "none"
    """MIG strategy: ``none``, ``single`` or ``mixed``. Default ``none`` (whole GPUs)."""

    enable_dcgm_exporter: bool = True
    """Run the DCGM exporter (GPU metrics for Prometheus). Default true."""

    dcgm_health_counters: bool = True
    """Export ECC, row-remapping, XID and NVLink error counters too (a metrics ConfigMap the exporter is
    pointed at; its default list leaves them out). Default true; only with the DCGM exporter."""

    enable_rdma: bool = True
    """On-prem: GPUDirect RDMA (``driver.rdma``, nvidia-peermem) for RoCE/InfiniBand. Default true.
    Ignored on EKS, where GPUDirect RDMA runs over EFA without the operator."""

    use_host_mofed: bool = True
    """On-prem: the NIC driver (DOCA-OFED/MOFED) is installed on the hosts. Default true; false when the
    Network Operator deploys it in a container."""

    driver_version: str | None = None
    """On-prem: the NVIDIA driver version the operator installs. Default: the chart's."""

    namespace: str = "gpu-operator"
    """Namespace of the release (created). Default ``gpu-operator``."""


class GpuOperator(pulumi.ComponentResource):
    """The NVIDIA GPU Operator (chart v26.7.0) with values for the platform."""

    values: dict
    """The Helm values, as computed (see :func:`gpucluster.render.kubernetes.gpu_operator_values`)."""
    release_status: pulumi.Output

    def __init__(self, name: str, args: GpuOperatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        self.values = gpu_operator_values(
            args.platform,
            args.mig_strategy,
            args.enable_dcgm_exporter,
            enable_rdma=args.enable_rdma and args.platform == "on-prem",
            use_host_mofed=args.use_host_mofed,
            driver_version=args.driver_version,
        )
        counters = args.enable_dcgm_exporter and args.dcgm_health_counters
        if counters:
            self.values = {**self.values, "dcgmExporter": {**self.values["dcgmExporter"], **dcgm_exporter_values()}}
        release = helm_release(f"{name}-release", "gpu-operator", GPU_OPERATOR_CHART, args.namespace, self, self.values)
        if counters:
            # In the release's namespace (Helm makes it); the operator mounts it into the exporter's pods.
            place_objects(name, [dcgm_metrics_configmap(args.namespace)], self, depends_on=[release])
        self.release_status = release.status
        self.register_outputs({"chart": GPU_OPERATOR_CHART[1], "version": GPU_OPERATOR_CHART[2], "namespace": args.namespace})
