"""``gpucluster-aws node-name`` (boot.py): a booting compute node finds its Slurm node name in its launch's
node map in S3 (moto), found through the launch-token tag in its instance metadata (a fake IMDSv2 on a
free port), and waits for a map that is late or lacks it; a node-name tag wins."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from gpucluster_agents.boot import helper as boot
from gpucluster_agents.boot.helper import BootConfig
from tests.agents.moto_env import REGION, MotoServer

TOKEN = "0123456789abcdef0123456789abcdef"
BUCKET = "testcl-artifacts"


class FakeImds:
    """IMDSv2: the token PUT, ``meta-data/instance-id`` and ``meta-data/tags/instance/<key>``."""

    def __init__(self, instance_id: str, tags: dict[str, str]) -> None:
        self.instance_id, self.tags, self.requests = instance_id, tags, 0
        imds = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(self, code: int, body: str) -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PUT(self) -> None:
                ok = self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
                self._send(200 if ok else 400, "tok" if ok else "")

            def do_GET(self) -> None:
                imds.requests += 1
                if self.headers.get("X-aws-ec2-metadata-token") != "tok":
                    return self._send(401, "")
                prefix = "/latest/meta-data/tags/instance/"
                if self.path == "/latest/meta-data/instance-id":
                    return self._send(200, imds.instance_id)
                if self.path.startswith(prefix) and self.path[len(prefix) :] in imds.tags:
                    return self._send(200, imds.tags[self.path[len(prefix) :]])
                return self._send(404, "")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def node(moto: MotoServer, aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeImds, Any]]:
    imds = FakeImds("i-0000000000000002", {"gpucluster:launch-token": TOKEN, "gpucluster:node-group": "p5"})
    monkeypatch.setattr(boot, "IMDS", imds.url)
    monkeypatch.setenv("GPUCLUSTER_S3_ENDPOINT", moto.url)
    s3 = boto3.session.Session(region_name=REGION).client("s3", endpoint_url=moto.url)
    s3.create_bucket(Bucket=BUCKET)
    try:
        yield imds, s3
    finally:
        imds.stop()


CFG = BootConfig("testcl", REGION, "s", "/etc/p.json", (), f"s3://{BUCKET}/node-maps/")


def put_map(s3: Any, nodes: dict[str, str]) -> None:
    body = json.dumps({"token": TOKEN, "group": "p5", "nodes": nodes})
    s3.put_object(Bucket=BUCKET, Key=f"node-maps/{TOKEN}.json", Body=body.encode())


class Clock:
    """A fake clock the fake sleep advances; ``on_sleep`` runs at each sleep (a map appearing late)."""

    def __init__(self, on_sleep: Any = None) -> None:
        self.now, self.sleeps, self.on_sleep = 0.0, [], on_sleep

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s
        if self.on_sleep:
            self.on_sleep(len(self.sleeps))

    def __call__(self) -> float:
        return self.now


def test_a_node_finds_its_name_in_its_batchs_map(node: tuple[FakeImds, Any]) -> None:
    _, s3 = node
    put_map(s3, {"i-0000000000000001": "p5-1", "i-0000000000000002": "p5-7", "i-0000000000000003": "p5-3"})
    clock = Clock()
    assert boot.node_name(CFG, sleep=clock.sleep, clock=clock) == "p5-7"
    assert clock.sleeps == []


def test_a_late_map_and_a_map_without_the_instance_are_retried(node: tuple[FakeImds, Any]) -> None:
    _, s3 = node

    def later(n: int) -> None:
        if n == 2:  # the map arrives, but another batch's instance first... (a torn/partial view)
            put_map(s3, {"i-0000000000000001": "p5-1"})
        if n == 4:
            put_map(s3, {"i-0000000000000001": "p5-1", "i-0000000000000002": "p5-2"})

    clock = Clock(later)
    assert boot.node_name(CFG, sleep=clock.sleep, clock=clock) == "p5-2"
    assert clock.sleeps == [1.0, 2.0, 4.0, 8.0]  # backoff, capped at 10 s


def test_no_map_until_the_deadline_stops_with_a_message(node: tuple[FakeImds, Any]) -> None:
    clock = Clock()
    with pytest.raises(SystemExit, match="no gpucluster:node-name tag and no node map entry for this instance after 60 s"):
        boot.node_name(CFG, wait=60, sleep=clock.sleep, clock=clock)
    assert sum(clock.sleeps) <= 60 and clock.sleeps[-1] == 10.0


def test_the_node_name_tag_wins_and_needs_no_map(node: tuple[FakeImds, Any]) -> None:
    imds, s3 = node
    put_map(s3, {"i-0000000000000002": "p5-2"})
    imds.tags["gpucluster:node-name"] = "p5-9"  # e.g. a static node, or maintain tagged it already
    clock = Clock()
    assert boot.node_name(CFG, sleep=clock.sleep, clock=clock) == "p5-9"
    no_maps = BootConfig("testcl", REGION, "s", "/etc/p.json", ())
    assert boot.node_name(no_maps, sleep=clock.sleep, clock=clock) == "p5-9"


def test_a_name_that_is_not_a_node_name_is_refused(node: tuple[FakeImds, Any]) -> None:
    _, s3 = node
    put_map(s3, {"i-0000000000000002": "p5-1; rm -rf /"})
    clock = Clock()
    with pytest.raises(SystemExit, match="refusing node name"):
        boot.node_name(CFG, sleep=clock.sleep, clock=clock)


def test_node_maps_in_the_boot_config_is_checked_and_round_trips() -> None:
    assert boot.parse_config(json.loads(CFG.to_json())) == CFG
    assert "node_maps" not in json.loads(BootConfig("c", REGION, "s", "/p", ()).to_json())
    bad = {**json.loads(CFG.to_json()), "node_maps": "s3://Bad/x"}
    with pytest.raises(boot.BootConfigError, match="node_maps: must be s3://<bucket>/<prefix>/"):
        boot.parse_config(bad)
