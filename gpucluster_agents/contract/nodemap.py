# pyright: strict
"""The ``node_map`` section of the agent config: where a launch publishes its instance -> node map.

A part of the node contract (:mod:`gpucluster_agents.contract` holds it as ``AgentConfig.node_map``),
kept in its own module because the contract module is at the size limit. Absent (the default), the
agent names each launched instance with a CreateTags call during the resume, as it always did.

With a ``node_map``, every CreateFleet batch writes ONE object, ``s3://<bucket>/<prefix><token>.json``
(``token`` = the batch's launch token, which CreateFleet also sets on every instance of the batch as
the tag ``gpucluster:launch-token``): ``{"token": ..., "group": ..., "nodes": {instance id: node}}``.
The booting instance reads its launch token and instance id from its metadata and its node name from
that object (``boot/helper.py node-name``). Nothing per node is sent to EC2 during a resume; the node-name
and Name tags are set later by ``maintain`` (``power/names.py``), for people and as a second record.

The map names no secret. A node reads only its own batch's object: its role may GetObject under the
prefix but not list it, and a launch token is a random 128-bit value that only the instances of that
batch (their own tags) and the agent know.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .jsonread import Reader

DEFAULT_PREFIX = "node-maps/"
# S3 bucket naming rules (general purpose buckets): 3..63 of [a-z0-9.-], starting and ending alphanumeric.
_PREFIX_RE = re.compile(r"^(?:[A-Za-z0-9_.-]+/)+$")


@dataclass(frozen=True)
class NodeMap:
    bucket: str
    prefix: str = DEFAULT_PREFIX  # ends with '/'; objects are <prefix><launch token>.json
    endpoint_url: str | None = field(default=None, metadata={"omit": True})  # S3 endpoint override (tests: moto)

    def key(self, token: str) -> str:
        return f"{self.prefix}{token}.json"


NODE_MAP_KEYS = frozenset(("bucket", "prefix", "endpoint_url"))


def parse_node_map(r: Reader, raw: Any, path: str) -> NodeMap | None:
    """Read the ``node_map`` object (absent or null: None); problems go to ``r`` with their key path."""
    obj = r.section(raw, NODE_MAP_KEYS, path)
    if obj is None:
        return None
    bucket = r.bucket(obj, path)
    prefix = r.string(
        obj, "prefix", path, default=DEFAULT_PREFIX, pattern=_PREFIX_RE, hint="path segments of [A-Za-z0-9_.-], ending in '/'"
    )
    endpoint = r.string(obj, "endpoint_url", path, nullable=True, pattern=re.compile(r"^https?://"), hint="an http(s) URL")
    if not bucket or not prefix:
        return None
    return NodeMap(bucket=bucket, prefix=prefix, endpoint_url=endpoint)
