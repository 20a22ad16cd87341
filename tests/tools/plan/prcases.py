"""The pull-request cases (docs/plan.md): a shipped stack's config and the same config with one change,
planned offline (each plan under the real stack program), as plan JSON documents."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import yaml

from gpucluster.tools.plan.run.engine import run_program
from gpucluster.tools.plan.run.json import to_json
from tests.conftest import ROOT, pulumi_config
from tests.plans import shipped_plan

Config = dict[str, Any]


def stack_config(stack: str) -> Config:
    return yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]


@functools.cache
def _plan(stack: str, name: str, config_yaml: str) -> dict[str, Any]:
    plan = run_program("gpucluster", name, pulumi_config(yaml.safe_load(config_yaml)))
    assert plan.ok, plan.error
    return to_json(plan)


def plan_json(stack: str, change: Callable[[Config], None] | None = None, *, name: str | None = None) -> dict[str, Any]:
    """The plan JSON of ``stack`` (planned as stack ``name``, default the same), after ``change`` edits its config."""
    if change is None and name in (None, stack):  # the stack as committed: the plan tests/plans.py makes once
        return to_json(shipped_plan(stack))
    config = copy.deepcopy(stack_config(stack))
    if change:
        change(config)
    return copy.deepcopy(_plan(stack, name or stack, yaml.safe_dump(config, sort_keys=True)))


def efa_off(c: Config) -> None:
    c["gpucluster:storage"]["lustre"]["enableEfa"] = False
    c["gpucluster:storage"]["lustre"]["enableGpudirectStorage"] = False


def lustre_to_zone_b(c: Config) -> None:
    c["gpucluster:storage"]["lustre"]["availabilityZone"] = "us-east-1b"


def slurm_p5_to_zone_b(c: Config) -> None:
    """slurm-p5 moved to another zone: its node groups, and with them its subnets, file system and head node."""
    for group in c["gpucluster:nodeGroups"]:
        group["availabilityZones"] = ["us-east-1b"]


def models_repository_first(c: Config) -> None:
    c["gpucluster:storage"]["lustre"]["dataRepositories"].insert(0, {"fileSystemPath": "/models", "bucketPrefix": "models/"})


def shrink_p5(c: Config) -> None:
    group = c["gpucluster:nodeGroups"][0]
    group["minSize"] = group["desiredSize"] = 8


def bigger_head_node(c: Config) -> None:
    c["gpucluster:slurm"]["headNode"] = {"instanceType": "m7i.2xlarge"}


LOCKED_AMI = "ami-0123456789abcdef0"


def lock_p5_image(c: Config) -> None:
    """``gpucluster images lock`` recorded the p5 group's base image."""
    parameter = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"
    c["gpucluster:nodeGroups"][0]["imageLock"] = {"imageId": LOCKED_AMI, "ssmParameter": parameter, "lockedAt": "2026-11-01"}


OTHER_AMI = "ami-0fedcba9876543210"


def swap_locked_p5_image(c: Config) -> None:
    """The p5 lock's AMI edited by hand: another image, the same ``lockedAt``."""
    lock_p5_image(c)
    c["gpucluster:nodeGroups"][0]["imageLock"]["imageId"] = OTHER_AMI


def relock_p5_image(c: Config) -> None:
    """``gpucluster images lock`` made again: another image and a new ``lockedAt``."""
    swap_locked_p5_image(c)
    c["gpucluster:nodeGroups"][0]["imageLock"]["lockedAt"] = "2026-12-01"


def grow_for_bigger_dataset(c: Config) -> None:
    c["gpucluster:nodeGroups"][0]["maxSize"] = 24
    c["gpucluster:nodeGroups"][0]["capacity"]["instanceCount"] = 24  # the reservation grows with it
    c["gpucluster:storage"]["workload"]["datasetSizeTib"] = 60


def access_entry_first(c: Config) -> None:
    c["gpucluster:kubernetes"]["accessEntries"].insert(
        0, {"principalArn": "arn:aws:iam::123456789012:role/auditors", "policies": ["AmazonEKSViewPolicy"]}
    )


def nccl_debug_on_p5(c: Config) -> None:
    c["gpucluster:nodeGroups"][0]["ncclEnv"] = {"NCCL_DEBUG": "INFO"}


def without_people(c: Config) -> None:
    """slurm-p5 without its people (login nodes, users, /home, the teams' members): every item of its estimate has a price (the price data
    has none for FSx for OpenZFS), so cost deltas are figures."""
    for key in ("identity", "loginNodes", "home"):
        c["gpucluster:slurm"].pop(key, None)
    for team in c["gpucluster:slurm"].get("teams", []):
        team.pop("users", None)  # its members are the people


def grow_slurm_p5(c: Config) -> None:
    """slurm-p5's p5 partition up to 24 nodes, its reservation with it (a bigger dataset: test_costdiff.py)."""
    c["gpucluster:nodeGroups"][0]["maxSize"] = 24
    c["gpucluster:nodeGroups"][0]["capacity"]["instanceCount"] = 24
