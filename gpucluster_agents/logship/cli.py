# pyright: strict
"""``python3 -m gpucluster_agents.logship {run,once,check} --config /etc/gpucluster/logs.json``.

    run      ship every ``flush_interval_seconds`` until SIGTERM or SIGINT, then a final flush (the lines without
             a newline too), then exit 0 (``gpucluster-logs.service``; a dynamic node powered down ships its last
             slurmd lines: the unit stops after slurmd)
    once     one pass, everything readable (a test, a look by hand)
    check    parse the config and print it normalised

``--instance-id ID``: the stream prefix (default: the instance's own, from the instance metadata service, IMDSv2;
root reaches it through the IMDS guard). Exit status: 0; 1 when ``once`` could not ship everything; 2 for a bad
command line or config (every problem printed, with its key).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from types import FrameType

from ..contract.logs import LogsConfig, LogsConfigError, parse_logs
from .shipper import Shipper, make_client
from .sink import Sink

EXIT_USAGE = 2
IMDS = "http://169.254.169.254"
FINAL_FLUSH_SECONDS = 20.0
"""How long the last flush may retry at shutdown. A call already under way may take its timeouts (10 s to connect,
30 s to read) past it: the unit's TimeoutStopSec (75 s) covers both."""
log = logging.getLogger("gpucluster_agents.logship")


def instance_id(base: str = IMDS, wait: float = 120.0) -> str:
    """This instance's id from IMDSv2, retried while the metadata service is not reachable yet (early boot)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            put = urllib.request.Request(base + "/latest/api/token", method="PUT")
            put.add_header("X-aws-ec2-metadata-token-ttl-seconds", "60")
            with urllib.request.urlopen(put, timeout=5) as r:
                token = r.read().decode()
            get = urllib.request.Request(base + "/latest/meta-data/instance-id")
            get.add_header("X-aws-ec2-metadata-token", token)
            with urllib.request.urlopen(get, timeout=5) as r:
                return r.read().decode().strip()
        except (urllib.error.URLError, OSError) as exc:
            if time.monotonic() > deadline:
                raise SystemExit(f"gpucluster-logs: no instance id from the instance metadata service: {exc}") from None
            time.sleep(2)


def load(path: str) -> LogsConfig:
    try:
        with open(path, encoding="utf-8") as fh:
            return parse_logs(fh.read())
    except OSError as exc:
        raise LogsConfigError([f"cannot read {path}: {exc.strerror}"]) from None


def _flush(shipper: Shipper, deadline: float) -> bool:
    """Passes until nothing is left or ``deadline``; True when everything was shipped."""
    shipper.sink.deadline = deadline
    while True:
        more = shipper.run_pass(final=True)
        if shipper.failed or not more or time.monotonic() > deadline:
            return not shipper.failed and not more


def run(shipper: Shipper, interval: float, stop: threading.Event) -> int:
    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: final flush", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info("shipping %d log paths to %s every %gs", len(shipper.config.files), shipper.config.log_group, interval)
    while not stop.is_set():
        try:
            more = shipper.run_pass()
        except Exception:  # a bug or an unexpected error must not end the shipping: log it, try again later
            log.exception("pass failed")
            more = False
        if not more or shipper.failed:
            stop.wait(interval)
    done = _flush(shipper, time.monotonic() + FINAL_FLUSH_SECONDS)
    log.info("stopped%s", "" if done else ": some lines were not shipped (their offsets are kept for the next start)")
    shipper.close()
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpucluster-logs", description="ship a node's logs to CloudWatch Logs")
    p.add_argument("command", choices=("run", "once", "check"))
    p.add_argument("--config", default="/etc/gpucluster/logs.json")
    p.add_argument("--instance-id", help="stream prefix (default: this instance's id, from IMDSv2)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s gpucluster-logs %(levelname)s %(message)s")
    try:
        config = load(args.config)
    except LogsConfigError as exc:
        print(f"gpucluster-logs: {args.config}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "check":
        print(json.dumps(config.to_dict(), indent=2, sort_keys=True))
        return 0
    stop = threading.Event()
    sink = Sink(make_client(config), config.log_group, stop)
    shipper = Shipper(config, args.instance_id or instance_id(), sink)
    if args.command == "once":
        done = _flush(shipper, time.monotonic() + FINAL_FLUSH_SECONDS)
        shipper.close()
        return 0 if done else 1
    return run(shipper, float(config.flush_interval_seconds), stop)
