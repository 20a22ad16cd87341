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
``gpucluster/render/slurm/guard.py``, resets every other local user's connection to its port). It serves on the
bounded loop the exporter uses (:mod:`.httploop`): :data:`LIMITS` caps the connections and threads, each request has
a deadline, and a body is at most :data:`MAX_BODY`, so many slow or large local clients cost a bounded amount of
memory and no thread each (the head node also runs slurmctld and MariaDB). With ``--targets-dir`` it also lists the
collector's targets in EC2 (``targets.py``), so that it alone, under a system user of its own, holds the role's
credentials on behalf of the collector.
"""

from __future__ import annotations

import argparse
import logging
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from .httploop import BoundedServer, Limits, Request, Response, listening_socket
from .server import serve

LOG = logging.getLogger("gpucluster-metrics.signer")
FORWARDED = ("Content-Encoding", "Content-Type", "X-Prometheus-Remote-Write-Version", "User-Agent")
MAX_BODY = 8 * 1024 * 1024  # a remote-write batch (1000 samples, snappy) is well under 1 MB; refuse what no Prometheus sends
# The collector writes with up to 20 shards (collection.py's queue_config), each one connection; 32 connections
# hold at most 256 MiB of bodies. Forwarding waits on AMP: 8 threads.
LIMITS = Limits(connections=32, workers=8, request_seconds=10.0, max_body=MAX_BODY)
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


def make_signer_server(listen: tuple[str, int], upstream: str, workspace: str, sign: Signer) -> BoundedServer:
    """The signer on ``listen``, forwarding the workspace's remote writes to ``upstream`` (AMP's endpoint)."""
    path = f"/workspaces/{workspace}/api/v1/remote_write"

    def handle(request: Request) -> Response:
        if request.method != "POST":
            return Response(404, b"POST remote writes only\n")
        if request.path != path:
            return Response(404, b"not the workspace's remote write\n")
        if not request.body:
            return Response(400, b"an empty remote write\n")
        wanted = ((h, request.headers.get(h.lower())) for h in FORWARDED)
        headers = {k: v for k, v in wanted if v is not None}
        try:
            signed = sign(upstream + path, request.body, headers)
            forward = urllib.request.Request(upstream + path, data=request.body, headers=signed, method="POST")
            with urllib.request.urlopen(forward, timeout=60) as response:
                return Response(response.status, response.read())
        except urllib.error.HTTPError as err:  # AMP's own answer: Prometheus decides whether to retry
            return Response(err.code, err.read())
        except Exception as exc:  # not reached, no credentials: retried by Prometheus from its WAL
            LOG.warning("remote write not forwarded: %s", exc)
            return Response(502, f"not forwarded: {exc}\n".encode())

    return BoundedServer(listening_socket(*listen), handle, LIMITS, "gpucluster-signer")


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
