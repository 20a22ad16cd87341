# pyright: strict
"""What one scrape reads, and the HTTP server that answers ``GET /metrics``.

The server is the standard library's: one scrape at a time (a lock: NVML and the Slurm commands are not
worth running twice at once), a timeout on every connection, ``/metrics`` only. It listens on the node's
private address (``--listen auto``, :func:`private_address`) on port 9400, the DCGM exporter's: the
collector on the head node scrapes it there, and the node's security group admits that port from the
cluster's own security group only (docs/monitoring.md "Network"). It never listens on a public address
unless told to.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from . import fabric, gpu, head, snapshot
from .exposition import CONTENT_TYPE, Registry

log = logging.getLogger("gpucluster_agents.metrics")
DEFAULT_PORT = 9400
SCRAPE_SECONDS = ("gpucluster_metrics_scrape_duration_seconds", "gauge", "Seconds this exporter took to read its metrics.")
COLLECTOR_OK = ("gpucluster_metrics_collector_success", "gauge", "1 when a collector read its source, else 0.")


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


class _Handler(BaseHTTPRequestHandler):
    server_version = "gpucluster-metrics"
    sys_version = ""
    timeout = 10

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            self.send_error(404, "only /metrics is served")
            return
        server = self.server
        assert isinstance(server, MetricsServer)
        body = server.exporter.collect().render().encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)


class MetricsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], exporter: Exporter) -> None:
        self.exporter = exporter
        super().__init__(address, _Handler)


def make_server(exporter: Exporter, address: str, port: int) -> MetricsServer:
    """Bound and ready (``port`` 0: a free one, read back from ``server_address``); call serve_forever."""
    return MetricsServer((address, port), exporter)


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
