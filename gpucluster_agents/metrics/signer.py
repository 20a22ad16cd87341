# pyright: strict, reportUnknownMemberType=false, reportUnknownArgumentType=false, reportUnknownVariableType=false, reportMissingTypeStubs=false
# (boto3 and botocore have no types: the three checks of what they return are off here only)
"""``python -m gpucluster_agents.metrics remote-write-signer``: signs the head node's collector's remote writes with
SigV4 (service ``aps``) and forwards them to the cluster's AMP workspace.

Why not Prometheus's own ``sigv4:`` block: Debian's ``prometheus`` package (2.42 in bookworm, tested here) sends its
remote writes without the signature (and without any ``headers:``): AMP refuses them (403). Ubuntu's package
comes from the same packaging (its 2.45 is not verified here). So Prometheus writes
plain HTTP to this signer on 127.0.0.1, which signs each request with the instance role's credentials (botocore's
SigV4 signer, the credentials refreshed from IMDS by boto3) and sends it to AMP over HTTPS; AMP's answer goes back
to Prometheus unchanged, so its retry logic sees AMP's status (5xx and 429: retried; 4xx: dropped). When AMP
cannot be reached, the signer answers 502 and Prometheus retries from its WAL.

Only ``POST /workspaces/<the one workspace>/api/v1/remote_write`` is forwarded; anything else gets 404: the signer is
no general AWS client of the role. Who may connect at all: root and Prometheus's user only (the head node's guard,
``gpucluster/render/slurm/guard.py``, resets every other local user's connection to its port). With
``--targets-dir`` it also lists the collector's targets in EC2 (``targets.py``), so that it alone, under a system
user of its own, holds the role's credentials on behalf of the collector.
"""

from __future__ import annotations

import argparse
import logging
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .server import serve

LOG = logging.getLogger("gpucluster-metrics.signer")
FORWARDED = ("Content-Encoding", "Content-Type", "X-Prometheus-Remote-Write-Version", "User-Agent")
MAX_BODY = 32 * 1024 * 1024  # a remote-write batch is a few hundred KB; refuse what no Prometheus sends
Signer = Callable[[str, bytes, "dict[str, str]"], "dict[str, str]"]


def aps_signer(region: str) -> Signer:
    """Headers that sign a POST of ``body`` to ``url`` for AMP with the default credential chain (on the head
    node: the instance role, from IMDS), fresh credentials for each request."""
    import boto3
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    session: Any = boto3.Session(region_name=region)  # boto3 has no types here

    def sign(url: str, body: bytes, headers: dict[str, str]) -> dict[str, str]:
        credentials: Any = session.get_credentials()
        if credentials is None:
            raise RuntimeError("no AWS credentials (the instance role, from IMDS)")
        request = AWSRequest(method="POST", url=url, data=body, headers=headers)
        auth: Any = SigV4Auth(credentials.get_frozen_credentials(), "aps", region)
        auth.add_auth(request)
        return dict(request.headers.items())

    return sign


def _ec2_client(region: str) -> Any:
    """EC2 with the default credential chain (on the head node: the instance role, from IMDS)."""
    import boto3

    return boto3.Session(region_name=region).client("ec2")


def make_signer_server(listen: tuple[str, int], upstream: str, workspace: str, sign: Signer) -> ThreadingHTTPServer:
    """The signer on ``listen``, forwarding the workspace's remote writes to ``upstream`` (AMP's endpoint)."""
    path = f"/workspaces/{workspace}/api/v1/remote_write"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if self.path != path or not 0 < length <= MAX_BODY:
                self._answer(404 if self.path != path else 413, b"not the workspace's remote write\n")
                return
            body = self.rfile.read(length)
            headers = {k: v for k, v in ((h, self.headers.get(h)) for h in FORWARDED) if v is not None}
            try:
                signed = sign(upstream + path, body, headers)
                request = urllib.request.Request(upstream + path, data=body, headers=signed, method="POST")
                with urllib.request.urlopen(request, timeout=60) as response:
                    self._answer(response.status, response.read())
            except urllib.error.HTTPError as err:  # AMP's own answer: Prometheus decides whether to retry
                self._answer(err.code, err.read())
            except Exception as exc:  # not reached, no credentials: retried by Prometheus from its WAL
                LOG.warning("remote write not forwarded: %s", exc)
                self._answer(502, f"not forwarded: {exc}\n".encode())

        def do_GET(self) -> None:
            self._answer(404, b"POST remote writes only\n")

        def _answer(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return ThreadingHTTPServer(listen, Handler)


def signer_main(argv: Sequence[str], sign: Signer | None = None) -> int:
    p = argparse.ArgumentParser(prog="gpucluster-metrics remote-write-signer")
    p.add_argument("--listen", default="127.0.0.1:9091", help="host:port (127.0.0.1 only on the head node)")
    p.add_argument("--region", required=True)
    p.add_argument("--workspace", required=True, help="the AMP workspace's id (ws-...)")
    p.add_argument("--upstream", help="AMP's endpoint (default: the region's aps-workspaces endpoint)")
    p.add_argument("--targets-dir", help="also write the collector's targets here (targets.py), listed in EC2")
    p.add_argument("--cluster", help="the cluster whose instances are the targets (with --targets-dir)")
    p.add_argument("--targets-every", type=float, default=60.0, help="seconds between two listings (default 60)")
    a = p.parse_args(argv)
    if a.targets_dir and not a.cluster:
        p.error("--targets-dir needs --cluster")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s gpucluster-metrics %(levelname)s %(message)s")
    host, _, port = a.listen.rpartition(":")
    upstream = a.upstream or f"https://aps-workspaces.{a.region}.amazonaws.com"
    try:
        server = make_signer_server((host, int(port)), upstream.rstrip("/"), a.workspace, sign or aps_signer(a.region))
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"gpucluster-metrics: cannot listen on {a.listen}: {exc}\n")
        return 2
    if a.targets_dir:
        from .targets import start_refresher

        start_refresher(lambda: _ec2_client(a.region), a.cluster, a.targets_dir, a.targets_every)
    return serve(server, f"gpucluster-metrics remote-write signer on {a.listen} for {upstream}")
