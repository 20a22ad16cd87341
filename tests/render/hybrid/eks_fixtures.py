"""The hybrid-eks stack's spec, and variants of its hybrid section, for the EKS Hybrid Nodes tests."""

from __future__ import annotations

import copy
import json
from typing import Any

from gpucluster.config.cluster import ClusterSpec
from gpucluster.load import load_spec
from gpucluster.tools.plan.run.stackfile import load_stack_config

ANCHOR = "arn:aws:rolesanywhere:us-east-1:123456789012:trust-anchor/0a1b2c3d-4e5f-6789-abcd-ef0123456789"
PROFILE = "arn:aws:rolesanywhere:us-east-1:123456789012:profile/9f8e7d6c-5b4a-3210-fedc-ba9876543210"
ROLE = "arn:aws:iam::123456789012:role/hybrid-eks-onprem-hybrid-node"


def stack_config(stack: str = "hybrid-eks") -> dict[str, Any]:
    _, config, _ = load_stack_config(stack)
    return {k: json.loads(v) if v[:1] in "[{" else v for k, v in config.items()}


def hybrid_eks_spec(**hybrid_changes: Any) -> ClusterSpec:
    """The hybrid-eks stack, with ``hybrid_changes`` merged over its hybrid section (one level deep)."""
    config = copy.deepcopy(stack_config())
    section = config["gpucluster:hybrid"]
    for key, value in hybrid_changes.items():
        if isinstance(value, dict) and isinstance(section.get(key), dict):
            section[key] = {**section[key], **value}
        else:
            section[key] = value
    return load_spec(config, stack="hybrid-eks").spec


def ssm_spec(**changes: Any) -> ClusterSpec:
    return hybrid_eks_spec(credentials={"type": "ssm", "acmPcaArn": None}, **changes)
