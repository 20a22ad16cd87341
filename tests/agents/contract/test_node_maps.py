"""Resume at scale: node names through one S3 node map per CreateFleet batch (``nodemap.py``), no EC2
call per node during the resume, the names kept by the agent (``names.py``) until ``maintain`` tags the
instances; against moto through the fault proxy (which records and breaks S3 calls too)."""

from __future__ import annotations

import json
import signal
from typing import Any

import boto3
import pytest

from gpucluster_agents.contract import ConfigError, parse, to_json
from gpucluster_agents.contract.nodemap import NodeMap
from tests.agents.conftest import CLUSTER, Harness
from tests.agents.moto_env import REGION, instances
from tests.agents.test_config import MINIMAL

BUCKET = "testcl-artifacts"


def s3(url: str) -> Any:
    return boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION).client(
        "s3", endpoint_url=url
    )


def with_maps(harness: Harness) -> Harness:
    s3(harness.moto.url).create_bucket(Bucket=BUCKET)
    harness.config["node_map"] = {"bucket": BUCKET, "endpoint_url": harness.proxy.url}
    return harness


def published(harness: Harness) -> dict[str, dict[str, Any]]:
    """token -> node map document, as the booting instances read them."""
    client = s3(harness.moto.url)
    out: dict[str, dict[str, Any]] = {}
    for obj in client.list_objects_v2(Bucket=BUCKET, Prefix="node-maps/").get("Contents", []):
        doc = json.loads(client.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read())
        assert obj["Key"] == f"node-maps/{doc['token']}.json"
        out[doc["token"]] = doc
    return out


def names_file(harness: Harness) -> dict[str, Any]:
    path = harness.tmp / "state" / "names.json"
    return json.loads(path.read_text()) if path.exists() else {}


def test_resume_names_nodes_with_one_map_per_batch_and_no_per_node_ec2_call(harness: Harness) -> None:
    with_maps(harness)
    harness.config["max_instances_per_fleet"] = 4
    assert harness.slurm_resume("p5-[1-6],g6e-[1-2]") == 0
    calls = harness.proxy.actions()
    assert calls["CreateTags"] == 0
    assert calls["CreateFleet"] == 3  # p5: 4 + 2, g6e: 2
    assert calls["S3.PutObject"] == 3  # one map per batch
    assert calls["DescribeInstances"] == 1 + 3  # the inventory, then one per batch
    maps = published(harness)
    assert len(maps) == 3
    by_id = {i["InstanceId"]: i for i in instances(harness.moto.url, CLUSTER)}
    named: dict[str, str] = {}
    for token, doc in maps.items():
        for iid, node in doc["nodes"].items():
            # the booting instance finds its map by the launch-token tag CreateFleet put on it
            assert by_id[iid]["tags"]["gpucluster:launch-token"] == token
            assert by_id[iid]["tags"]["gpucluster:node-group"] == doc["group"] == node.split("-")[0]
            assert "gpucluster:node-name" not in by_id[iid]["tags"]  # no tag yet: maintain sets it
            named[iid] = node
    assert sorted(named.values()) == sorted(["p5-1", "p5-2", "p5-3", "p5-4", "p5-5", "p5-6", "g6e-1", "g6e-2"])
    assert {iid: e["node"] for iid, e in names_file(harness).items()} == named
    for iid, node in named.items():
        assert harness.slurm.node(node)["addr"] == by_id[iid]["PrivateIpAddress"]
    assert not list((harness.tmp / "state" / "journal").glob("*.json"))

    # the maintenance pass tags them (off the resume path) and empties the name book
    harness.proxy.clear()
    assert harness.run("maintain") == 0
    assert harness.proxy.actions()["CreateTags"] == 8
    assert {n: ids for n, ids in harness.nodes().items()} == {node: [iid] for iid, node in named.items()}
    assert names_file(harness) == {}
    for inst in instances(harness.moto.url, CLUSTER):
        assert inst["tags"]["Name"] == f"{CLUSTER}-{named[inst['InstanceId']]}"
    harness.proxy.clear()
    assert harness.run("maintain") == 0
    assert harness.proxy.actions()["CreateTags"] == 0  # nothing left to name


def test_the_name_book_alone_rebuilds_the_inventory(harness: Harness) -> None:
    # No tag on any instance: every later call (another process each) still knows which node owns which.
    with_maps(harness)
    assert harness.slurm_resume("p5-[1-3]") == 0
    before = {e["node"]: iid for iid, e in names_file(harness).items()}
    harness.proxy.clear()
    assert harness.slurm_resume("p5-[1-3]") == 0  # a retried resume reuses, launches nothing
    assert harness.proxy.actions()["CreateFleet"] == 0
    assert f"decision reuse node=p5-2 instance={before['p5-2']}" in harness.log_text()
    # suspend finds p5-2's instance through the name book alone
    assert harness.slurm_suspend("p5-2") == 0
    live = {i["InstanceId"] for i in instances(harness.moto.url, CLUSTER)}
    assert live == {before["p5-1"], before["p5-3"]}
    assert harness.slurm_suspend("p5-[1,3]") == 0
    assert instances(harness.moto.url, CLUSTER) == []
    assert harness.run("maintain") == 0
    assert set(names_file(harness)) == set(before.values())  # unlisted: kept for the grace (eventual consistency)
    harness.config["orphan_grace_seconds"] = 0
    assert harness.run("maintain") == 0
    assert names_file(harness) == {}


def test_a_map_s3_refuses_falls_back_to_tags(harness: Harness) -> None:
    with_maps(harness)
    harness.proxy.fail("S3.PutObject", "AccessDenied", n=20)
    assert harness.slurm_resume("p5-[1-2]") == 0
    assert harness.proxy.actions()["CreateTags"] == 2
    assert sorted(harness.nodes()) == ["p5-1", "p5-2"]
    assert names_file(harness) == {}
    assert "api PutObject s3://testcl-artifacts/node-maps/" in harness.log_text() and "AccessDenied" in harness.log_text()


def test_crash_after_the_map_is_published_is_adopted_from_the_journal(harness: Harness) -> None:
    # Injected: the agent dies right after S3 took the map, before the name book and the journal's end.
    with_maps(harness)
    harness.slurm.set("p5-1", "IDLE+CLOUD+POWERING_UP")
    c = harness.proxy.crash_client("S3.PutObject", "after")
    proc = harness.spawn("resume", "p5-1")
    c.pid = proc.pid
    c.ready.set()
    assert proc.wait(timeout=60) == -signal.SIGKILL
    (iid,) = harness.nodes()[""]
    (doc,) = published(harness).values()
    assert doc["nodes"] == {iid: "p5-1"}  # the node boots as p5-1 ...
    assert names_file(harness) == {}
    assert harness.run("maintain") == 0  # ... and the journal gives the agent the same answer
    assert harness.nodes() == {"p5-1": [iid]}
    assert f"decision adopt instance={iid} node=p5-1" in harness.log_text()


def test_node_map_config_is_validated_and_round_trips() -> None:
    cfg = parse({**MINIMAL, "node_map": {"bucket": "my-bucket.v2", "prefix": "maps/node/"}})
    assert cfg.node_map == NodeMap("my-bucket.v2", "maps/node/")
    assert cfg.node_map is not None and cfg.node_map.key("ab" * 16) == f"maps/node/{'ab' * 16}.json"
    assert parse(json.loads(to_json(cfg))) == cfg
    assert "node_map" not in json.loads(to_json(parse(MINIMAL)))
    with pytest.raises(ConfigError) as err:
        parse({**MINIMAL, "node_map": {"bucket": "Bad_Bucket", "prefix": "../x", "colour": 1}})
    text = str(err.value)
    assert "node_map.bucket: 'Bad_Bucket' is not valid" in text
    assert "node_map.prefix: '../x' is not valid" in text
    assert "node_map.colour: unknown key" in text
    with pytest.raises(ConfigError, match=r"node_map\.bucket: required key is missing"):
        parse({**MINIMAL, "node_map": {}})


def test_an_instance_named_only_by_its_map_is_never_taken_for_an_orphan(harness: Harness) -> None:
    # Tagging fails for a while (throttled, or denied): past the orphan grace, the sweep must still see the
    # instances as their nodes' (the name book), never terminate them, and maintain tags them later.
    with_maps(harness)
    assert harness.slurm_resume("p5-[1-2]") == 0
    before = {i["InstanceId"] for i in instances(harness.moto.url, CLUSTER)}
    harness.slurm.set("p5-[1-2]", "IDLE+CLOUD")  # registered, running
    harness.config["orphan_grace_seconds"] = 0
    harness.proxy.fail("CreateTags", "UnauthorizedOperation", n=2)
    assert harness.run("maintain") == 0
    assert {i["InstanceId"] for i in instances(harness.moto.url, CLUSTER)} == before
    assert harness.proxy.actions()["TerminateInstances"] == 0
    assert set(names_file(harness)) == before  # still only named by the book
    assert harness.run("maintain") == 0
    assert sorted(harness.nodes()) == ["p5-1", "p5-2"] and names_file(harness) == {}
