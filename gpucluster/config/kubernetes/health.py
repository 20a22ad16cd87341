"""``gpucluster:kubernetes.health``: node health on the Kubernetes GPU nodes.

Three layers, each on by default: the EKS node monitoring agent (an EKS add-on that sets conditions such
as ``AcceleratedHardwareReady`` from XIDs, ECC and NVLink faults) with EKS node auto repair on the GPU
managed node groups (it reboots or replaces a node whose condition stays bad); DCGM exporter counters
for ECC, row remapping, XIDs and NVLink that its default list leaves out; and gpucluster's own sweep
(``python -m gpucluster_agents.health sweep``, a DaemonSet on GPU nodes) that sets a node condition and a
``NoSchedule`` taint, so a GPU that is slow or degraded in ways the agent does not see gets no new pods.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from gpucluster.config.base import FIX_MARK, SpecModel, check_image

NODE_MONITORING_AGENT_ADDON = "eks-node-monitoring-agent"
# The sweep's image: Python 3 only (the node package runs on stdlib + nvidia-ml-py, and both come in the
# sweep's ConfigMap). Docker's official image, mirrored on ECR Public (no Docker Hub rate limit), pinned
# by digest: a re-pointed tag cannot change what runs privileged on every GPU node. The digest is the
# image index of python:3.12-slim (Python 3.12.13, Debian trixie, built 2026-08-05) as Docker's official
# images record it: docker-library/repo-info, repos/python/remote/3.12-slim.md at commit
# 2986dca3a80cb11b70fc4599941096374ea9e509. ECR Public's docker/library serves Docker Hub's manifests
# unchanged (the same digests are pulled under both names); check with `crane digest` before relying on it.
SWEEP_IMAGE = (
    "public.ecr.aws/docker/library/python:3.12-slim@sha256:229a2c5bfa27522db7815ea81f9bed70af17ccb9de9fc7ad142b1877b5830d36"
)
DIGEST_RE = re.compile(r"@sha256:[0-9a-f]{64}$")


class KubernetesHealthSpec(SpecModel):
    """Node health on the GPU nodes: the EKS node monitoring agent and auto repair (EKS), extra DCGM
    exporter counters, and gpucluster's sweep DaemonSet."""

    node_monitoring_agent: bool = True
    """EKS: install the ``eks-node-monitoring-agent`` add-on (version: ``addonVersions``, else EKS's default
    for the cluster version). Default true."""

    auto_repair: bool = True
    """EKS: node auto repair on the GPU managed node groups (``nodeRepairConfig``): EKS reboots or replaces
    a node the monitoring agent marks unhealthy. Needs ``nodeMonitoringAgent``. Default true."""

    max_unhealthy_percentage: int | None = Field(default=None, ge=1, le=100)
    """Auto repair stops when more than this share of a node group is unhealthy (a fleet-wide cause is
    not fixed by replacing nodes). Default: EKS's own rule."""

    max_parallel_repairs_percentage: int | None = Field(default=None, ge=1, le=100)
    """At most this share of a node group is repaired at once. Default: EKS's own rule."""

    dcgm_health_counters: bool = True
    """Add ECC, row-remapping, XID and NVLink error counters to the DCGM exporter's metrics (a ConfigMap
    the GPU Operator's ``dcgmExporter.config`` names). Default true; needs the DCGM exporter on."""

    sweep: bool = True
    """Run the health sweep on every GPU node (a DaemonSet): a fault sets the node condition
    ``GpuclusterHealthy=False`` and the taint ``gpucluster.io/gpu-unhealthy=true:NoSchedule``; a healthy
    sweep clears both. On EKS it also gates new GPU nodes: they register with the taint
    ``gpucluster.io/health-boot=pending:NoSchedule``, which only a passing ``boot`` check takes off
    (docs/health.md). Default true."""

    sweep_interval_seconds: int = Field(default=300, ge=60, le=86400)
    """Seconds between two sweeps of a node. Default 300."""

    sweep_image: str = SWEEP_IMAGE
    """Image the sweep runs in, by digest (``…@sha256:<64 hex>``): any image with Python 3.9+ (the node
    package, NVIDIA's NVML binding and the thresholds come in a ConfigMap: nothing is downloaded when the
    pod starts). It runs privileged on every GPU node, so a tag alone is refused: whoever can move the tag
    would choose what runs there. Nodes without a route to ECR Public: an ECR pull-through cache or a copy
    in your own registry. Default: Python 3.12 slim from ECR Public, pinned by digest."""

    @field_validator("sweep_image")
    @classmethod
    def _image(cls, value: str) -> str:
        check_image(value)
        if not DIGEST_RE.search(value):
            raise ValueError(
                f"{value!r} names the sweep's image by tag only; it runs privileged on every GPU node, and a tag "
                f"can be moved to other code{FIX_MARK}pin it by digest: {value.split('@')[0]}@sha256:<digest> "
                "(e.g. from `crane digest` or `docker buildx imagetools inspect`)"
            )
        return value

    @model_validator(mode="after")
    def _repair_needs_agent(self) -> KubernetesHealthSpec:
        if self.auto_repair and not self.node_monitoring_agent:
            raise ValueError(
                "autoRepair is true but nodeMonitoringAgent is false: EKS repairs nodes on the conditions the agent "
                "sets, so nothing would ever be repaired; set nodeMonitoringAgent: true, or autoRepair: false"
            )
        return self
