"""The Slurm head node's collector end to end on 127.0.0.1: Debian's real ``prometheus`` in agent mode, started with
the rendered unit's own flags and the rendered config, scrapes the targets that gpucluster's signer (the node
package's, started with its rendered unit's command line) lists in EC2 (a moto server) and writes as file-based
discovery files, and remote-writes through that signer to AMP (a local receiver standing in for it), which checks
the SigV4 signature against the request it got.

What the test changes, and only that: the endpoints (the signer's EC2 calls go to the moto server through the SDK's
``AWS_ENDPOINT_URL_EC2``; it forwards to the receiver instead of AMP's HTTPS endpoint), the paths and listen ports of
the units' command lines (under the test's directory, free ports), and the timings (targets listed, scrapes and
queue flushes every second instead of every 60 s / 30 s / 5 s) so it runs in seconds. The signer's credentials are
fake ones in its environment, where the head node's signer takes the instance role's from IMDS through the same SDK
chain. The rendered Prometheus config makes no AWS call (tests/render/monitoring/test_collection.py): on the head
node the IMDS guard refuses its user.

The instances are tagged as the stack tags them (``gpucluster:cluster``, ``gpucluster:node-group`` and
``gpucluster:node-name`` on a GPU node, ``gpucluster:role=head`` on the head node), plus a GPU node of another cluster
and a stopped one of this cluster: neither may be scraped. The GPU nodes' private addresses are not reachable from
here, so each scrape fails and Prometheus writes ``up 0`` for it: that series, decoded from what the receiver got,
carries the labels the alert rules and dashboards select on.

Why the signer: the same Prometheus, told to sign itself (``sigv4:``), sends its writes unsigned (Debian's build):
the last test proves it, so the day a fixed package signs, it fails and says the signer may go.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from gpucluster.render.monitoring.collection import (
    AGENT_WAL_PATH,
    GPU_EXPORTER_PORT,
    NODE_EXPORTER_PORT,
    PROMETHEUS_CONFIG_PATH,
    TARGETS_DIR,
    prometheus_agent_config,
)
from gpucluster.render.slurm.collector import COLLECTOR_LISTEN, SIGNER_LISTEN, collector_unit, signer_unit
from gpucluster_agents.contract import TAG_CLUSTER, TAG_NODE_GROUP, TAG_NODE_NAME, TAG_ROLE
from tests.agents.moto_env import AMI_ID, REGION, MotoServer, ec2_client
from tests.conftest import ROOT, require_tool
from tests.e2e.prometheus_stack import HOST, Daemons, free_port, get_json, wait_for
from tests.e2e.remote_write import Post, Receiver, write_request_series

pytestmark = pytest.mark.slow  # starts Prometheus and a moto server

CLUSTER = "slurm-p5"
WORKSPACE = "ws-12345678-abcd-ef01-2345-6789abcdef01"
WRITE_PATH = f"/workspaces/{WORKSPACE}/api/v1/remote_write"
SELF_SIGNED = "/self-signed"
"""Where the same Prometheus also writes with its own ``sigv4:`` block (no signer): what Debian's build sends."""
KEY, SECRET = "AKIDGPUCLUSTERTEST", "gpucluster-test-secret"
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": KEY,
    "AWS_SECRET_ACCESS_KEY": SECRET,
    "AWS_DEFAULT_REGION": REGION,
    "AWS_CONFIG_FILE": "/dev/null",
    "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@dataclass
class Collector:
    url: str
    receiver: Receiver
    daemons: Daemons
    wal: Path
    signer: str
    ips: dict[str, str]
    """instance name (p5-1, p5-2, head, other, stopped) → private IP"""
    ids: dict[str, str]


def _instances(moto: str) -> tuple[dict[str, str], dict[str, str]]:
    """Running GPU nodes p5-1 and p5-2 and the head node of the cluster; a GPU node of another cluster; a stopped
    GPU node of this cluster."""
    ec2 = ec2_client(moto)
    tagged = {
        "p5-1": {TAG_CLUSTER: CLUSTER, TAG_NODE_GROUP: "p5", TAG_NODE_NAME: "p5-1"},
        "p5-2": {TAG_CLUSTER: CLUSTER, TAG_NODE_GROUP: "p5", TAG_NODE_NAME: "p5-2"},
        "head": {TAG_CLUSTER: CLUSTER, TAG_ROLE: "head"},
        "other": {TAG_CLUSTER: "other", TAG_NODE_GROUP: "p5", TAG_NODE_NAME: "p5-1"},
        "stopped": {TAG_CLUSTER: CLUSTER, TAG_NODE_GROUP: "p5", TAG_NODE_NAME: "p5-3"},
    }
    ips, ids = {}, {}
    for name, tags in tagged.items():
        spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
        inst = ec2.run_instances(ImageId=AMI_ID, MinCount=1, MaxCount=1, InstanceType="m7i.large", TagSpecifications=spec)
        ips[name], ids[name] = inst["Instances"][0]["PrivateIpAddress"], inst["Instances"][0]["InstanceId"]
    ec2.stop_instances(InstanceIds=[ids["stopped"]])
    return ips, ids


def _test_config(targets: Path, signer: str, receiver: Receiver) -> str:
    """The rendered config with the targets' directory, the signer's address and the timings swapped; and a second
    remote write, signed by Prometheus itself, straight to the receiver."""
    doc = yaml.safe_load(prometheus_agent_config(CLUSTER, WORKSPACE, 30, signer=SIGNER_LISTEN))
    doc["global"].update(scrape_interval="1s", scrape_timeout="1s")
    for job in doc["scrape_configs"]:
        job["scrape_interval"] = "1s"
        for sd in job["file_sd_configs"]:
            assert sd["files"] == [f"{TARGETS_DIR}/{job['job_name']}.json"]
            sd["files"] = [str(targets / f"{job['job_name']}.json")]
    write = doc["remote_write"][0]
    assert write["url"] == f"http://{SIGNER_LISTEN}{WRITE_PATH}"
    write["url"] = f"http://{signer}{WRITE_PATH}"
    write["queue_config"]["batch_send_deadline"] = "1s"
    doc["remote_write"].append(
        {"url": receiver.url(SELF_SIGNED), "sigv4": {"region": REGION}, "queue_config": {"batch_send_deadline": "1s"}}
    )
    return yaml.safe_dump(doc)


def _exec_start(unit: str, swaps: dict[str, str]) -> list[str]:
    """A rendered unit's ExecStart as argv, with ``swaps`` applied (each must be there)."""
    line = next(x for x in unit.splitlines() if x.startswith("ExecStart="))
    argv = shlex.split(line.removeprefix("ExecStart="))
    for old, new in swaps.items():
        assert any(old in a for a in argv), f"the unit's command names no {old}"
        argv = [a.replace(old, new) for a in argv]
    return argv


@pytest.fixture(scope="module")
def collector(moto_server: MotoServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    prometheus = require_tool("prometheus")
    tmp = tmp_path_factory.mktemp("collector")
    moto_server.reset()
    ips, ids = _instances(moto_server.url)
    receiver = Receiver()
    daemons = Daemons(tmp)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp)}
    targets = tmp / "targets"  # the signer unit's StateDirectory
    targets.mkdir()
    try:
        signer = f"{HOST}:{free_port()}"
        swaps = {SIGNER_LISTEN: signer, "/usr/bin/python3": sys.executable, TARGETS_DIR: str(targets)}
        argv = _exec_start(signer_unit(REGION, WORKSPACE, CLUSTER), swaps)
        upstream = receiver.url("")
        # the unit's WorkingDirectory holds the package: here, the repository's root
        signer_env = env | AWS_ENV | {"AWS_ENDPOINT_URL_EC2": moto_server.url}
        daemons.start("signer", [*argv, "--upstream", upstream, "--targets-every", "1"], env=signer_env, cwd=ROOT)
        host, signer_port = signer.rsplit(":", 1)
        # listening before any test talks to it (a test may run first on its own worker)
        wait_for(
            "the signer",
            lambda: socket.create_connection((host, int(signer_port)), timeout=1).close() or True,
            15,
            daemons,
            "signer",
        )
        config = tmp / "prometheus.yml"
        config.write_text(_test_config(targets, signer, receiver))
        port = free_port()
        swaps = {PROMETHEUS_CONFIG_PATH: str(config), AGENT_WAL_PATH: str(tmp / "wal"), COLLECTOR_LISTEN: f"{HOST}:{port}"}
        argv = _exec_start(collector_unit(), swaps)
        # the credentials only for the last test's own sigv4: write (the rendered config has no AWS call of its own)
        daemons.start("prometheus", [prometheus, *argv[1:]], env=env | AWS_ENV)
        yield Collector(f"http://{HOST}:{port}", receiver, daemons, tmp / "wal", signer, ips, ids)
    finally:
        daemons.stop()
        receiver.close()


def _posts(c: Collector, path: str) -> list[Post]:
    return [p for p in list(c.receiver.posts) if p.path == path]


def _series(c: Collector) -> list[tuple[dict[str, str], int]]:
    return [s for post in _posts(c, WRITE_PATH) for s in write_request_series(post.body)]


def _up(c: Collector) -> dict[tuple[str, str], dict[str, str]]:
    """The ``up`` series written so far, by (job, instance)."""
    return {(labels["job"], labels["instance"]): labels for labels, _ in _series(c) if labels.get("__name__") == "up"}


def _expected_signature(post: Post, url: str) -> str:
    """The SigV4 signature for ``aps`` of what the receiver got, computed again from the request alone."""
    signed = re.search(r"SignedHeaders=([^,]+)", post.headers["authorization"])
    assert signed is not None
    headers = {name: post.headers[name] for name in signed.group(1).split(";")}
    request = AWSRequest(method="POST", url=url, data=post.body, headers=headers)
    request.context["timestamp"] = post.headers["x-amz-date"]
    auth = SigV4Auth(Credentials(KEY, SECRET), "aps", REGION)
    return str(auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request))


def test_remote_writes_reach_amp_signed_for_aps_and_snappy_encoded(collector: Collector) -> None:
    wait_for("a remote write", lambda: _posts(collector, WRITE_PATH), 15, collector.daemons, "prometheus")
    post = _posts(collector, WRITE_PATH)[0]
    auth = post.headers.get("authorization", "")
    # SigV4 with the environment's key, for AMP's signing name and the workspace's region
    pattern = (
        rf"AWS4-HMAC-SHA256 Credential={KEY}/\d{{8}}/{REGION}/aps/aws4_request, SignedHeaders=(\S+), Signature=([0-9a-f]{{64}})"
    )
    match = re.fullmatch(pattern, auth)
    assert match is not None, (auth, collector.daemons.log("signer"))
    assert {"host", "x-amz-date", "content-encoding", "content-type"} <= set(match.group(1).split(";"))
    assert match.group(2) == _expected_signature(post, collector.receiver.url(WRITE_PATH))
    assert post.headers["content-encoding"] == "snappy"
    assert post.headers["content-type"] == "application/x-protobuf"
    assert post.headers["x-prometheus-remote-write-version"].startswith("0.1")


def test_the_signer_forwards_only_the_workspaces_remote_writes(collector: Collector) -> None:
    """Not a general signing proxy of the role: another path gets 404 and reaches nothing."""
    import urllib.error
    import urllib.request

    before = len(collector.receiver.posts)
    for path in ("/workspaces/ws-other/api/v1/remote_write", "/", f"{WRITE_PATH}/../../../x"):
        request = urllib.request.Request(f"http://{collector.signer}{path}", data=b"x", method="POST")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request, timeout=5)
        assert err.value.code == 404, path
    assert not [p for p in collector.receiver.posts[before:] if not p.path.startswith((WRITE_PATH, SELF_SIGNED))]


def test_discovers_the_clusters_running_instances_by_tag_and_labels_their_series(collector: Collector) -> None:
    ips, ids = collector.ips, collector.ids
    gpu = {f"{ips[n]}:{GPU_EXPORTER_PORT}": n for n in ("p5-1", "p5-2")}
    host = {f"{ips[n]}:{NODE_EXPORTER_PORT}": n for n in ("p5-1", "p5-2")}
    head = {f"{ips['head']}:{p}" for p in (GPU_EXPORTER_PORT, NODE_EXPORTER_PORT)}
    expected = {("gpu", a) for a in gpu} | {("node", a) for a in host} | {("head", a) for a in head}

    def written() -> dict[tuple[str, str], dict[str, str]] | None:
        up = _up(collector)
        return up if expected <= set(up) else None

    up = wait_for("an up series of every target", written, 15, collector.daemons, "prometheus")
    assert set(up) == expected, "only the cluster's running instances: not another cluster's, not a stopped one"
    for (job, address), labels in up.items():
        assert labels["cluster"] == CLUSTER  # the external label
        if job == "head":
            assert labels["role"] == "head" and labels["instance_id"] == ids["head"]
        else:
            name = (gpu | host)[address]
            assert (labels["role"], labels["node_group"], labels["node"]) == ("compute", "p5", name)
            assert labels["instance_id"] == ids[name]
    # the agent's own view of its targets agrees (agent mode keeps the targets API)
    active: list[dict[str, Any]] = get_json(f"{collector.url}/api/v1/targets")["data"]["activeTargets"]
    assert {(t["labels"]["job"], t["labels"]["instance"]) for t in active} == expected


def test_agent_mode_keeps_only_a_wal_and_answers_no_query(collector: Collector) -> None:
    """Agent mode: the WAL only (no TSDB block), and no query API: nothing on the head node answers PromQL."""
    wait_for("a remote write", lambda: _posts(collector, WRITE_PATH), 15, collector.daemons, "prometheus")
    assert (collector.wal / "wal").is_dir()
    assert not [p for p in collector.wal.iterdir() if re.fullmatch(r"01[0-9A-Z]{24}", p.name)], "no TSDB block"
    with pytest.raises(OSError) as err:  # urllib's HTTPError
        get_json(f"{collector.url}/api/v1/query?query=up")
    assert getattr(err.value, "code", None) is not None, err.value


def test_debians_prometheus_sends_its_own_sigv4_writes_unsigned(collector: Collector) -> None:
    """Why the signer exists: the same Prometheus's second remote write, signed by itself (``sigv4:``), arrives
    without any signature. When a fixed package signs, this fails: the signer may then go."""
    wait_for("a self-signed write", lambda: _posts(collector, SELF_SIGNED), 15, collector.daemons, "prometheus")
    assert "authorization" not in _posts(collector, SELF_SIGNED)[0].headers
