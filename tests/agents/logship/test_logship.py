"""The log shipper (gpucluster_agents/logship) end to end against CloudWatch Logs' API in moto_server (the group
created first, as the stack does): files under the test's tmp dir → the shipper → ``get_log_events``.

Each test proves one promise of docs/logs.md: lines arrive whole and in order; a restart resumes
without duplicates; rotation (also while stopped) and truncation lose nothing; a log path through a link is
refused; an over-long line arrives in pieces with a marker; throttling is retried and nothing is lost; events
CloudWatch rejects are skipped; SIGTERM flushes (even a line without its newline) and exits 0."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from gpucluster_agents.contract.logs import parse_logs
from gpucluster_agents.logship import cli, files
from gpucluster_agents.logship.shipper import Shipper, make_client
from gpucluster_agents.logship.sink import Sink
from tests.agents.conftest import AGENT_PYTHON, REPO
from tests.agents.logship.throttle_proxy import ThrottleProxy
from tests.agents.moto_env import AWS_ENV, REGION, MotoServer

GROUP = "/gpucluster/testcl"
IID = "i-0123456789abcdef0"


@pytest.fixture
def cw(moto: MotoServer, aws_env: None) -> Any:
    client = boto3.session.Session(region_name=REGION).client("logs", endpoint_url=moto.url)
    client.create_log_group(logGroupName=GROUP)
    return client


def events(cw: Any, stream: str) -> list[str]:
    out: list[str] = []
    token: str | None = None
    while True:
        kw: dict[str, Any] = {"nextToken": token} if token else {}
        resp = cw.get_log_events(logGroupName=GROUP, logStreamName=f"{IID}/{stream}", startFromHead=True, **kw)
        out += [e["message"] for e in resp["events"]]
        if not resp["events"] or resp["nextForwardToken"] == token:
            return out
        token = resp["nextForwardToken"]


def write_config(tmp: Path, url: str, entries: list[tuple[str, str]], interval: int = 1) -> Path:
    (tmp / "log").mkdir(exist_ok=True)
    (tmp / "state").mkdir(exist_ok=True)
    doc = {
        "region": REGION,
        "log_group": GROUP,
        "files": [{"name": n, "path": str(tmp / "log" / p)} for n, p in entries],
        "log_root": str(tmp / "log"),
        "state_file": str(tmp / "state" / "state.json"),
        "flush_interval_seconds": interval,
        "endpoint_url": url,
    }
    path = tmp / "logs.json"
    path.write_text(json.dumps(doc))
    return path


def shipper(config: Path, url: str | None = None) -> Shipper:
    cfg = parse_logs(config.read_text())
    client = make_client(cfg if url is None else dataclasses.replace(cfg, endpoint_url=url))
    s = Shipper(cfg, IID, Sink(client, cfg.log_group))
    s.rotated_grace = 0.0
    s.sink.retry_base = 0.01
    return s


def append(path: Path, text: str) -> None:
    with open(path, "a") as fh:
        fh.write(text)


def test_lines_ship_in_order_and_a_restart_resumes_without_duplicates(tmp_path: Path, moto: MotoServer, cw: Any) -> None:
    config = write_config(tmp_path, moto.url, [("slurmd", "slurm/slurmd.log"), ("setup", "gpucluster/*.log")])
    log = tmp_path / "log"
    (log / "slurm").mkdir()
    (log / "gpucluster").mkdir()
    append(log / "slurm" / "slurmd.log", "one\n\ntwo ü\r\nthree")  # a blank line is no event; 'three' waits
    append(log / "gpucluster" / "a.log", "a1\n")
    append(log / "gpucluster" / "b.log", "b1\n")
    append(log / "gpucluster" / "c.txt", "not matched\n")
    s = shipper(config)
    assert s.run_pass() is False
    assert events(cw, "slurmd") == ["one", "two ü"]
    assert events(cw, "setup/a.log") == ["a1"] and events(cw, "setup/b.log") == ["b1"]
    s.close()
    append(log / "slurm" / "slurmd.log", " and four\nfive\n")
    assert cli.main(["once", "--config", str(config), "--instance-id", IID]) == 0  # a new process: from the state
    assert events(cw, "slurmd") == ["one", "two ü", "three and four", "five"]
    assert events(cw, "setup/a.log") == ["a1"]
    s = shipper(config)
    s.run_pass()
    append(log / "gpucluster" / "b.log", "b2\n")
    os.unlink(log / "gpucluster" / "b.log")  # deleted while followed: what it held ships, then it is closed, forgotten
    s.run_pass()
    assert events(cw, "setup/b.log") == ["b1", "b2"] and len(s.tracked) == 2
    state = json.loads((tmp_path / "state" / "state.json").read_text())["files"]
    assert sorted(e["path"].rsplit("/", 1)[1] for e in state.values()) == ["a.log", "slurmd.log"]
    s.close()
    streams = {d["logStreamName"] for d in cw.describe_log_streams(logGroupName=GROUP)["logStreams"]}
    assert streams == {f"{IID}/slurmd", f"{IID}/setup/a.log", f"{IID}/setup/b.log"}


def test_rotation_and_truncation_lose_nothing(tmp_path: Path, moto: MotoServer, cw: Any) -> None:
    config = write_config(tmp_path, moto.url, [("slurmd", "slurmd.log")])
    path = tmp_path / "log" / "slurmd.log"
    append(path, "a\n")
    s = shipper(config)
    s.run_pass()
    writer = open(path, "a")  # the daemon's descriptor: it writes on until it reopens its log
    os.rename(path, str(path) + ".1")
    append(path, "c\nc2\n")
    writer.write("b\nb-last")  # into the renamed file, its last line without a newline
    writer.close()
    s.run_pass()
    assert events(cw, "slurmd") == ["a", "b", "b-last", "c", "c2"]
    os.truncate(path, 0)  # copytruncate: shorter than what was shipped, so seen as truncated
    append(path, "d\n")
    s.run_pass()
    assert events(cw, "slurmd")[-1] == "d"
    s.close()
    # rotated while the shipper was stopped: the saved inode is found as slurmd.log.2 and finished
    append(path, "e\n")
    os.rename(path, str(path) + ".2")
    append(path, "f\n")
    s = shipper(config)
    s.run_pass()
    s.close()
    assert events(cw, "slurmd") == ["a", "b", "b-last", "c", "c2", "d", "e", "f"]
    state = json.loads((tmp_path / "state" / "state.json").read_text())["files"]
    assert [e["offset"] for e in state.values()] == [2]  # only the current file is kept


def test_a_log_path_through_a_link_is_refused(
    tmp_path: Path, moto: MotoServer, cw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    config = write_config(tmp_path, moto.url, [("slurmd", "slurmd.log"), ("d", "linked/x.log"), ("g", "g/*.log")])
    secret = tmp_path / "shadow"
    secret.write_text("root:secret-hash\n")
    log = tmp_path / "log"
    (log / "slurmd.log").symlink_to(secret)
    (log / "linked").symlink_to(tmp_path)  # a directory of the path is a link
    (tmp_path / "x.log").write_text("through a directory link\n")
    (log / "g").mkdir()
    (log / "g" / "ok.log").write_text("real\n")
    (log / "g" / "evil.log").symlink_to(secret)
    with caplog.at_level(logging.ERROR, logger="gpucluster_agents.logship"):
        shipper(config).run_pass()
    streams = {d["logStreamName"] for d in cw.describe_log_streams(logGroupName=GROUP)["logStreams"]}
    assert streams == {f"{IID}/g/ok.log"}
    assert events(cw, "g/ok.log") == ["real"]
    refused = [r.getMessage() for r in caplog.records if "not shipping" in r.getMessage()]
    assert any("slurmd.log" in m for m in refused) and any("linked" in m for m in refused)
    with pytest.raises(files.Refused):
        files.open_log(str(log / "slurmd.log"))


def test_an_over_long_line_arrives_in_pieces_with_a_marker(tmp_path: Path, moto: MotoServer, cw: Any) -> None:
    config = write_config(tmp_path, moto.url, [("health", "health.log")])
    long = "é" * 200_000 + "x" * 300_001  # 700 KB: three events, a character never cut in two
    append(tmp_path / "log" / "health.log", "before\n" + long + "\nafter\n")
    shipper(config).run_pass()
    got = events(cw, "health")
    assert got[0] == "before" and got[-1] == "after" and len(got) == 5
    pieces = got[1:-1]
    assert all(p.endswith(files.CONTINUED) for p in pieces[:-1]) and not pieces[-1].endswith(files.CONTINUED)
    assert all(len(p.encode()) <= files.MAX_EVENT_BYTES for p in pieces)
    assert "".join(p.removesuffix(files.CONTINUED) for p in pieces) == long


def test_throttling_is_retried_and_nothing_is_lost(tmp_path: Path, moto: MotoServer, cw: Any) -> None:
    proxy = ThrottleProxy(moto.url)
    try:
        config = write_config(tmp_path, moto.url, [("slurmd", "slurmd.log")])
        append(tmp_path / "log" / "slurmd.log", "".join(f"line {i}\n" for i in range(50)))
        proxy.throttle["PutLogEvents"] = 3
        s = shipper(config, url=proxy.url)
        s.run_pass()
        assert not s.failed
        assert [code for action, code in proxy.seen if action == "PutLogEvents"] == [400, 400, 400, 200]
        assert events(cw, "slurmd") == [f"line {i}" for i in range(50)]
        # throttled past every retry: the pass fails, the offset stays, the next pass ships it once
        append(tmp_path / "log" / "slurmd.log", "late\n")
        proxy.throttle["PutLogEvents"] = s.sink.attempts
        s.run_pass()
        assert s.failed and events(cw, "slurmd")[-1] == "line 49", proxy.seen
        s.run_pass()
        assert not s.failed and events(cw, "slurmd")[-2:] == ["line 49", "late"]
    finally:
        proxy.stop()


def test_events_cloudwatch_rejects_are_skipped(
    tmp_path: Path, moto: MotoServer, cw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    config = write_config(tmp_path, moto.url, [("slurmd", "slurmd.log")])
    append(tmp_path / "log" / "slurmd.log", "from a wrong clock\n")
    s = shipper(config)
    s.clock = lambda: time.time() - 20 * 86400  # older than 14 days: rejected
    with caplog.at_level(logging.WARNING, logger="gpucluster_agents.logship"):
        s.run_pass()
    assert "rejected" in caplog.text and not s.failed
    s.clock = time.time
    append(tmp_path / "log" / "slurmd.log", "next\n")
    s.run_pass()
    assert events(cw, "slurmd") == ["next"]  # skipped once, not retried forever


def test_the_loop_ships_and_sigterm_flushes_then_exits_0(tmp_path: Path, moto: MotoServer, cw: Any) -> None:
    config = write_config(tmp_path, moto.url, [("slurmd", "slurmd.log")], interval=1)
    path = tmp_path / "log" / "slurmd.log"
    append(path, "first\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **AWS_ENV}
    cmd = [AGENT_PYTHON, "-m", "gpucluster_agents.logship", "run", "--config", str(config), "--instance-id", IID]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait(lambda: events_or_none(cw, "slurmd") == ["first"])
        append(path, "second\nlast words without a newline")  # the loop ships 'second' and keeps the rest
        _wait(lambda: events_or_none(cw, "slurmd") == ["first", "second"])
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert events(cw, "slurmd") == ["first", "second", "last words without a newline"]


def events_or_none(cw: Any, stream: str) -> list[str] | None:
    try:
        return events(cw, stream)
    except cw.exceptions.ResourceNotFoundException:
        return None


def _wait(cond: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.fixture
def imds() -> Iterator[str]:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def _send(self, code: int, body: str) -> None:
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def do_PUT(self) -> None:
            ok = self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
            self._send(200 if ok else 400, "tok")

        def do_GET(self) -> None:  # IMDSv2 only: no token, no answer
            ok = self.path == "/latest/meta-data/instance-id" and self.headers.get("X-aws-ec2-metadata-token") == "tok"
            self._send(200 if ok else 401, IID if ok else "")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_instance_id_comes_from_imdsv2(imds: str) -> None:
    assert cli.instance_id(imds) == IID
