"""The node health program's thresholds (``/etc/gpucluster/health.json``), decided at resolution from the facts.

Every node group with NVIDIA GPUs carries them as :attr:`ResolvedNodeGroup.health
<gpucluster.resolve.compute.node_group.ResolvedNodeGroup.health>`; the renderers write that value (the Kubernetes sweep
without the mount, which a pod does not see; a ``GpuNodeGroup`` of your own with the Lustre mount you pass).
The schema lives in the node package (:mod:`gpucluster_agents.contract.health`), which reads the file;
this module only fills it in: GPU count and model from the instance facts, link and benchmark thresholds from
:mod:`gpucluster.facts.gpu_health`, the EFA device count from the launch template's interface layout
(the devices the node will actually have, not the type's maximum), and the shared file system's mount.
"""

from __future__ import annotations

from gpucluster.facts.catalog import InstanceFacts
from gpucluster.facts.gpu_health import gpu_health_facts
from gpucluster_agents.contract.health import HealthConfig


def health_config(
    facts: InstanceFacts,
    *,
    efa_count: int,
    shared_fs_mount: str | None = None,
    shared_fs_type: str = "lustre",
    node_name: str | None = None,
) -> HealthConfig:
    """The thresholds of one node group's instances. NVLink is only expected with more than one GPU:
    a single GPU has no peer (a one-GPU VM answers NotSupported). ``efa_count``: the EFA devices the group's
    launch template gives a node (``ResolvedNodeGroup.efa_interfaces``)."""
    gpu = facts.gpus[0] if facts.gpus else None
    known = gpu_health_facts(gpu.model if gpu else None)
    return HealthConfig(
        instance_type=facts.instance_type,
        gpu_count=facts.gpu_count,
        gpu_model=gpu.model if gpu else "",
        pcie_generation=known.pcie_generation if known else 0,
        pcie_width=known.pcie_width if known else 0,
        pcie_idle_downshift=known.pcie_idle_downshift if known else False,
        nvlink_links=known.nvlink_links_per_gpu if known and facts.gpu_count > 1 else 0,
        efa_count=efa_count,
        temperature_max_c=known.temperature_max_c if known else HealthConfig.temperature_max_c,
        hbm_copy_gbps=known.hbm_copy_baseline_gbps if known else None,
        gemm_tflops=known.gemm_baseline_tflops if known else None,
        shared_fs_mount=shared_fs_mount,
        shared_fs_type=shared_fs_type,
        node_name=node_name,
    )
