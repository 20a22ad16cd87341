"""The component provider: serves the public components to every Pulumi language.

``pulumi package add <this checkout or its git URL>`` runs ``PulumiPlugin.yaml``'s ``main`` (this
package's ``__main__.py``); Pulumi's Python host infers the schema from each component's ``args``
annotation and its ``pulumi.Output`` attributes, and generates an SDK in the caller's language. The
schema's version is the installed package's, so a generated SDK names the release it came from.

Importing this module installs :class:`~gpucluster.tools.provider.docstrings.InheritingAnalyzer` (a
workaround for an upstream limitation: Args fields inherited from the generated config types get their
descriptions), so every schema built here or by ``ComponentProvider`` after this import carries them.
"""

from collections.abc import Sequence
from importlib.metadata import version

import pulumi
from pulumi.provider.experimental.component import ComponentProvider

from gpucluster.components.compute.gpu_node_group import GpuNodeGroup
from gpucluster.components.gpu_cluster import GpuCluster
from gpucluster.components.kubernetes.eks_cluster import EksCluster
from gpucluster.components.kubernetes.kubernetes_platform import KubernetesPlatform
from gpucluster.components.network.network import Network
from gpucluster.components.slurm.slurm_cluster import SlurmCluster
from gpucluster.components.storage.data_bucket import DataBucket
from gpucluster.components.storage.lustre_storage import LustreStorage
from gpucluster.tools.provider.docstrings import install

install()

__all__ = ["NAME", "PUBLIC_COMPONENTS", "ComponentProvider", "main", "package_version"]

NAME = "gpucluster"
"""The package name: resource tokens are ``gpucluster:index:<Component>``."""

PUBLIC_COMPONENTS: list[type[pulumi.ComponentResource]] = [
    GpuCluster,
    Network,
    GpuNodeGroup,
    LustreStorage,
    DataBucket,
    SlurmCluster,
    EksCluster,
    KubernetesPlatform,
]
"""The components other languages get (the same list as ``from gpucluster import …``); the host and the
schema tests read this one list."""


def package_version() -> str:
    """The installed distribution's version: the schema's version."""
    return version(NAME)


def main(components: Sequence[type[pulumi.ComponentResource]] = PUBLIC_COMPONENTS) -> None:
    """Serve ``components`` (argv: the engine address, then Pulumi's logging flags); prints the port."""
    from pulumi.provider.experimental import component_provider_host

    component_provider_host(components=list(components), name=NAME, version=package_version())
