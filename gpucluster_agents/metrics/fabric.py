# pyright: strict
"""EFA counters from sysfs and the Lustre client's figures from its llite stats.

EFA: ``<sysfs>/class/infiniband/<device>/ports/<port>/hw_counters/<counter>`` of every device the ``efa``
driver owns, written as ``node_amazonefa_<counter>{device,port}`` — the names of the EFA node exporter of
aws-samples/awsome-distributed-training, so its dashboards read ours. Every counter is a counter except
``lifespan`` (how often the driver refreshes the others, a setting).

Lustre: ``llite/<fsname>-<superblock>/stats`` under ``/proc/fs/lustre`` (clients up to 2.12) or
``/sys/kernel/debug/lustre`` (2.15: debugfs, root only). A line is ``<op> <count> samples [<unit>]
[<min> <max> <sum> [<sumsq>]]``; ``read_bytes``/``write_bytes`` carry the bytes in their sum.
"""

from __future__ import annotations

import os
import re

from ..contract.metrics import EFA_PREFIX, LUSTRE_BYTES, LUSTRE_OPS
from .exposition import Registry

EFA_GAUGES = ("lifespan",)
_COUNTER = re.compile(r"[a-z][a-z0-9_]{0,63}\Z")
LUSTRE_ROOTS = ("/proc/fs/lustre/llite", "/sys/kernel/debug/lustre/llite")
LUSTRE_TIMES = ("snapshot_time", "start_time", "elapsed_time")
MAX_OPS = 64  # bounded cardinality: llite has about 40 operations


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _is_efa(device_dir: str) -> bool:
    return os.path.basename(os.path.realpath(os.path.join(device_dir, "device", "driver"))) == "efa"


def collect_efa(reg: Registry, sysfs_root: str) -> int:
    """Every EFA device's hw_counters; returns how many devices were read."""
    base = os.path.join(sysfs_root, "class", "infiniband")
    try:
        devices = sorted(os.listdir(base))
    except OSError:
        return 0
    seen = 0
    for dev in devices:
        ddir = os.path.join(base, dev)
        if not _is_efa(ddir):
            continue
        seen += 1
        ports_dir = os.path.join(ddir, "ports")
        try:
            ports = sorted(os.listdir(ports_dir))
        except OSError:
            continue
        for port in ports:
            _efa_port(reg, os.path.join(ports_dir, port, "hw_counters"), dev, port)
    return seen


def _efa_port(reg: Registry, hw_dir: str, dev: str, port: str) -> None:
    try:
        counters = sorted(os.listdir(hw_dir))
    except OSError:
        return
    for counter in counters:
        if not _COUNTER.match(counter):
            continue  # not a counter name the format can carry
        text = _read(os.path.join(hw_dir, counter))
        try:
            value = int((text or "").strip())
        except ValueError:
            continue
        kind = "gauge" if counter in EFA_GAUGES else "counter"
        help_text = f"EFA hw_counters/{counter} of the device's port."
        reg.add(EFA_PREFIX + counter, kind, help_text, value, {"device": dev, "port": port})


def parse_llite_stats(text: str) -> tuple[dict[str, int], dict[str, int]]:
    """({op: count}, {"read"/"write": bytes}) from one llite stats file."""
    ops: dict[str, int] = {}
    volume: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[0] in LUSTRE_TIMES or parts[2] != "samples":
            continue
        op = parts[0]
        if not _COUNTER.match(op) or (op not in ops and len(ops) >= MAX_OPS):
            continue
        try:
            ops[op] = int(parts[1])
            if op in ("read_bytes", "write_bytes") and len(parts) >= 7:
                volume[op.split("_")[0]] = int(parts[6])
        except ValueError:
            continue
    return ops, volume


def lustre_stats_files(roots: tuple[str, ...] = LUSTRE_ROOTS) -> list[tuple[str, str]]:
    """(fsname, stats path) of every mounted Lustre file system."""
    found: list[tuple[str, str]] = []
    for root in roots:
        try:
            names = sorted(os.listdir(root))
        except OSError:
            continue
        for name in names:
            path = os.path.join(root, name, "stats")
            if os.path.isfile(path):
                found.append((name.rsplit("-", 1)[0] if "-" in name else name, path))
        if found:
            break  # one root holds them all: never count a file system twice
    return found


def collect_lustre(reg: Registry, roots: tuple[str, ...] = LUSTRE_ROOTS) -> int:
    """The client's operations and bytes per file system (two mounts of one file system added up)."""
    ops: dict[tuple[str, str], int] = {}
    volume: dict[tuple[str, str], int] = {}
    files = lustre_stats_files(roots)
    for fs, path in files:
        text = _read(path)
        if text is None:
            continue
        o, v = parse_llite_stats(text)
        for op, n in o.items():
            ops[(fs, op)] = ops.get((fs, op), 0) + n
        for direction, n in v.items():
            volume[(fs, direction)] = volume.get((fs, direction), 0) + n
    for (fs, op), n in sorted(ops.items()):
        reg.add(*LUSTRE_OPS, n, {"fs": fs, "op": op})
    for (fs, direction), n in sorted(volume.items()):
        reg.add(*LUSTRE_BYTES, n, {"fs": fs, "direction": direction})
    return len(files)
