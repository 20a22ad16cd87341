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
import yaml

from gpucluster.components.gpu_cluster import GpuCluster, GpuClusterArgs
from gpucluster.facts.catalog import load_catalog
from gpucluster.tools.plan.run.engine import Plan, execute
from gpucluster.tools.plan.run.mocks import PlanMocks
from tests.components.kubernetes.test_manifests import on_prem_program
from tests.conftest import ROOT, eks_spec

STACKS = sorted(p.name.split(".")[1] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))


@dataclasses.dataclass
class Built:
    """One program's plan, the components it constructed (class, name, token), and what its options asked for."""

    plan: Plan
    components: list[tuple[type, str, str]]
    tags: dict[str, str]
    """The tags the program gave its cluster (every taggable AWS resource must carry them)."""
    cluster: str | None = None
    """The cluster name the program gave (the cluster tag's value); None: the program creates no AWS resource."""
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
    return Built(plan, components, tags=dict(args.get("tags") or {}), cluster=stack)


def _on_prem_platform() -> Built:
    plan, components = _record(on_prem_program(protect=True))
    return Built(plan, components, tags={}, provider="dc1")


def _alone(build: Callable[[pulumi.ResourceOptions], object], tags: dict[str, str], cluster: str = "c") -> Callable[[], Built]:
    """A public component used on its own in a user's program (its Args as the component's tests write them, cluster
    ``c``), with ``protect`` in its options: the paths only a component alone takes (a node group creating its own
    role, a Slurm cluster in a given VPC) are checked too."""

    def run() -> Built:
        plan, components = _record(lambda: build(pulumi.ResourceOptions(protect=True)))
        return Built(plan, components, tags=tags, cluster=cluster)

    return run


def _alone_programs() -> dict[str, Callable[[], Built]]:
    from gpucluster.components.compute.gpu_node_group import GpuNodeGroup
    from gpucluster.components.hybrid.hybrid_link import HybridLink
    from gpucluster.components.hybrid.onprem_credentials import OnPremCredentials
    from gpucluster.components.kubernetes.eks_cluster import EksCluster
    from gpucluster.components.network.network import Network
    from gpucluster.components.slurm.slurm_cluster import SlurmCluster
    from gpucluster.components.storage.data_bucket import DataBucket
    from gpucluster.components.storage.lustre_storage import LustreStorage
    from tests.components.compute.test_gpu_node_group import args as node_group_args
    from tests.components.hybrid.test_hybrid_link import link_args
    from tests.components.hybrid.test_onprem_credentials import credentials_args
    from tests.components.kubernetes.test_eks_cluster import args_of as eks_args
    from tests.components.slurm.test_slurm_cluster_args import minimal as slurm_args
    from tests.components.storage.test_lustre_args import WIRING

    team = {"team": "ml"}
    return {
        "alone-GpuNodeGroup": _alone(lambda opts: GpuNodeGroup("c-gpu", node_group_args(), opts), team),
        "alone-Network": _alone(
            lambda opts: Network(
                "n", {"cluster_name": "c", "region": "us-east-1", "availability_zones": ["us-east-1a"], "tags": team}, opts
            ),
            team,
        ),
        "alone-DataBucket": _alone(lambda opts: DataBucket("d", {"cluster_name": "c", "tags": team}, opts), team),
        "alone-LustreStorage": _alone(
            lambda opts: LustreStorage("l", {**WIRING, "storage_capacity_gib": 1200, "throughput_per_unit_storage": 125}, opts),
            {},
        ),
        "alone-SlurmCluster": _alone(lambda opts: SlurmCluster("c-slurm", {**slurm_args(), "cluster_name": "c"}, opts), {}),
        # with people: sessions, login nodes behind an internal SSH load balancer, the OpenZFS /home
        "alone-SlurmCluster-people": _alone(
            lambda opts: SlurmCluster("c-slurm", {**slurm_args(), "cluster_name": "c", **PEOPLE_ARGS}, opts), {}
        ),
        "alone-EksCluster": _alone(
            lambda opts: EksCluster("k-eks", eks_args(eks_spec(teams=[{"name": "research", "groups": ["research"]}])), opts),
            team,
            cluster="k",
        ),
        "alone-HybridLink": _alone(
            lambda opts: HybridLink("l", link_args({"type": "vpn-tgw", "customer_gateway_ip": "198.51.100.7"}), opts), team
        ),
        "alone-OnPremCredentials": _alone(lambda opts: OnPremCredentials("site", credentials_args({"type": "ssm"}), opts), team),
    }


PEOPLE_ARGS: dict[str, Any] = {
    "identity": {
        "admin_group": "hpc-admins",
        "groups": [{"name": "hpc-admins", "gid": 5000}],
        "users": [
            {
                "name": "alice",
                "uid": 10001,
                "groups": ["hpc-admins"],
                "session_principal": "arn:aws:iam::123456789012:role/alice",
            },
            {"name": "bob", "uid": 10002, "session_principal": "arn:aws:iam::123456789012:user/bob"},
        ],
    },
    "login_nodes": {"count": 1, "ssh": {"allowed_cidrs": ["10.20.0.0/16"]}},
}


PROGRAMS: dict[str, Callable[[], Built]] = {
    **{f"stack-{s}": (lambda s=s: _stack(s)) for s in STACKS},
    "kubernetes-on-prem": _on_prem_platform,
    **_alone_programs(),
}


@cache
def built(program: str) -> Built:
    """``program``'s run (once per test process)."""
    return PROGRAMS[program]()
