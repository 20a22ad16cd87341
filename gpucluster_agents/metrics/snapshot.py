# pyright: strict
"""The head node's Slurm and agent figures, read as SlurmUser and handed to the exporter in a file.

Why two processes: the head node's exporter listens on the private address (port 9400) where every job can reach it,
and parses requests from them; SlurmUser is Slurm's super user (it may submit a job as any user, root included) and
passes the IMDS guard. So the exporter runs as an unprivileged dynamic user, and only this loop runs as slurm
(``python -m gpucluster_agents.metrics head-snapshot``, ``gpucluster-head-snapshot.service``): it listens on nothing,
runs ``sinfo``/``squeue`` (under ``PrivateData=jobs`` only SlurmUser and root see every job) and reads the agent's
state files (0600, the agent's), and every :data:`EVERY` seconds writes what it read to one JSON file (0644: the
figures the exporter serves anyway) that the exporter adds to each scrape (``serve --head-snapshot FILE``).

A snapshot older than :data:`MAX_AGE` (the loop stopped), missing or unreadable gives no Slurm or agent series and
``gpucluster_metrics_collector_success{collector="slurm"|"agent"} 0``: the alert on a failing Slurm collector fires
as it did when the exporter ran ``sinfo`` itself.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any, cast

from . import head
from .exposition import Registry

LOG = logging.getLogger("gpucluster_agents.metrics.snapshot")
EVERY = 15.0
MAX_AGE = 60.0
COLLECTOR_OK = ("gpucluster_metrics_collector_success", "gauge", "1 when a collector read its source, else 0.")
"""The exporter's own family (``server.COLLECTOR_OK``), for the two collectors run here."""
COLLECTORS = ("slurm", "agent")


def collect(bin_dir: str, state_dir: str) -> Registry:
    """One reading of Slurm and the agent, each with its success flag."""
    reg = Registry()
    for name, fn, source in (("slurm", head.collect_slurm, bin_dir), ("agent", head.collect_agent, state_dir)):
        try:
            fn(reg, source)
            ok = 1
        except Exception:  # one broken source must not take the other's figures with it
            LOG.exception("metrics collector %s failed", name)
            ok = 0
        reg.add(*COLLECTOR_OK, ok, {"collector": name})
    return reg


def write(path: str, reg: Registry, now: float, mode: int = 0o644, gid: int | None = None) -> None:
    """The snapshot, whole or not at all (a temp file renamed over it), readable by the exporter's user (``mode``;
    ``gid``: the group the file is given, one the writer is a member of)."""
    families = [
        {"name": f.name, "kind": f.kind, "help": f.help, "samples": [[dict(labels), value] for labels, value in f.samples]}
        for f in reg.families.values()
    ]
    fd, tmp = tempfile.mkstemp(prefix=".snapshot-", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"written": now, "families": families}, fh)
        if gid is not None:
            os.chown(tmp, -1, gid)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read(reg: Registry, path: str, now: float, max_age: float = MAX_AGE, collectors: tuple[str, ...] = COLLECTORS) -> None:
    """Add the snapshot's series to ``reg``; when it is missing, unreadable or stale, the failure of its
    ``collectors``."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = cast(dict[str, Any], json.load(fh))
        age = now - float(doc["written"])
        if not -max_age <= age <= max_age:
            raise ValueError(f"written {age:.0f} s ago")
        staged = Registry()  # every sample checked before any reaches the scrape
        for fam in cast(list[dict[str, Any]], doc["families"]):
            for labels, value in cast(list[list[Any]], fam["samples"]):
                staged.add(str(fam["name"]), str(fam["kind"]), str(fam["help"]), float(value), cast(dict[str, str], labels))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        LOG.warning("head snapshot %s not served: %s", path, exc)
        for name in collectors:
            reg.add(*COLLECTOR_OK, 0, {"collector": name})
        return
    for fam in staged.families.values():
        for labels, value in fam.samples:
            reg.add(fam.name, fam.kind, fam.help, value, dict(labels))


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="gpucluster-metrics head-snapshot")
    p.add_argument("--slurm-bin-dir", required=True, help="directory of sinfo and squeue")
    p.add_argument("--agent-state", required=True, metavar="DIR", help="the agent's state_dir")
    p.add_argument("--out", required=True, help="the snapshot file (its directory must exist)")
    p.add_argument("--every", type=float, default=EVERY, help=f"seconds between two readings (default {EVERY:g})")
    p.add_argument("--once", action="store_true", help="one reading, then exit")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s gpucluster-metrics %(levelname)s %(message)s")
    while True:
        try:
            write(a.out, collect(a.slurm_bin_dir, a.agent_state), time.time())
        except OSError as exc:
            sys.stderr.write(f"gpucluster-metrics: cannot write {a.out}: {exc}\n")
            if a.once:
                return 1
        if a.once:
            return 0
        time.sleep(a.every)
