# pyright: strict
"""Opening and reading the log files: never through a link, lines cut to CloudWatch's event size.

A log path is opened one component at a time from ``/``, every directory with ``O_DIRECTORY | O_NOFOLLOW`` and the
file with ``O_NOFOLLOW | O_NONBLOCK``, then checked to be a regular file: a service account that owns a log
directory (``/var/log/slurm`` is slurm's) cannot point a log path at a secret through a symbolic link, in the last
component or any other, and a FIFO cannot hang the shipper. Globs match names in one directory and skip links.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import posixpath
import stat
from dataclasses import dataclass

MAX_EVENT_BYTES = 256 * 1024 - 26
"""The largest message we send. PutLogEvents takes events up to 1 MB in the current API reference, but other
partitions' references still say 256 KB (with 26 bytes of overhead per event counted in the batch): the smaller
bound holds everywhere."""
CONTINUED = " [gpucluster-logs: line continues in the next event]"
"""The marker that ends every piece of a line too long for one event but its last: nothing is dropped."""
READ_CHUNK = 4 * 1024 * 1024
"""Bytes read from one file per pass at most (a large first cloud-init log ships over several passes)."""


class Refused(OSError):
    """A path that is a link, or not a regular file: not read."""


def _walk_dirs(parts: list[str]) -> int:
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Refused(exc.errno, "a directory of the path is a link or not a directory", "/" + "/".join(parts)) from None
        raise
    return fd


def open_dir(path: str) -> int:
    """A directory's descriptor, no component followed through a link."""
    return _walk_dirs([p for p in path.split("/") if p])


def open_log(path: str) -> int:
    """A log file's read-only descriptor; :class:`Refused` for a link anywhere in ``path`` or a non-regular file;
    ``FileNotFoundError`` when it does not exist (yet)."""
    parts = [p for p in path.split("/") if p]
    dfd = _walk_dirs(parts[:-1])
    try:
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused(exc.errno, "the log is a symbolic link", path) from None
        raise
    finally:
        os.close(dfd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Refused(errno.EINVAL, "not a regular file", path)
    return fd


def expand(pattern: str, is_glob: bool) -> list[str]:
    """The paths a config entry names now: itself, or the regular files (not links) its glob matches, sorted."""
    if not is_glob:
        return [pattern]
    directory, glob = posixpath.split(pattern)
    try:
        dfd = open_dir(directory)
    except OSError:
        return []
    try:
        with os.scandir(dfd) as it:
            names = [e.name for e in it if fnmatch.fnmatchcase(e.name, glob) and e.is_file(follow_symlinks=False)]
    finally:
        os.close(dfd)
    return [posixpath.join(directory, n) for n in sorted(names)]


def find_inode(directory: str, dev: int, ino: int) -> str | None:
    """The regular file of ``directory`` that is inode ``(dev, ino)`` (a log renamed by its rotation), or None."""
    try:
        dfd = open_dir(directory)
    except OSError:
        return None
    try:
        with os.scandir(dfd) as it:
            for e in it:
                st = e.stat(follow_symlinks=False)
                if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) == (dev, ino):
                    return posixpath.join(directory, e.name)
    finally:
        os.close(dfd)
    return None


@dataclass(frozen=True)
class Line:
    message: str
    end: int
    """The file offset just after this piece: shipping it lets the saved offset move here."""


def _utf8_cut(data: bytes, start: int, limit: int) -> int:
    """An end offset at most ``limit`` bytes after ``start`` that does not split a UTF-8 character."""
    end = start + limit
    if end >= len(data):
        return len(data)
    back = end
    while back > end - 3 and (data[back] & 0xC0) == 0x80:
        back -= 1
    return back if (data[back] & 0xC0) != 0x80 else end


def _pieces(raw: bytes, base: int, complete: bool) -> tuple[list[Line], int]:
    """A line's events (one, or pieces ending in :data:`CONTINUED` when it is too long) and the offset they cover.
    ``complete`` False: the line has no newline yet, so its last piece waits for the next pass."""
    limit = MAX_EVENT_BYTES - len(CONTINUED.encode())
    out: list[Line] = []
    pos = 0
    while len(raw.rstrip(b"\n")) - pos > MAX_EVENT_BYTES:
        end = _utf8_cut(raw, pos, limit)
        out.append(Line(raw[pos:end].decode("utf-8", "replace") + CONTINUED, base + end))
        pos = end
    if not complete:
        return out, base + pos
    text = raw[pos:].rstrip(b"\n").rstrip(b"\r").decode("utf-8", "replace")
    if text.strip():  # CloudWatch takes no empty message: a blank line is no event (its offset still moves on)
        out.append(Line(text, base + len(raw)))
    return out, base + len(raw)


def read_lines(fd: int, offset: int, final: bool = False) -> tuple[list[Line], int]:
    """The events from ``offset`` on (at most :data:`READ_CHUNK` bytes read) and the offset after the last byte they
    cover. A line without its newline waits for the next pass (unless ``final``: a rotated file's last line, the
    last flush at shutdown); one already longer than an event ships its full pieces now."""
    data = os.pread(fd, READ_CHUNK, offset)
    lines: list[Line] = []
    pos = 0
    covered = offset
    while pos < len(data):
        nl = data.find(b"\n", pos)
        complete = nl >= 0 or (final and len(data) < READ_CHUNK)
        stop = nl + 1 if nl >= 0 else len(data)
        got, covered = _pieces(data[pos:stop], offset + pos, complete)
        lines += got
        if nl < 0:
            break
        pos = stop
    return lines, covered
