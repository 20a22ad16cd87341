"""EfaDevicePlugin: the aws-efa-k8s-device-plugin chart, so pods can request ``vpc.amazonaws.com/efa``.

It runs on EFA nodes only (``gpucluster/efa=true``) and tolerates the GPU taint. Takes its Kubernetes
provider through ``opts``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes_render import efa_device_plugin_values
from components.spec.kubernetes import EFA_DEVICE_PLUGIN_CHART

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
        repo, chart, version = EFA_DEVICE_PLUGIN_CHART
        self.values = efa_device_plugin_values()
        k8s.helm.v3.Release(
            f"{name}-release",
            k8s.helm.v3.ReleaseArgs(
                name="aws-efa-k8s-device-plugin",
                chart=chart,
                version=version,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=repo),
                namespace=args.namespace,
                values=self.values,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"chart": chart, "version": version})
