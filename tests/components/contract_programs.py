"""The programs the contract tests build (tests/components/test_contracts.py): every shipped stack as a program in
any language would build it (``GpuCluster`` from its Args, the stack's keys), and the components no stack builds
(``KubernetesPlatform`` on-prem, with its ``NetworkOperator``) from their own Args. Each runs once under the plan's
mocks with ``protect`` and, where it has one, a provider in its options; every component constructed on the way
is recorded with the type token it registered."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from gpucluster.components.gpu_cluster import GpuCluster, GpuClusterArgs
from gpucluster.components.kubernetes.kubernetes_platform import KubernetesPlatform, KubernetesPlatformArgs
from gpucluster.facts.catalog import load_catalog
from gpucluster.tools.plan.run.engine import Plan, execute
from gpucluster.tools.plan.run.mocks import PlanMocks
from tests.components.kubernetes.test_gpu_operator import ON_PREM_KUBECONFIG
from tests.components.kubernetes.test_manifests import LUSTRE
from tests.conftest import ROOT, eks_spec

STACKS = sorted(p.name.split(".")[1] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))


@dataclasses.dataclass
class Built:
    """One program's plan, the components it constructed (class, name, token), and what its options asked for."""

    plan: Plan
    components: list[tuple[type, str, str]]
    tags: dict[str, str]
    """The tags the program gave its cluster (every taggable AWS resource must carry them)."""
    provider: str | None = None
    """The name of the provider the program passed in the root component's options."""


def _stack_args(stack: str) -> tuple[dict[str, Any], str]:
    config = yaml.safe_load(Path(ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    args = {key.split(":")[1]: value for key, value in config.items() if key.startswith("gpucluster:")}
    args.update(name=stack, region=config["aws:region"])
    return args, config["aws:region"]


def _record(program: Callable[[], object], region: str = "us-east-1") -> tuple[Plan, list[tuple[type, str, str]]]:
    """Run ``program`` and record each ``ComponentResource`` constructed: its class, name and type token."""
    built: list[tuple[type, str, str]] = []
    original = pulumi.ComponentResource.__init__

    def recording(self: pulumi.ComponentResource, t: str, name: str, *args: Any, **kwargs: Any) -> None:
        built.append((type(self), name, t))
        original(self, t, name, *args, **kwargs)

    pulumi.ComponentResource.__init__ = recording  # type: ignore[method-assign]
    try:
        plan = execute(program, config={"aws:region": region}, mocks=PlanMocks(region=region, catalog=load_catalog()))
    finally:
        pulumi.ComponentResource.__init__ = original  # type: ignore[method-assign]
    assert plan.error is None, plan.error
    return plan, [b for b in built if b[0] is not pulumi.runtime.stack.Stack]


def _stack(stack: str) -> Built:
    args, region = _stack_args(stack)
    plan, components = _record(lambda: GpuCluster(stack, GpuClusterArgs(**args), pulumi.ResourceOptions(protect=True)), region)
    return Built(plan, components, tags=dict(args.get("tags") or {}))


def _on_prem_platform() -> Built:
    spec = eks_spec(teams=[{"name": "vision", "gpuQuota": {"h100": 8}, "groups": ["vision"]}])

    def program() -> None:
        provider = k8s.Provider("dc1", kubeconfig=ON_PREM_KUBECONFIG)
        KubernetesPlatform(
            "dc1",
            KubernetesPlatformArgs(
                **spec.kubernetes.model_dump(exclude_none=True),
                cluster_name="dc1",
                node_groups=[
                    g.model_dump(exclude_none=True, exclude={"image_ssm_parameter"}) for g in spec.groups_for("kubernetes")
                ],
                platform="on-prem",
                shared_storage=[LUSTRE],
                rdma_interfaces=["ens1f0np0"],
            ),
            opts=pulumi.ResourceOptions(provider=provider, protect=True),
        )

    plan, components = _record(program)
    return Built(plan, components, tags={}, provider="dc1")


PROGRAMS: dict[str, Callable[[], Built]] = {
    **{f"stack-{s}": (lambda s=s: _stack(s)) for s in STACKS},
    "kubernetes-on-prem": _on_prem_platform,
}


@cache
def built(program: str) -> Built:
    """``program``'s run (once per test process)."""
    return PROGRAMS[program]()
