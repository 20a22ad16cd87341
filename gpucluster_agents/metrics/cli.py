# pyright: strict
"""``python -m gpucluster_agents.metrics {serve,print}`` (also ``gpucluster-metrics``).

    serve --listen auto --port 9400        # the node's unit: private address, the DCGM exporter's port
    print                                  # one scrape to stdout (for promtool, a look by hand)

Sources: ``--no-gpus`` (a head node, a CPU node), ``--slurm-bin-dir DIR`` and ``--agent-state DIR`` (the
head node's Slurm and agent metrics), ``--fake-nvml SCENARIO`` and ``--kernel-log FILE`` (replayed GPU
readings and kernel records, as the health program takes them: tests and replays; no unit passes them),
``--sysfs-root`` and ``--lustre-root`` (fixture trees). Exit status: 0, or 2 for a bad command line, a
missing NVML binding or an address it cannot listen on.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from ..health.nvml import NvmlUnavailable
from .server import DEFAULT_PORT, Exporter, Sources, make_server, private_address

EXIT_USAGE = 2


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
    return p


def sources(args: argparse.Namespace) -> Sources:
    s = Sources(
        gpus=not args.no_gpus,
        fake_nvml=args.fake_nvml,
        kernel_log_file=args.kernel_log,
        sysfs_root=args.sysfs_root,
        slurm_bin_dir=args.slurm_bin_dir,
        agent_state_dir=args.agent_state,
    )
    if args.hostname:
        s.hostname = args.hostname
    if args.lustre_root:
        s.lustre_roots = tuple(args.lustre_root)
    return s


def main(argv: Sequence[str] | None = None) -> int:
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
    sys.stdout.write(f"gpucluster-metrics listening on http://{host}:{port}/metrics\n")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def console_main() -> None:
    sys.exit(main())
