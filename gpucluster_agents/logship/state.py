# pyright: strict
"""The shipped offsets, by file identity (device, inode), in one JSON file written atomically.

An offset is saved only after CloudWatch Logs has accepted the events before it (ship, then save): a crash or a
failed call re-reads and re-ships from the last saved offset, so a line may arrive twice but is never lost. The file
is replaced with ``os.replace`` after ``fsync`` (a crash leaves the old file or the new one, never half of one).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any, cast

log = logging.getLogger("gpucluster_agents.logship")


@dataclass
class Entry:
    offset: int
    path: str
    stream: str


def file_key(dev: int, ino: int) -> str:
    return f"{dev}:{ino}"


class State:
    def __init__(self, path: str) -> None:
        self.path = path
        self.entries: dict[str, Entry] = self._load()

    def _load(self) -> dict[str, Entry]:
        try:
            with open(self.path, encoding="utf-8") as fh:
                raw: Any = json.load(fh)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            # Starting over re-ships the files from their start: duplicates, never a loss.
            log.warning("state file %s unreadable (%s): every file ships from its start", self.path, exc)
            return {}
        out: dict[str, Entry] = {}
        doc = cast("dict[str, Any]", raw) if isinstance(raw, dict) else {}
        files = cast("dict[str, Any]", doc.get("files")) if isinstance(doc.get("files"), dict) else {}
        for key, value in files.items():
            try:
                out[key] = Entry(int(value["offset"]), str(value["path"]), str(value["stream"]))
            except (KeyError, TypeError, ValueError):
                log.warning("state file %s: entry %s unreadable, dropped", self.path, key)
        return out

    def save(self) -> None:
        doc = {"version": 1, "files": {k: vars(e) for k, e in sorted(self.entries.items())}}
        directory = os.path.dirname(self.path) or "."
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
