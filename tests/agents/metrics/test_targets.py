"""The collector's targets, listed by the signer (gpucluster_agents/metrics/targets.py): pure selection and labels
from DescribeInstances' shape, the files' atomic write, and a failed listing that keeps the last good files.
The listing against EC2 itself (moto) with a real Prometheus reading the files: tests/e2e/test_collector_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpucluster_agents.contract import TAG_CLUSTER, TAG_NODE_GROUP, TAG_NODE_NAME, TAG_ROLE
from gpucluster_agents.metrics.targets import refresh, target_groups


def _inst(iid: str, ip: str, tags: dict[str, str], state: str = "running") -> dict[str, Any]:
    return {
        "InstanceId": iid,
        "PrivateIpAddress": ip,
        "State": {"Name": state},
        "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
    }


INSTANCES = [
    _inst("i-1", "10.0.0.1", {TAG_CLUSTER: "c", TAG_NODE_GROUP: "p5", TAG_NODE_NAME: "p5-1"}),
    _inst("i-2", "10.0.0.2", {TAG_CLUSTER: "c", TAG_NODE_GROUP: "p5"}),  # not yet named by the agent
    _inst("i-h", "10.0.0.9", {TAG_CLUSTER: "c", TAG_ROLE: "head"}),
    _inst("i-l", "10.0.0.8", {TAG_CLUSTER: "c", TAG_ROLE: "login"}),  # neither head nor a node group's
    _inst("i-o", "10.0.0.3", {TAG_CLUSTER: "other", TAG_NODE_GROUP: "p5"}),
    _inst("i-s", "10.0.0.4", {TAG_CLUSTER: "c", TAG_NODE_GROUP: "p5"}, state="stopped"),
]


def test_only_the_clusters_running_head_and_gpu_nodes_with_their_labels() -> None:
    jobs = target_groups(INSTANCES, "c")
    assert jobs["gpu"] == [
        {"targets": ["10.0.0.1:9400"], "labels": {"instance_id": "i-1", "role": "compute", "node_group": "p5", "node": "p5-1"}},
        {"targets": ["10.0.0.2:9400"], "labels": {"instance_id": "i-2", "role": "compute", "node_group": "p5"}},
    ]
    assert [g["targets"] for g in jobs["node"]] == [["10.0.0.1:9100"], ["10.0.0.2:9100"]]
    assert jobs["head"] == [
        {"targets": ["10.0.0.9:9100"], "labels": {"instance_id": "i-h", "role": "head"}},
        {"targets": ["10.0.0.9:9400"], "labels": {"instance_id": "i-h", "role": "head"}},
    ]


class _Ec2:
    """DescribeInstances' paginator over fixed pages, or an error."""

    def __init__(self, pages: list[list[dict[str, Any]]] | Exception) -> None:
        self.pages = pages

    def get_paginator(self, name: str) -> Any:
        assert name == "describe_instances"
        pages = self.pages

        class Paginator:
            def paginate(self, Filters: list[dict[str, Any]]) -> Any:
                assert {"Name": "instance-state-name", "Values": ["running"]} in Filters
                if isinstance(pages, Exception):
                    raise pages
                return [{"Reservations": [{"Instances": page}]} for page in pages]

        return Paginator()


def test_files_are_written_whole_readable_and_kept_when_a_listing_fails(tmp_path: Path) -> None:
    assert refresh(_Ec2([INSTANCES[:1], INSTANCES[1:]]), "c", str(tmp_path))  # every page
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["gpu.json", "head.json", "node.json"]  # no temp file left
    assert all((tmp_path / f).stat().st_mode & 0o777 == 0o644 for f in files)  # Prometheus's user reads them
    good = {f: (tmp_path / f).read_text() for f in files}
    assert len(json.loads(good["gpu.json"])) == 2
    assert not refresh(_Ec2(RuntimeError("throttled")), "c", str(tmp_path))
    assert {f: (tmp_path / f).read_text() for f in files} == good  # the last good targets stay scraped
