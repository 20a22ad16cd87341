# pyright: strict
"""What one scrape reads, the cache every scrape is answered from, and the server that answers ``GET /metrics``.

A collect runs NVML, reads sysfs and, on the head node, runs ``sinfo`` twice and ``squeue``: it is not worth
running for every request, nor twice at once. :class:`Cache` keeps the last collect's text for
:data:`CACHE_SECONDS` (under any scrape interval) and runs one collect at a time, however many clients ask; every
request is answered from it, so N clients cost one collect per interval. The server is the bounded loop of
:mod:`.httploop` (a fixed set of threads, a cap on connections, a deadline on every request): a job that floods
the port delays a scrape by milliseconds, not past its timeout.

It listens on the node's private address (``--listen auto``, :func:`private_address`) on port 9400, the DCGM
exporter's, or on the socket systemd passes (``--systemd-socket``: the node's ``gpucluster-metrics.socket`` holds
the port while the exporter restarts, so a job cannot take it and answer in its place). The collector on the
head node scrapes it there. It never listens on a public address unless told to.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..contract.metrics import COLLECTOR_OK, SCRAPE_SECONDS
from . import fabric, gpu, head, snapshot, teams
from .exposition import CONTENT_TYPE, Registry
from .httploop import BoundedServer, Limits, Request, Response, listening_socket

log = logging.getLogger("gpucluster_agents.metrics")
DEFAULT_PORT = 9400
CACHE_SECONDS = 5.0  # a scrape's figures are at most this old; the collector scrapes every 15 s or more
LIMITS = Limits(connections=512, workers=4, request_seconds=5.0)


@dataclass
class Sources:
    """Where the readings come from. The defaults are a node's own; tests and replays point elsewhere."""

    hostname: str = field(default_factory=socket.gethostname)
    gpus: bool = True
    fake_nvml: str | None = None  # a scenario file (fake_nvml.py) instead of the GPUs
    kernel_log_file: str | None = None  # None: /dev/kmsg, then journalctl -k (xid.py)
    sysfs_root: str = "/sys"
    lustre_roots: tuple[str, ...] = fabric.LUSTRE_ROOTS
    slurm_bin_dir: str | None = None  # head node: sinfo/squeue here
    agent_state_dir: str | None = None  # head node: the agent's state_dir
    head_snapshot: str | None = None  # head node: both of those, read by SlurmUser into this file (snapshot.py)
    team_snapshot: str | None = None  # head node's loopback exporter: the teams' figures (teams.py) and nothing else


class Exporter:
    def __init__(self, sources: Sources) -> None:
        self.sources = sources
        self.lock = threading.Lock()
        self.gpus: gpu.GpuReader | None = None
        if sources.gpus:
            from ..health.nvml import load_binding

            self.gpus = gpu.GpuReader(load_binding(sources.fake_nvml))

    def _run(self, reg: Registry, name: str, fn: Any, *args: Any) -> None:
        try:
            fn(reg, *args)
            ok = 1
        except Exception:  # one broken source must not take the others' metrics with it
            log.exception("metrics collector %s failed", name)
            ok = 0
        reg.add(*COLLECTOR_OK, ok, {"collector": name})

    def collect(self) -> Registry:
        with self.lock:
            start = time.perf_counter()
            reg = Registry()
            s = self.sources
            if s.team_snapshot is not None:  # the loopback exporter: the teams' figures only, never beside the others
                snapshot.read(reg, s.team_snapshot, time.time(), teams.MAX_AGE, (teams.COLLECTOR,))
                reg.add(*SCRAPE_SECONDS, round(time.perf_counter() - start, 6))
                return reg
            if self.gpus is not None:
                xids = gpu.XidView.read(s.kernel_log_file, s.sysfs_root)
                self._run(reg, "gpu", gpu.collect, self.gpus, s.hostname, xids)
            self._run(reg, "efa", fabric.collect_efa, s.sysfs_root)
            self._run(reg, "lustre", fabric.collect_lustre, s.lustre_roots)
            if s.slurm_bin_dir is not None:
                self._run(reg, "slurm", head.collect_slurm, s.slurm_bin_dir)
            if s.agent_state_dir is not None:
                self._run(reg, "agent", head.collect_agent, s.agent_state_dir)
            if s.head_snapshot is not None:
                snapshot.read(reg, s.head_snapshot, time.time())
            reg.add(*SCRAPE_SECONDS, round(time.perf_counter() - start, 6))
            return reg


def private_address() -> str:
    """The address of the interface that routes to the instance metadata service: the node's primary
    private IPv4 address (a UDP socket's connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("169.254.169.254", 80))
        return str(s.getsockname()[0])


class Cache:
    """The text of the last collect, for ``seconds``; one collect at a time (the others wait for it and take its
    text). ``collects`` counts them."""

    def __init__(self, collect: Callable[[], bytes], seconds: float = CACHE_SECONDS) -> None:
        self._collect, self.seconds = collect, seconds
        self._lock = threading.Lock()
        self._text: bytes | None = None
        self._at = 0.0
        self.collects = 0

    def get(self) -> bytes:
        with self._lock:
            if self._text is None or time.monotonic() - self._at >= self.seconds:
                self._text = self._collect()
                self._at = time.monotonic()
                self.collects += 1
            return self._text


def metrics_handler(cache: Cache) -> Callable[[Request], Response]:
    def handle(request: Request) -> Response:
        if request.path.split("?", 1)[0] != "/metrics":
            return Response(404, b"only /metrics is served\n")
        if request.method != "GET":
            return Response(405, b"GET only\n", (("Allow", "GET"),))
        return Response(200, cache.get(), (("Content-Type", CONTENT_TYPE),))

    return handle


def exporter_server(exporter: Exporter, sock: socket.socket, seconds: float = CACHE_SECONDS) -> BoundedServer:
    """The exporter on ``sock`` (bound and listening), every request answered from one :class:`Cache`."""
    cache = Cache(lambda: exporter.collect().render().encode("utf-8"), seconds)
    return BoundedServer(sock, metrics_handler(cache), LIMITS, "gpucluster-metrics")


def make_server(exporter: Exporter, address: str, port: int) -> BoundedServer:
    """Bound and ready (``port`` 0: a free one, read back from ``server_address``); call serve_forever."""
    return exporter_server(exporter, listening_socket(address, port))


def serve(server: Any, banner: str) -> int:
    """Print ``banner``, serve until interrupted, close the socket: the exporter's and the signer's main loop."""
    sys.stdout.write(banner + "\n")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
