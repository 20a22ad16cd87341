# pyright: strict
"""``python -m gpucluster_agents.metrics {serve,print}`` (also ``gpucluster-metrics``).

    serve --listen auto --port 9400        # the node's unit: private address, the DCGM exporter's port
    print                                  # one scrape to stdout (for promtool, a look by hand)
    node-exporter --port 9100 -- ARGS...   # exec Debian's prometheus-node-exporter on the private address
    remote-write-signer --region R --workspace WS   # the head node's collector's SigV4 signer (signer.py)
    head-snapshot --slurm-bin-dir D --agent-state D --out F   # the head node's Slurm reader, as slurm (snapshot.py)

Sources: ``--no-gpus`` (a head node, a CPU node), ``--slurm-bin-dir DIR`` and ``--agent-state DIR`` (the
head node's Slurm and agent metrics, read in the exporter), ``--head-snapshot FILE`` (the same, read by
``head-snapshot`` as slurm: what the head node's unit passes), ``--fake-nvml SCENARIO`` and ``--kernel-log FILE`` (replayed GPU
readings and kernel records, as the health program takes them: tests and replays; no unit passes them),
``--sysfs-root`` and ``--lustre-root`` (fixture trees). Exit status: 0, or 2 for a bad command line, a
missing NVML binding or an address it cannot listen on.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from ..health.nvml import NvmlUnavailable
from .server import DEFAULT_PORT, Exporter, Sources, make_server, private_address, serve

EXIT_USAGE = 2
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
# Per-CPU series a 192-vCPU node pays for in AMP and no rule or dashboard reads: softnet (3 per CPU), guest
# time (2 per CPU), frequencies (cpufreq, 3-4 per CPU). node_cpu_seconds_total stays. bench/metrics_cost.py
# counts the node exporter with these.
NODE_EXPORTER_FLAGS = ("--no-collector.softnet", "--no-collector.cpu.guest", "--no-collector.cpufreq")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpucluster-metrics", description="Prometheus metrics of a gpucluster node")
    p.add_argument("command", choices=("serve", "print"))
    p.add_argument("--listen", default="127.0.0.1", help="address to listen on; 'auto': the node's private IPv4 address")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT}; 0: any free one)")
    p.add_argument("--hostname", help="the Hostname label (default: the host name)")
    p.add_argument("--no-gpus", action="store_true", help="no GPU metrics (a head node or CPU node)")
    p.add_argument("--fake-nvml", metavar="SCENARIO", help="GPU readings from this scenario file (fake_nvml.py)")
    p.add_argument("--kernel-log", metavar="FILE", help="kernel records from this file (/dev/kmsg or journal JSON)")
    p.add_argument("--sysfs-root", default="/sys")
    p.add_argument("--lustre-root", action="append", help="llite stats directory (repeatable; default the client's own)")
    p.add_argument("--slurm-bin-dir", help="directory of sinfo and squeue: add Slurm's metrics (head node)")
    p.add_argument("--agent-state", metavar="DIR", help="the agent's state_dir: add the agent's metrics (head node)")
    p.add_argument("--head-snapshot", metavar="FILE", help="add the Slurm and agent metrics head-snapshot wrote (head node)")
    return p


def sources(args: argparse.Namespace) -> Sources:
    s = Sources(
        gpus=not args.no_gpus,
        fake_nvml=args.fake_nvml,
        kernel_log_file=args.kernel_log,
        sysfs_root=args.sysfs_root,
        slurm_bin_dir=args.slurm_bin_dir,
        agent_state_dir=args.agent_state,
        head_snapshot=args.head_snapshot,
    )
    if args.hostname:
        s.hostname = args.hostname
    if args.lustre_root:
        s.lustre_roots = tuple(args.lustre_root)
    return s


def node_exporter(argv: Sequence[str]) -> int:
    """Exec the node exporter listening on ``--listen`` (``auto``: the private address) and ``--port``, with the
    arguments after ``--`` (Debian's ``$ARGS``) except any listen address of theirs."""
    p = argparse.ArgumentParser(prog="gpucluster-metrics node-exporter")
    p.add_argument("--listen", default="auto")
    p.add_argument("--port", type=int, default=9100)
    p.add_argument("--binary", default=NODE_EXPORTER)
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    extra = [x for x in (a.args[1:] if a.args[:1] == ["--"] else a.args) if not x.startswith("--web.listen-address")]
    try:
        address = private_address() if a.listen == "auto" else a.listen
    except OSError as exc:
        sys.stderr.write(f"gpucluster-metrics: no private address to listen on: {exc}\n")
        return EXIT_USAGE
    os.execv(a.binary, [a.binary, f"--web.listen-address={address}:{a.port}", *NODE_EXPORTER_FLAGS, *extra])
    return EXIT_USAGE  # not reached: execv replaces this process or raises


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["node-exporter"]:
        return node_exporter(argv[1:])
    if argv[:1] == ["head-snapshot"]:
        from .snapshot import main as snapshot_main

        return snapshot_main(argv[1:])
    if argv[:1] == ["remote-write-signer"]:
        from .signer import signer_main  # boto3: imported by the head node's signer only

        return signer_main(argv[1:])
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s gpucluster-metrics %(levelname)s %(message)s")
    if not 0 <= args.port <= 65535:
        sys.stderr.write(f"gpucluster-metrics: --port {args.port}: not a TCP port (0-65535)\n")
        return EXIT_USAGE
    try:
        exporter = Exporter(sources(args))
    except NvmlUnavailable as exc:
        sys.stderr.write(f"gpucluster-metrics: {exc}; on a node without GPUs pass --no-gpus\n")
        return EXIT_USAGE
    if args.command == "print":
        sys.stdout.write(exporter.collect().render())
        return 0
    try:
        address = private_address() if args.listen == "auto" else args.listen
        server = make_server(exporter, address, args.port)
    except OSError as exc:
        sys.stderr.write(f"gpucluster-metrics: cannot listen on {args.listen}:{args.port}: {exc}\n")
        return EXIT_USAGE
    host, port = server.server_address[0], server.server_address[1]
    return serve(server, f"gpucluster-metrics listening on http://{host}:{port}/metrics")


def console_main() -> None:
    sys.exit(main())
