"""Validators of ``gpucluster:slurm.health`` (pure: spec and catalog in, findings out).

The field bounds are in the model; these judge the section against the rest of the cluster: a
switch that has nothing to act on, and a prolog budget that every job start pays."""

from __future__ import annotations

from collections.abc import Iterator

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.effective import slurm_groups
from gpucluster.config.errors import Finding, warning
from gpucluster.config.slurm import SlurmSpec
from gpucluster.config.slurm.health import nvidia_gpus
from gpucluster.facts.catalog import Catalog

# A prolog longer than this is felt on every job start (AWS ParallelCluster #6777: DCGM level 2 in the
# prolog of p4d/p5 nodes made jobs wait minutes).
LONG_PROLOG_SECONDS = 120


def health_path(field: str) -> str:
    return f"gpucluster:slurm.health.{field}"


def check_health(slurm: SlurmSpec, spec: ClusterSpec, catalog: Catalog) -> Iterator[Finding]:
    health = slurm.health
    gpu_groups = [g.name for _i, g, facts in slurm_groups(spec, catalog) if facts is not None and nvidia_gpus(facts)]
    if health.enabled and "enabled" in health.model_fields_set and not gpu_groups:
        yield warning(
            health_path("enabled"),
            "health checks are on, but no Slurm node group has NVIDIA GPUs: they would check nothing",
            "remove slurm.health.enabled (or set it to false)",
            True,
            "slurm-health-no-gpus",
        )
    if not health.enabled and "prolog" in health.model_fields_set and health.prolog:
        yield warning(
            health_path("prolog"),
            "prolog: true has no effect while slurm.health.enabled is false",
            "set slurm.health.enabled: true to check nodes before jobs, or remove prolog",
            True,
            "slurm-health-prolog-off",
        )
    if health.enabled and health.prolog and gpu_groups and health.prolog_timeout_seconds > LONG_PROLOG_SECONDS:
        yield warning(
            health_path("prologTimeoutSeconds"),
            f"every job start may wait up to {health.prolog_timeout_seconds} s for the health prolog "
            f"(multi-node jobs wait for their slowest node)",
            f"keep it at {LONG_PROLOG_SECONDS} s or less; run long diagnostics (DCGM level 2+) as the 'deep' check in a "
            "maintenance reservation",
            health.prolog_timeout_seconds,
            "slurm-health-long-prolog",
        )
