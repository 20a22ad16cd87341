"""Real Prometheus, Alertmanager and node exporter on 127.0.0.1 for the monitoring end-to-end test.

Each daemon gets a free port (bound to port 0 and read back just before it starts), keeps every file under the
test's directory (Prometheus's TSDB, Alertmanager's storage), runs without Alertmanager's cluster gossip, and is
stopped by :class:`Daemons` when the test module ends, also on failure. A small HTTP server stands in for
Amazon SNS: it records every notification Alertmanager posts to it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class Daemons:
    """Processes started by a test, stopped together (terminate, then kill after 5 s)."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(
        self, name: str, argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"{name}.log", "wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=cwd)
        log.close()
        self.procs.append((name, proc))
        return proc

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def stop(self) -> None:
        for _, proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for _, proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def wait_for(what: str, check: Callable[[], Any], deadline_s: float, daemons: Daemons, log: str) -> Any:
    """``check()``'s first truthy result; fails with the daemon's log after ``deadline_s``."""
    end = time.monotonic() + deadline_s
    last: object = None
    while time.monotonic() < end:
        try:
            got = check()
            if got:
                return got
            last = got
        except OSError as exc:  # not listening yet
            last = exc
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {deadline_s} s (last: {last!r}); {log} log:\n{daemons.log(log)}")


def query(prom: str, expr: str) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) of an instant query; a parse error is a 400 with Prometheus's message."""
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


class Webhook:
    """Alertmanager's webhook receiver: the notifications it got, in order."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        lock = threading.Lock()
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    received.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.url = f"http://{HOST}:{self.server.server_address[1]}/alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def alerts(self) -> list[dict[str, Any]]:
        return [alert for note in list(self.received) for alert in note["alerts"]]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class StaticExporter:
    """A fixed Prometheus exposition on a free port of 127.0.0.1 (``/metrics``): an exporter that cannot run here."""

    def __init__(self, text: str) -> None:
        body = text.encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
