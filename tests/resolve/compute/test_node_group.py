"""A node group resolved: its instance facts, EFA and interface layout, NCCL environment, image and health
thresholds are decided once, as values of the group (:mod:`gpucluster.resolve.compute`)."""

from __future__ import annotations

from gpucluster.facts.catalog import load_catalog
from gpucluster.facts.efa import efa_interface_count, interface_layout
from gpucluster.facts.nccl import nccl_environment
from gpucluster.load import load_spec
from gpucluster.resolve.cluster import ResolvedCluster
from tests.conftest import MIXED_STORAGE, MIXED_STORAGE_GROUPS, group, make_config

CATALOG = load_catalog()


def cluster(*groups, **keys) -> ResolvedCluster:
    return load_spec(make_config(*groups, **keys), stack="r").cluster


def test_node_groups_carry_their_decisions():
    c = cluster(
        group(name="p5", maxSize=4, ncclEnv={"NCCL_DEBUG": "INFO"}),
        group(name="cpu", instanceType="m7i.xlarge", maxSize=2, enableEfaSupport=False),
    )
    p5, cpu = c.node_group("p5"), c.node_group("cpu")
    facts = CATALOG["p5.48xlarge"]
    assert (p5.facts, p5.efa, p5.uses_efa, p5.scheduler) == (facts, True, True, "none")
    assert p5.interfaces == interface_layout(facts, True, "current") and p5.efa_interfaces == 32
    assert dict(p5.nccl_env) == nccl_environment(facts, True, {"NCCL_DEBUG": "INFO"}) and p5.nccl_env["NCCL_DEBUG"] == "INFO"
    assert p5.image.source == "ssm-parameter" and p5.image.value == p5.spec.image_ssm_parameter
    assert (cpu.efa, cpu.efa_interfaces, cpu.create_placement_group) == (False, 0, False)
    assert efa_interface_count(cpu.interfaces) == 0 and "FI_PROVIDER" not in cpu.nccl_env
    assert [g.name for g in c.groups_for("none")] == ["p5", "cpu"]


def test_health_thresholds_are_a_decision_of_the_group():
    c = cluster(*MIXED_STORAGE_GROUPS, storage=MIXED_STORAGE)
    p5, p4d, cpu = (c.node_group(n) for n in ("p5", "p4d", "cpu"))
    assert p5.health is not None and p4d.health is not None and cpu.health is None  # no NVIDIA GPU, no thresholds
    assert (p5.health.gpu_count, p5.health.efa_count, p5.health.nvlink_links) == (8, 32, 18)
    assert (p5.health.shared_fs_mount, p5.health.shared_fs_type) == ("/lustre", "lustre")  # what the group mounts
    assert (p4d.health.shared_fs_mount, p4d.health.shared_fs_type) == ("/scratch", "ext4")
    assert p4d.health.efa_count == p4d.efa_interfaces == 4  # the layout's devices, not the p5's 32
