"""The collector's SigV4 signer (gpucluster_agents/metrics/signer.py) in-process, with a stand-in signing function:
what Prometheus sees when AMP refuses or cannot be reached (its retry logic keys on the status), and the signing
itself with botocore (the end-to-end test, tests/e2e/test_collector_e2e.py, checks a real Prometheus's writes)."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gpucluster_agents.metrics.httploop import BoundedServer
from gpucluster_agents.metrics.signer import aps_signer, make_signer_server
from tests.e2e.prometheus_stack import free_port
from tests.e2e.remote_write import Receiver

WORKSPACE = "ws-12345678-abcd-ef01-2345-6789abcdef01"
PATH = f"/workspaces/{WORKSPACE}/api/v1/remote_write"


def _serve(server: ThreadingHTTPServer | BoundedServer) -> Iterator[str]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _post(url: str) -> int:
    request = urllib.request.Request(url, data=b"payload", method="POST", headers={"Content-Encoding": "snappy"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        return err.code


class _Refuse(BaseHTTPRequestHandler):
    """AMP throttling: 429 with its message."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b"rate exceeded"
        self.send_response(429)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def amp() -> Iterator[Receiver]:
    receiver = Receiver()
    try:
        yield receiver
    finally:
        receiver.close()


def test_signs_and_forwards_the_workspaces_writes_only(amp: Receiver) -> None:
    seen: list[str] = []

    def sign(url: str, body: bytes, headers: dict[str, str]) -> dict[str, str]:
        seen.append(url)
        return {**headers, "Authorization": "AWS4-HMAC-SHA256 stand-in"}

    server = make_signer_server(("127.0.0.1", 0), amp.url(""), WORKSPACE, sign)
    for signer in _serve(server):
        assert _post(signer + PATH) == 200
        assert _post(signer + "/workspaces/ws-other/api/v1/remote_write") == 404
    assert seen == [amp.url(PATH)]
    assert [(p.path, p.body, p.headers["authorization"], p.headers["content-encoding"]) for p in amp.posts] == [
        (PATH, b"payload", "AWS4-HMAC-SHA256 stand-in", "snappy")
    ]


def test_amps_refusal_reaches_prometheus_and_an_unreachable_amp_is_a_502() -> None:
    """429/5xx are what Prometheus retries: they must come back as AMP sent them; no answer at all is a 502."""
    refused = ThreadingHTTPServer(("127.0.0.1", 0), _Refuse)
    for upstream in _serve(refused):
        for signer in _serve(make_signer_server(("127.0.0.1", 0), upstream, WORKSPACE, lambda u, b, h: h)):
            assert _post(signer + PATH) == 429
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    for signer in _serve(make_signer_server(("127.0.0.1", 0), closed, WORKSPACE, lambda u, b, h: h)):
        assert _post(signer + PATH) == 502


def test_aps_signer_signs_for_aps_in_the_region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    headers = aps_signer("eu-west-1")(f"https://aps-workspaces.eu-west-1.amazonaws.com{PATH}", b"x", {"Content-Type": "a"})
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/aps/aws4_request, SignedHeaders=content-type;host;x-amz-date" in headers["Authorization"]


@pytest.mark.slow  # waits out the proxy's read timeout for the silent client, in real time
def test_m3_a_body_past_the_bound_is_refused_before_it_is_read_and_a_silent_client_is_dropped(amp: Receiver) -> None:
    """A remote-write batch is well under 1 MB: 8 MiB bounds what one connection may make the signer hold (it was
    32 MiB, with a thread per connection and no deadline). The refusal comes from the head alone; a client that
    sends nothing is dropped at the request deadline."""
    import socket
    import time

    from gpucluster_agents.metrics.signer import LIMITS, MAX_BODY

    assert MAX_BODY <= 8 * 1024 * 1024 and LIMITS.max_body == MAX_BODY and LIMITS.connections <= 32
    server = make_signer_server(("127.0.0.1", 0), amp.url(""), WORKSPACE, lambda u, b, h: h)
    for signer in _serve(server):
        port = int(signer.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as big:
            big.sendall(f"POST {PATH} HTTP/1.1\r\nHost: s\r\nContent-Length: {MAX_BODY + 1}\r\n\r\n".encode())
            assert big.recv(4096).startswith(b"HTTP/1.1 413 ")
        with socket.create_connection(("127.0.0.1", port), timeout=LIMITS.request_seconds + 5) as silent:
            start = time.monotonic()
            assert silent.recv(4096) == b""
            assert LIMITS.request_seconds - 0.5 <= time.monotonic() - start <= LIMITS.request_seconds + 2
    assert amp.posts == []
