# pyright: strict, reportMissingTypeStubs=false
"""One pass over a node's logs: find the files, read what is new, ship it, then save the offsets.

Files are followed by identity (device, inode), not by name:

- **First seen**: read from its start (this boot's cloud-init log ships whole).
- **Rotation** (the log renamed and a new one created at its path): the old inode is kept open and still read for
  :attr:`Shipper.rotated_grace` seconds (a daemon writes to it until it reopens its log), then read to its end, its
  last line even without a newline, and closed; the new file is read from its start. A rotation while the shipper
  was stopped is found too: the saved inode is looked for in the log's directory (``slurmd.log.1``).
- **Truncation** (``copytruncate``, ``> file``): a file shorter than its saved offset is read again from 0.
- **Deleted** while the shipper was stopped: its entry is dropped (nothing is left to read).
"""

from __future__ import annotations

import logging
import os
import posixpath
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from boto3.session import Session
from botocore.config import Config

from ..contract.logs import LogFile, LogsConfig
from .files import READ_CHUNK, Refused, expand, find_inode, open_log, read_lines
from .sink import Event, ShipError, Sink, batches
from .state import Entry, State, file_key

log = logging.getLogger("gpucluster_agents.logship")


@dataclass
class Tracked:
    fd: int
    entry: Entry
    rotated_at: float | None = None
    """Monotonic time the path was seen to name another file (or none), None while it is the current one."""


def stream_name(instance_id: str, spec: LogFile, path: str) -> str:
    """``<instance id>/<name>``; a glob's files ``<instance id>/<name>/<file name>``."""
    return f"{instance_id}/{spec.name}/{posixpath.basename(path)}" if spec.is_glob else f"{instance_id}/{spec.name}"


class Shipper:
    def __init__(self, config: LogsConfig, instance_id: str, sink: Sink, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.instance_id = instance_id
        self.sink = sink
        self.clock = clock
        self.state = State(config.state_file)
        self.tracked: dict[str, Tracked] = {}
        self.rotated_grace = 30.0
        self.refused: set[str] = set()
        self._started = False
        self.failed = False
        """Whether a file's events were not accepted in the last pass."""

    def close(self) -> None:
        for t in self.tracked.values():
            os.close(t.fd)
        self.tracked.clear()

    def _open(self, path: str) -> tuple[int, str] | None:
        try:
            fd = open_log(path)
        except Refused as exc:
            if path not in self.refused:
                log.error("not shipping %s: %s (a log path must be a regular file reached without links)", path, exc.strerror)
                self.refused.add(path)
            return None
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("cannot open %s: %s", path, exc)
            return None
        self.refused.discard(path)
        st = os.fstat(fd)
        return fd, file_key(st.st_dev, st.st_ino)

    def _scan(self) -> None:
        """Open what every config entry names now; mark the files whose path now names another one, or nothing, as
        rotated (finished after the grace, then closed: a deleted log's space is not held)."""
        now = time.monotonic()
        named = {f.path for f in self.config.files if not f.is_glob}
        seen: set[str] = set()
        for spec in self.config.files:
            # a file named on its own (health.log) is not shipped again by a glob that matches it (*.log)
            for path in (p for p in expand(spec.path, spec.is_glob) if not spec.is_glob or p not in named):
                opened = self._open(path)
                if opened is None:
                    continue
                fd, key = opened
                seen.add(key)
                if key in self.tracked:
                    os.close(fd)
                    if self.tracked[key].entry.path == path:
                        self.tracked[key].rotated_at = None  # back at its path (it was unreadable a moment)
                else:
                    saved = self.state.entries.get(key)
                    offset = saved.offset if saved is not None else 0
                    entry = Entry(offset, path, stream_name(self.instance_id, spec, path))
                    self.tracked[key] = Tracked(fd, entry)
                    self.state.entries[key] = entry
                for other_key, t in self.tracked.items():
                    if other_key != key and t.entry.path == path and t.rotated_at is None:
                        t.rotated_at = now
                        log.info("%s rotated: finishing its previous file, then following the new one", path)
        for key, t in self.tracked.items():
            if key not in seen and t.rotated_at is None:
                t.rotated_at = now
                log.info("%s is no longer at its path: finishing it", t.entry.path)

    def _recover(self) -> None:
        """At start: saved files no longer at their path (rotated while stopped) are found in their directory and
        finished; those that are gone are dropped."""
        for key, entry in list(self.state.entries.items()):
            if key in self.tracked:
                continue
            dev, ino = (int(x) for x in key.split(":"))
            found = find_inode(posixpath.dirname(entry.path), dev, ino)
            opened = self._open(found) if found is not None else None
            if opened is None or opened[1] != key:
                if opened is not None:
                    os.close(opened[0])
                log.warning("%s (inode %s) is gone: what it held after offset %d was not shipped", entry.path, key, entry.offset)
                del self.state.entries[key]
                continue
            self.tracked[key] = Tracked(opened[0], entry, rotated_at=time.monotonic())

    def _ship_file(self, t: Tracked, final: bool) -> bool:
        """Ship what is new in one file; True when it holds more than one read took."""
        size = os.fstat(t.fd).st_size
        if size < t.entry.offset:
            log.warning(
                "%s was truncated (%d bytes, %d shipped): reading it again from its start", t.entry.path, size, t.entry.offset
            )
            t.entry.offset = 0
        start = t.entry.offset
        lines, covered = read_lines(t.fd, start, final=final)
        ts = int(self.clock() * 1000)
        events: list[Event] = [(ts, ln.message) for ln in lines]
        shipped = 0
        for batch in batches(events):
            self.sink.put(t.entry.stream, batch)  # ShipError: the offset stays where it was, the next pass retries
            shipped += len(batch)
            t.entry.offset = lines[shipped - 1].end
            self.state.save()
        if covered > t.entry.offset:
            t.entry.offset = covered  # blank lines after the last event
            self.state.save()
        return size - start > READ_CHUNK

    def run_pass(self, final: bool = False) -> bool:
        """Scan, ship every file; ``final``: also the lines without a newline and every rotated file to its end.
        True when a file still has more than one read's worth (the loop goes on without waiting)."""
        self.failed = False
        self._scan()
        if not self._started:
            self._recover()
            self._started = True
        more = False
        now = time.monotonic()
        # rotated files first: their lines come before the new file's in the stream
        for key, t in sorted(self.tracked.items(), key=lambda kv: kv[1].rotated_at is None):
            finish = final or (t.rotated_at is not None and now - t.rotated_at >= self.rotated_grace)
            try:
                more = self._ship_file(t, final=finish) or more
            except ShipError as exc:
                log.error("%s not shipped this pass (kept from offset %d): %s", t.entry.path, t.entry.offset, exc)
                self.failed = True
                continue
            if finish and t.rotated_at is not None and os.fstat(t.fd).st_size <= t.entry.offset:
                os.close(t.fd)
                del self.tracked[key]
                del self.state.entries[key]
                self.state.save()
        return more


def make_client(config: LogsConfig) -> Any:
    """A CloudWatch Logs client with botocore's retries off (:class:`Sink` retries) and short timeouts."""
    session = Session(region_name=config.region)
    cfg = Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=10, read_timeout=30)
    return session.client("logs", endpoint_url=config.endpoint_url, config=cfg)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
