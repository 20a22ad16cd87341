"""gpucluster: GPU clusters for AI training as code, on Pulumi.

The package's rooms, each with one job (data flows down this list; nothing imports upward):

- ``gpucluster.config``     the stack config model (pydantic) and its checks (``config.checks``): parse, validate,
                            every problem as a Finding with the field path, the value and the fix;
- ``gpucluster.facts``      instance facts (the trimmed DescribeInstanceTypes catalog), EFA layout, images, NCCL
                            environment, AWS regions;
- ``gpucluster.resolve``    resolution (every default decided once), storage sizing, cost and power;
- ``gpucluster.render``     pure renderers: resolved config → file text (cloud-init, Slurm, Kubernetes), from the
                            Jinja2 templates installed as ``gpucluster/templates`` (``templates/`` in a checkout);
- ``gpucluster.components`` the Pulumi component resources and only them (``components/`` in a checkout);
- ``gpucluster.program``    the stack program ``__main__.py`` runs;
- ``gpucluster.tools``      workstation and CI tools: the CLI, the offline plan, preflight, catalog refresh, docs,
                            the component provider other Pulumi languages use (``PulumiPlugin.yaml``).

The node-side programs (the Slurm power agent, topology) are the separate package ``gpucluster_agents``
(stdlib + boto3 only), which never imports this one.

The components and their Args are importable from here: ``from gpucluster import GpuNodeGroup, LustreStorage, …``,
and so are the typed dicts of the config sections the Args nest (``NodeGroupConfig``, ``CapacityConfig``, …). They
load lazily, so ``import gpucluster`` (and the config model) does not import Pulumi.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers (and a consumer's pyright) see; at run time they load on first use
    from gpucluster.components._shared.config_types import *  # noqa: F403 - the config sections' typed dicts
    from gpucluster.components.compute.gpu_node_group import GpuNodeGroup, GpuNodeGroupArgs
    from gpucluster.components.gpu_cluster import GpuCluster, GpuClusterArgs
    from gpucluster.components.kubernetes.eks_cluster import EksCluster, EksClusterArgs
    from gpucluster.components.kubernetes.kubernetes_platform import KubernetesPlatform, KubernetesPlatformArgs
    from gpucluster.components.network.network import Network, NetworkArgs
    from gpucluster.components.slurm.slurm_cluster import SlurmCluster, SlurmClusterArgs, SlurmClusterLustreArgs
    from gpucluster.components.storage.data_bucket import DataBucket, DataBucketArgs
    from gpucluster.components.storage.lustre_storage import LustreStorage, LustreStorageArgs

_COMPONENTS = {
    "GpuCluster": "gpucluster.components.gpu_cluster",
    "Network": "gpucluster.components.network.network",
    "GpuNodeGroup": "gpucluster.components.compute.gpu_node_group",
    "LustreStorage": "gpucluster.components.storage.lustre_storage",
    "DataBucket": "gpucluster.components.storage.data_bucket",
    "SlurmCluster": "gpucluster.components.slurm.slurm_cluster",
    "EksCluster": "gpucluster.components.kubernetes.eks_cluster",
    "KubernetesPlatform": "gpucluster.components.kubernetes.kubernetes_platform",
}
_ARGS = {f"{name}Args": module for name, module in _COMPONENTS.items()}
_ARGS["SlurmClusterLustreArgs"] = "gpucluster.components.slurm.slurm_cluster"
# The config sections' typed dicts (``NodeGroupConfig``, ``CapacityConfig``, …): the nested fields of the Args.
_CONFIG_TYPES = "gpucluster.components._shared.config_types"

__all__ = [
    "DataBucket",
    "DataBucketArgs",
    "EksCluster",
    "EksClusterArgs",
    "GpuCluster",
    "GpuClusterArgs",
    "GpuNodeGroup",
    "GpuNodeGroupArgs",
    "KubernetesPlatform",
    "KubernetesPlatformArgs",
    "LustreStorage",
    "LustreStorageArgs",
    "Network",
    "NetworkArgs",
    "SlurmCluster",
    "SlurmClusterArgs",
    "SlurmClusterLustreArgs",
]


def __getattr__(name: str) -> Any:
    module = _COMPONENTS.get(name) or _ARGS.get(name)
    if module is None and name.endswith("Config") and name[:1].isupper():
        module = _CONFIG_TYPES
    if module is None or (module == _CONFIG_TYPES and not hasattr(importlib.import_module(module), name)):
        raise AttributeError(f"module 'gpucluster' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
