"""EfaDevicePlugin: the aws-efa-k8s-device-plugin chart, so pods can request ``vpc.amazonaws.com/efa``.

It runs on EFA nodes only (``gpucluster/efa=true``) and tolerates the GPU taint. Takes its Kubernetes
provider through ``opts``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from gpucluster.components.kubernetes._helm import helm_release
from gpucluster.config.kubernetes import EFA_DEVICE_PLUGIN_CHART
from gpucluster.render.kubernetes import efa_device_plugin_values

TOKEN = "gpucluster:index:EfaDevicePlugin"


@dataclass
class EfaDevicePluginArgs:
    """Inputs of :class:`EfaDevicePlugin`."""

    namespace: str = "kube-system"
    """Namespace of the release. Default ``kube-system`` (where EKS documents it)."""


class EfaDevicePlugin(pulumi.ComponentResource):
    """The EFA Kubernetes device plugin (eks-charts ``aws-efa-k8s-device-plugin`` v0.5.30)."""

    values: dict

    def __init__(self, name: str, args: EfaDevicePluginArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        self.values = efa_device_plugin_values()
        # kube-system exists already: no namespace to create.
        helm_release(
            f"{name}-release", "aws-efa-k8s-device-plugin", EFA_DEVICE_PLUGIN_CHART, args.namespace, self, self.values, False
        )
        self.register_outputs({"chart": EFA_DEVICE_PLUGIN_CHART[1], "version": EFA_DEVICE_PLUGIN_CHART[2]})
