"""A fake of the three GitHub REST calls the sticky comment makes, on 127.0.0.1: list a pull request's comments
(paged), create one, edit one. It checks the token and records every call."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN = "ghs_fake_token_for_tests"


class FakeGitHub:
    def __init__(self, comments: list[dict[str, Any]] | None = None) -> None:
        self.comments: list[dict[str, Any]] = list(comments or [])
        self.calls: list[tuple[str, str]] = []
        self.next_id = 1000
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, code: int, body: Any) -> None:
                raw = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _auth(self) -> bool:
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self._send(401, {"message": "Bad credentials"})
                    return False
                return True

            def _body(self) -> dict[str, Any]:
                return json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")

            def do_GET(self) -> None:
                fake.calls.append(("GET", self.path))
                if not self._auth():
                    return
                m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/(\d+)/comments\?per_page=(\d+)&page=(\d+)", self.path)
                if not m:
                    self._send(404, {"message": "Not Found"})
                    return
                per, page = int(m[3]), int(m[4])
                mine = [c for c in fake.comments if c["pr"] == int(m[2])]
                self._send(200, mine[(page - 1) * per : page * per])

            def do_POST(self) -> None:
                fake.calls.append(("POST", self.path))
                if not self._auth():
                    return
                m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/(\d+)/comments", self.path)
                if not m:
                    self._send(404, {"message": "Not Found"})
                    return
                fake.next_id += 1
                c = {"id": fake.next_id, "pr": int(m[2]), "body": self._body()["body"]}
                fake.comments.append(c)
                self._send(201, c)

            def do_PATCH(self) -> None:
                fake.calls.append(("PATCH", self.path))
                if not self._auth():
                    return
                m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/comments/(\d+)", self.path)
                found = [c for c in fake.comments if m and c["id"] == int(m[2])]
                if not found:
                    self._send(404, {"message": "Not Found"})
                    return
                found[0]["body"] = self._body()["body"]
                self._send(200, found[0])

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
