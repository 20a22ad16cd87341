"""The compute nodes' ECR rights (``slurm.containers.registries``): pull exactly the named repositories, a token with
``*`` (no resource level), nothing without registries or without a group that runs containers."""

from __future__ import annotations

import json

from gpucluster.load import load_spec
from tests.components.slurm.test_slurm_cluster import POLICY, build
from tests.conftest import group, make_config

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
PULL = ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]


def _spec(registries: list[str], **containers):
    slurm = {"containers": {"registries": registries, **containers}}
    return load_spec(make_config(group(name="p5", maxSize=4), **{"slurm": slurm}), stack="s").cluster


def test_the_node_role_pulls_exactly_the_named_repositories(run_components):
    registries = [f"{ECR}/team-a/train", f"{ECR}/shared/*", "210987654321.dkr.ecr.eu-west-2.amazonaws.com/base"]
    plan = run_components(lambda: build(_spec(registries)))
    node_role = plan.by_name("s-slurm-node-role")
    ecr = plan.by_name("s-slurm-node-ecr")
    assert ecr.inputs["role"] == node_role.id
    assert json.loads(ecr.inputs["policy"])["Statement"] == [
        {
            "Sid": "PullTheNamedRepositories",
            "Effect": "Allow",
            "Action": PULL,
            "Resource": [
                "arn:aws:ecr:eu-west-2:210987654321:repository/base",
                "arn:aws:ecr:us-east-1:123456789012:repository/shared/*",
                "arn:aws:ecr:us-east-1:123456789012:repository/team-a/train",
            ],
        },
        {"Sid": "GetRegistryTokens", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
    ]
    # the head node's role gets none of it
    head_role = plan.by_name("s-slurm-head-role")
    head = [json.loads(r.inputs["policy"]) for r in plan.of_type(POLICY) if r.inputs["role"] == head_role.id]
    assert "ecr:" not in json.dumps(head)


def test_no_ecr_rights_without_registries_or_containers(run_components):
    for spec in (_spec([]), _spec([f"{ECR}/team-a/train"], enabled=False)):
        plan = run_components(lambda spec=spec: build(spec))
        assert "ecr:" not in json.dumps([r.inputs["policy"] for r in plan.of_type(POLICY)])
        assert not [r for r in plan.of_type(POLICY) if r.name.endswith("-ecr")]
