"""Names and tags every component applies the same way."""

from __future__ import annotations

from collections.abc import Mapping

from gpucluster_agents.contract import MANAGED_BY, TAG_CLUSTER, TAG_MANAGED_BY, TAG_NODE_GROUP, TAG_NODE_NAME

# The keys are the node contract's: the agent filters, launches and names instances by them.
CLUSTER_TAG = TAG_CLUSTER
NODE_GROUP_TAG = TAG_NODE_GROUP
NODE_NAME_TAG = TAG_NODE_NAME
MANAGED_BY_TAG = TAG_MANAGED_BY
# Tags gpucluster adds on top of the user's (cluster, node group, managed-by, Name): the validators
# reserve room for them under AWS's 50-tag limit.
RESERVED_TAGS = (CLUSTER_TAG, NODE_GROUP_TAG, MANAGED_BY_TAG, "Name")


def cluster_tags(cluster: str, user_tags: Mapping[str, str] | None = None) -> dict[str, str]:
    """User tags first, then gpucluster's own (which win: agents and IAM conditions rely on them)."""
    return {**dict(user_tags or {}), CLUSTER_TAG: cluster, MANAGED_BY_TAG: MANAGED_BY}


def with_name(tags: Mapping[str, str], name: str) -> dict[str, str]:
    return {**tags, "Name": name}
