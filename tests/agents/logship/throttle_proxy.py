"""An HTTP proxy in front of moto_server for CloudWatch Logs' JSON protocol: answers ``ThrottlingException`` to the
first N calls of an action (``X-Amz-Target``), forwards everything else, and records the actions it saw."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ThrottleProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = urllib.parse.urlsplit(upstream)
        self.throttle: dict[str, int] = {}
        self.seen: list[tuple[str, int]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                action = (self.headers.get("X-Amz-Target") or "").rsplit(".", 1)[-1]
                if proxy.throttle.get(action, 0) > 0:
                    proxy.throttle[action] -= 1
                    proxy.seen.append((action, 400))
                    out = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()
                    self.send_response(400)
                    self.send_header("Content-Type", "application/x-amz-json-1.1")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                    return
                conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request("POST", self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                proxy.seen.append((action, resp.status))
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length", "server", "date"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
