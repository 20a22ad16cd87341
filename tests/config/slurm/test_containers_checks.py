"""``gpucluster:slurm.containers``: each bad input is refused by the real stack program before any resource, naming
the field, the value and the fix; a GPU-less group that asks for containers gets a note (tmpfs); the pyxis release
rule as a table."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.config.checks.cluster import validate_cluster
from gpucluster.config.errors import Level
from gpucluster.facts.catalog import load_catalog
from gpucluster.facts.containers import pyxis_builds, task_prolog_in_containers
from tests.conftest import assert_finding, assert_refused, group, make_config, parse_spec

STACKS = Path(__file__).resolve().parents[3] / "stacks"
ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"


def slurm(*groups: dict[str, Any], **section: Any) -> dict[str, Any]:
    return make_config(*(groups or (group(),)), slurm=section)


def hybrid_with_own_image(cloud_release: str) -> dict[str, Any]:
    config = copy.deepcopy(yaml.safe_load((STACKS / "Pulumi.hybrid-slurm.yaml").read_text())["config"])
    config["gpucluster:hybrid"]["controller"]["cloudSlurmVersion"] = cloud_release
    config["gpucluster:nodeGroups"][0]["imageId"] = "ami-0123456789abcdef0"
    return config


BAD = [
    (
        "registry-docker-hub",
        slurm(containers={"registries": ["docker.io/library/ubuntu"]}),
        "gpucluster:slurm.containers.registries[0]",
        "'docker.io/library/ubuntu' is not an ECR repository reference",
    ),
    (
        "registry-https-url",
        slurm(containers={"registries": [f"https://{ECR}/team/train"]}),
        "gpucluster:slurm.containers.registries[0]",
        "is not an ECR repository reference",
    ),
    (
        "registry-without-repository",
        slurm(containers={"registries": [ECR]}),
        "gpucluster:slurm.containers.registries[0]",
        "is not an ECR repository reference",
    ),
    (
        "registry-upper-case",
        slurm(containers={"registries": [f"{ECR}/Team/Train"]}),
        "gpucluster:slurm.containers.registries[0]",
        "is not an ECR repository reference",
    ),
    (
        "cache-over-nvme",
        slurm(group(instanceType="g6e.xlarge"), containers={"cacheBudgetGib": 500}),
        "gpucluster:slurm.containers.cacheBudgetGib",
        "a layer cache of 500 GiB is more than the 250 GB NVMe scratch of g6e.xlarge (node group 'gpu')",
    ),
    (
        "cache-zero",
        slurm(containers={"cacheBudgetGib": 0}),
        "gpucluster:slurm.containers.cacheBudgetGib",
        "greater than or equal to 1",
    ),
    (
        "site-image-slurm-without-pyxis",
        hybrid_with_own_image("20.11"),
        "gpucluster:hybrid.controller.cloudSlurmVersion",
        "node group 'p5' runs containers on Slurm 20.11 (the image's own), for which gpucluster has no pyxis build",
    ),
]


@pytest.mark.slow  # plans the stack program
@pytest.mark.parametrize(("config", "path", "fragment"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_container_config_fails_before_any_resource(config, path, fragment):
    plan = assert_refused(config, path, fragment)
    finding = next(f for f in plan.findings if f["path"] == path and f["level"] == "error")
    assert finding["fix"], finding


def findings(config: dict[str, Any]):
    return list(validate_cluster(parse_spec(config), load_catalog()))


def test_registry_error_names_the_value_and_the_fix():
    [f] = [f for f in findings(slurm(containers={"registries": ["nvcr.io/nvidia/pytorch"]})) if f.code == "containers-registry"]
    assert f.value == "nvcr.io/nvidia/pytorch"
    assert "<account>.dkr.ecr.<region>.amazonaws.com/<repository>" in f.fix
    assert "docs/containers.md" in f.fix


@pytest.mark.parametrize(
    "registry",
    [f"{ECR}/train", f"{ECR}/team-a/train.v2", f"{ECR}/team-a/*", "210987654321.dkr.ecr.eu-west-2.amazonaws.com/x_y"],
)
def test_ecr_references_are_accepted(registry):
    assert not [f for f in findings(slurm(containers={"registries": [registry]})) if f.code == "containers-registry"]


def test_cache_within_nvme_is_accepted_and_fix_names_half_the_scratch():
    fine = findings(slurm(group(instanceType="g6e.xlarge"), containers={"cacheBudgetGib": 200}))
    assert not [f for f in fine if f.code == "containers-cache-budget"]
    [bad] = [f for f in findings(slurm(group(instanceType="g6e.xlarge"), containers={"cacheBudgetGib": 240}))
             if f.code == "containers-cache-budget"]  # fmt: skip
    assert (bad.value, bad.fix) == (240, "use at most 116 GiB (half the scratch), or leave it unset for a tenth")


def test_cache_budget_not_checked_on_groups_without_containers():
    config = slurm(group(instanceType="g6e.xlarge"), containers={"cacheBudgetGib": 500},
                   nodeGroups=[{"name": "gpu", "containers": False}])  # fmt: skip
    assert not [f for f in findings(config) if f.code == "containers-cache-budget"]


def test_containers_on_a_group_without_nvme_is_a_note():
    cpu = group(name="cpu", instanceType="m7i.xlarge")
    config = slurm(group(), cpu, nodeGroups=[{"name": "cpu", "containers": True}])
    assert_finding(
        findings(config),
        Level.INFO,
        "gpucluster:nodeGroups[1].instanceType",
        "m7i.xlarge has no NVMe scratch: enroot's images and layer cache on node group 'cpu' live in a tmpfs, in "
        "the node's memory",
        "containers-tmpfs",
    )
    # a CPU group asks for nothing by default, and the GPU type has local NVMe: no note
    assert not [f for f in findings(slurm(group(), cpu)) if f.code == "containers-tmpfs"]


def test_shipped_hybrid_stack_builds_pyxis_for_its_cloud_nodes():
    config = yaml.safe_load((STACKS / "Pulumi.hybrid-slurm.yaml").read_text())["config"]
    assert not [f for f in findings(config) if f.code.startswith("containers-")]
    # a site image's own slurmd, even of a release Ubuntu ships: its headers are not the archive's
    [own] = [f for f in findings(hybrid_with_own_image("21.08")) if f.code == "containers-slurm-release"]
    assert own.path == "gpucluster:hybrid.controller.cloudSlurmVersion" and "imageId" in own.fix


@pytest.mark.parametrize(
    ("release", "builds"),
    [("20.11", False), ("21.08", True), ("22.05", False), ("23.11", True), ("24.11", False), ("99.99", False)],
)
def test_pyxis_builds_for_the_releases_an_ubuntu_image_has_headers_for(release, builds):
    assert pyxis_builds(release) is builds


@pytest.mark.parametrize(
    ("release", "runs"),
    [("21.08", True), ("22.05", True), ("23.11", True), ("24.05", True), ("24.11", False), ("25.05", False), ("99.99", False)],
)
def test_the_task_prolog_runs_in_a_container_before_24_11(release, runs):
    """24.11's slurmstepd runs the TaskProlog through itself, which cannot load in an image (the e2e measures both)."""
    assert task_prolog_in_containers(release) is runs
