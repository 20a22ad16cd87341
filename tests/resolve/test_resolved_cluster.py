"""The resolved cluster: every decision a renderer or component needs is a value of :class:`ResolvedCluster`, made
once by :func:`resolve` (the only reader of the instance catalog after the checks), and the layers above it hold
to that (no catalog, no EFA or interface layout re-decided, no ``assert x is not None`` outside the tests)."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from gpucluster.facts.catalog import load_catalog
from gpucluster.load import load_spec
from gpucluster.resolve.cluster import ResolvedCluster, resolve
from gpucluster.resolve.compute.node_group import SlurmGroup
from gpucluster.resolve.storage import SharedFs
from tests.conftest import MIXED_STORAGE, MIXED_STORAGE_GROUPS, group, make_config

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog()


def cluster(*groups, **keys) -> ResolvedCluster:
    return load_spec(make_config(*groups, **keys), stack="r").cluster


def test_slurm_groups_carry_their_partition_from_the_one_rule():
    c = cluster(
        group(name="p5", maxSize=4),
        group(name="dev", instanceType="g6e.2xlarge", maxSize=2, enableEfaSupport=False),
        slurm={"nodeGroups": [{"name": "p5", "partition": "gpu"}, {"name": "dev", "mode": "static", "default": True}]},
    )
    assert c.slurm is not None
    p5, dev = c.slurm.node_groups
    assert isinstance(p5, SlurmGroup) and c.node_group("p5") is p5  # one type: the cluster's group is the Slurm group
    assert (p5.partition, dev.partition) == ("gpu", "dev")  # named, else the group's own name
    assert (p5.static, dev.static, p5.entry.default, dev.entry.default) == (False, True, False, True)
    assert c.slurm.partitions == {"gpu": "p5", "dev": "dev"} and [
        g.partition for g in c.slurm.node_groups if g.entry.default
    ] == ["dev"]
    assert p5.node_names == [f"p5-{i}" for i in range(1, 5)]
    assert c.slurm.head_zone == "us-east-1a" and c.slurm.protect is True


def test_storage_is_resolved_per_group():
    c = cluster(
        *MIXED_STORAGE_GROUPS,
        storage=MIXED_STORAGE,
    )
    p5, p4d, cpu = (c.node_group(n) for n in ("p5", "p4d", "cpu"))
    assert (p5.mounts_lustre, p4d.mounts_lustre, cpu.mounts_lustre) == (True, False, False)
    assert (
        p5.shared_fs == SharedFs("/lustre", "lustre") and p4d.shared_fs == SharedFs("/scratch", "ext4") and cpu.shared_fs is None
    )
    assert p5.nvme_scratch is not None and p5.nvme_scratch.mount_point == "/scratch" and cpu.nvme_scratch is None


def test_storage_kubernetes_and_the_estimate_are_resolved_once():
    c = cluster(*MIXED_STORAGE_GROUPS, storage={**MIXED_STORAGE, "protectData": False})
    assert c.storage is not None and c.storage.lustre is not None and c.protect_data is False
    assert (c.storage.lustre.zone, c.storage.lustre.subnet_id, c.storage.protect) == ("us-east-1a", None, False)
    assert c.storage.lustre.admins.head_node is False and c.storage.lustre.spec.storage_capacity_gib == 1200
    assert c.kubernetes is None and c.estimate.as_dict()["nodeGroups"]
    byo = cluster(
        group(name="p5", maxSize=2, availabilityZones=["us-east-1b"]),
        network={
            "vpcId": "vpc-0123456789abcdef0",
            "subnets": [
                {"id": "subnet-0aaaaaaaaaaaaaaa1", "availabilityZone": "us-east-1a"},
                {"id": "subnet-0bbbbbbbbbbbbbbb1", "availabilityZone": "us-east-1b"},
            ],
        },
        storage={"lustre": {"storageCapacityGib": 1200, "throughputPerUnitStorage": 250}},
        slurm={},
    )
    assert byo.storage is not None and byo.storage.lustre is not None
    assert (byo.storage.lustre.zone, byo.storage.lustre.subnet_id) == ("us-east-1b", "subnet-0bbbbbbbbbbbbbbb1")
    assert byo.storage.lustre.admins.head_node is True and byo.protect_data is True
    eks = cluster(
        group(name="p5", maxSize=2, scheduler="kubernetes"),
        storage={"lustre": {"storageCapacityGib": 1200, "throughputPerUnitStorage": 250}},
        network={"availabilityZones": ["us-east-1a", "us-east-1b"]},
        kubernetes={},
    )
    assert eks.kubernetes is not None and [g.group.name for g in eks.kubernetes.node_groups] == ["p5"]
    assert "aws-fsx-csi-driver" in eks.kubernetes.addon_versions  # the cluster has Lustre
    assert eks.kubernetes.cluster_networks == (eks.network.vpc_cidr,)


def test_the_slurm_version_is_decided_once():
    assert cluster(group(maxSize=2), slurm={}).slurm.version == "23.11"  # type: ignore[union-attr]


def test_resolve_is_what_load_returns():
    config = make_config(group(maxSize=4), slurm={})
    loaded = load_spec(config, stack="r")
    again = resolve(loaded.spec, CATALOG)
    assert loaded.spec is loaded.cluster.spec
    assert [dataclasses.astuple(g) for g in again.node_groups] == [dataclasses.astuple(g) for g in loaded.cluster.node_groups]


# --- the layers above resolution hold to it ----------------------------------------------------------------------


def python_files(*tops: str) -> list[Path]:
    return sorted(p for top in tops for p in (ROOT / top).rglob("*.py"))


# The components' edges (an Args → resolved adapter) may load the catalog; builders and the parts they place may not.
EDGES = {
    "components/gpu_cluster.py",  # GpuCluster(args) → from_args
    "components/compute/gpu_node_group.py",  # GpuNodeGroup(args) → from_args
    "components/slurm/slurm_cluster.py",  # SlurmCluster(args) → from_args
    "components/slurm/_args.py",
    "components/kubernetes/_args.py",
    "components/kubernetes/eks_cluster.py",  # EksCluster(args) → from_args
    "components/kubernetes/kubernetes_platform.py",  # KubernetesPlatform(args) → from_args
    "components/kubernetes/kueue.py",  # Kueue(args) with node group specs
}


@pytest.mark.parametrize(
    "top, pattern, why",
    [
        ("gpucluster/render", r"\bcatalog\s*:", "a renderer takes no catalog parameter"),
        ("gpucluster/render", r"\bload_catalog\(", "a renderer loads no catalog"),
        ("gpucluster/render", r"\binterface_layout\(", "the interface layout is resolved (ResolvedNodeGroup.interfaces)"),
        ("gpucluster/render", r"\benable_efa_support\b", "EFA is resolved (ResolvedNodeGroup.efa, .uses_efa)"),
        ("components", r"\bload_catalog\(|\bcatalog\[", "a builder reads resolved values (the catalog only at the edge)"),
        ("components", r"\bresolve_kubernetes\(|\bestimate\(|\bhealth_config\(", "decided in resolution"),
    ],
)
def test_the_layers_above_read_resolved_values(top, pattern, why):
    hits = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in python_files(top)
        if p.relative_to(ROOT).as_posix() not in EDGES
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(pattern, line)
    ]
    assert not hits, f"{why}: {hits}"


def test_no_assert_is_not_none_outside_the_tests():
    found = []
    for p in python_files("gpucluster", "components", "gpucluster_agents"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Assert) and "is not None" in ast.unparse(node.test):
                found.append(f"{p.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"say it with the type, or handle the case (raise with a message): {found}"
