# pyright: strict
"""``python -m gpucluster_agents.metrics {serve,print}`` (also ``gpucluster-metrics``).

    serve --listen auto --port 9400        # private address, the DCGM exporter's port
    serve --systemd-socket                 # the node's unit: the socket gpucluster-metrics.socket holds
    print                                  # one scrape to stdout (for promtool, a look by hand)
    node-exporter --port 9100 -- ARGS...   # exec Debian's prometheus-node-exporter on the private address
    node-exporter --systemd-socket -- ARGS...   # ... on the socket prometheus-node-exporter.socket holds
    listen-drop-ins DIR                    # the two .socket units' drop-ins: the private address (setup, once)
    remote-write-signer --region R --workspace WS   # the head node's collector's SigV4 signer (signer.py)
    head-snapshot --slurm-bin-dir D --agent-state D --out F   # the head node's Slurm reader, as slurm (snapshot.py)
    team-snapshot --slurm-bin-dir D --out F   # the head node's per-team reader, as slurm (teams.py)
    serve --systemd-socket --team-snapshot F  # the head node's loopback exporter of the teams' figures only

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
from .httploop import listening_socket, systemd_socket
from .server import DEFAULT_PORT, Exporter, Sources, exporter_server, private_address, serve

EXIT_USAGE = 2
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
# Per-CPU series a 192-vCPU node pays for in AMP and no rule or dashboard reads: softnet (3 per CPU), guest
# time (2 per CPU), frequencies (cpufreq, 3-4 per CPU). node_cpu_seconds_total stays. bench/metrics_cost.py
# counts the node exporter with these.
LISTEN_FLAGS = ("--web.listen-address", "--web.systemd-socket")  # the listener is this wrapper's to choose
NODE_EXPORTER_FLAGS = ("--no-collector.softnet", "--no-collector.cpu.guest", "--no-collector.cpufreq")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpucluster-metrics", description="Prometheus metrics of a gpucluster node")
    p.add_argument("command", choices=("serve", "print"))
    p.add_argument("--listen", default="127.0.0.1", help="address to listen on; 'auto': the node's private IPv4 address")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT}; 0: any free one)")
    p.add_argument("--systemd-socket", action="store_true", help="serve on the socket systemd passes (not --listen/--port)")
    p.add_argument("--hostname", help="the Hostname label (default: the host name)")
    p.add_argument("--no-gpus", action="store_true", help="no GPU metrics (a head node or CPU node)")
    p.add_argument("--fake-nvml", metavar="SCENARIO", help="GPU readings from this scenario file (fake_nvml.py)")
    p.add_argument("--kernel-log", metavar="FILE", help="kernel records from this file (/dev/kmsg or journal JSON)")
    p.add_argument("--sysfs-root", default="/sys")
    p.add_argument("--lustre-root", action="append", help="llite stats directory (repeatable; default the client's own)")
    p.add_argument("--slurm-bin-dir", help="directory of sinfo and squeue: add Slurm's metrics (head node)")
    p.add_argument("--agent-state", metavar="DIR", help="the agent's state_dir: add the agent's metrics (head node)")
    p.add_argument("--head-snapshot", metavar="FILE", help="add the Slurm and agent metrics head-snapshot wrote (head node)")
    p.add_argument("--team-snapshot", metavar="FILE", help="serve the teams' figures team-snapshot wrote, and nothing else")
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
        team_snapshot=args.team_snapshot,
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
    p.add_argument("--systemd-socket", action="store_true", help="the socket systemd passes (LISTEN_FDS), kept for it")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    extra = [x for x in (a.args[1:] if a.args[:1] == ["--"] else a.args) if not x.startswith(LISTEN_FLAGS)]
    if a.systemd_socket:  # execv keeps the pid: LISTEN_PID still names the exporter
        os.execv(a.binary, [a.binary, "--web.systemd-socket", *NODE_EXPORTER_FLAGS, *extra])
        return EXIT_USAGE  # not reached: execv replaces this process or raises
    try:
        address = private_address() if a.listen == "auto" else a.listen
    except OSError as exc:
        sys.stderr.write(f"gpucluster-metrics: no private address to listen on: {exc}\n")
        return EXIT_USAGE
    os.execv(a.binary, [a.binary, f"--web.listen-address={address}:{a.port}", *NODE_EXPORTER_FLAGS, *extra])
    return EXIT_USAGE  # not reached: execv replaces this process or raises


def listen_drop_ins(argv: Sequence[str]) -> int:
    """Write each ``.socket`` unit's drop-in (``DIR/<unit>.d/address.conf``) with the node's private address: the
    units listen there instead of 127.0.0.1 (their rendered default). The setup runs this once, before it starts
    the sockets; an instance keeps its primary private address for life."""
    p = argparse.ArgumentParser(prog="gpucluster-metrics listen-drop-ins")
    p.add_argument("dir", help="the systemd unit directory (/etc/systemd/system)")
    p.add_argument("--socket", action="append", required=True, metavar="UNIT=PORT", help="a .socket unit and its port")
    p.add_argument("--address", default="auto", help="'auto': the node's private IPv4 address")
    a = p.parse_args(argv)
    try:
        address = private_address() if a.address == "auto" else a.address
    except OSError as exc:
        sys.stderr.write(f"gpucluster-metrics: no private address to listen on: {exc}\n")
        return EXIT_USAGE
    for item in a.socket:
        unit, _, port = item.partition("=")
        if not unit.endswith(".socket") or "/" in unit or not port.isdigit() or not 0 < int(port) < 65536:
            sys.stderr.write(f"gpucluster-metrics: --socket {item}: expected UNIT.socket=PORT\n")
            return EXIT_USAGE
        path = os.path.join(a.dir, f"{unit}.d", "address.conf")
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            host = f"[{address}]" if ":" in address else address
            fh.write(f"[Socket]\nListenStream=\nListenStream={host}:{port}\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["node-exporter"]:
        return node_exporter(argv[1:])
    if argv[:1] == ["listen-drop-ins"]:
        return listen_drop_ins(argv[1:])
    if argv[:1] == ["head-snapshot"]:
        from .snapshot import main as snapshot_main

        return snapshot_main(argv[1:])
    if argv[:1] == ["team-snapshot"]:
        from .teams import main as teams_main

        return teams_main(argv[1:])
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
        if args.systemd_socket:
            sock = systemd_socket()
        else:
            sock = listening_socket(private_address() if args.listen == "auto" else args.listen, args.port)
    except OSError as exc:
        where = "the systemd socket" if args.systemd_socket else f"{args.listen}:{args.port}"
        sys.stderr.write(f"gpucluster-metrics: cannot listen on {where}: {exc}\n")
        return EXIT_USAGE
    server = exporter_server(exporter, sock)
    host, port = server.server_address[0], server.server_address[1]
    return serve(server, f"gpucluster-metrics listening on http://{host}:{port}/metrics")


def console_main() -> None:
    sys.exit(main())
