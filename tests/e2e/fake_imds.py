"""A fake EC2 instance metadata service (IMDSv2) for the IMDS guard's end-to-end test: the token PUT
and the instance role's credentials, on 169.254.169.254:80 and [fd00:ec2::254]:80 of the network
namespace it runs in. Every request it receives is appended to a log file, so the test can tell
"refused by the guard" (the request never arrived) from "answered with an error".

    python3 fake_imds.py LOG ROLE SECRET
"""

from __future__ import annotations

import http.server
import json
import socket
import sys
import threading

TOKEN = "fake-imds-token"


def handler(log_path: str, role: str, secret: str) -> type[http.server.BaseHTTPRequestHandler]:
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def _log(self) -> None:
            with lock, open(log_path, "a") as fh:
                fh.write(f"{self.command} {self.path}\n")

        def _send(self, code: int, body: str) -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_PUT(self) -> None:
            self._log()
            if self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                self._send(200, TOKEN)
            else:
                self._send(400, "")

        def do_GET(self) -> None:
            self._log()
            if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
                self._send(401, "")
            elif self.path == "/latest/meta-data/iam/security-credentials/":
                self._send(200, role)
            elif self.path == f"/latest/meta-data/iam/security-credentials/{role}":
                creds = {
                    "Code": "Success",
                    "Type": "AWS-HMAC",
                    "AccessKeyId": "ASIAFAKEIMDSGUARD",
                    "SecretAccessKey": secret,
                    "Token": "fake-session-token",
                    "Expiration": "2030-01-01T00:00:00Z",
                }
                self._send(200, json.dumps(creds))
            else:
                self._send(404, "")

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


class V6Server(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6


def main(argv: list[str]) -> None:
    log_path, role, secret = argv
    h = handler(log_path, role, secret)
    servers = [http.server.ThreadingHTTPServer(("169.254.169.254", 80), h), V6Server(("fd00:ec2::254", 80), h)]
    for s in servers[1:]:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print("ready", flush=True)
    servers[0].serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
