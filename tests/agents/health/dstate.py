"""A file whose read puts the reader in uninterruptible sleep (D state) that SIGKILL cannot end: what a GPU
that fell off the bus does to a process inside an NVML call, made here without a GPU.

``python -m tests.agents.health.dstate MOUNTPOINT`` (root: it mounts) serves a FUSE file system straight over
/dev/fuse (no libfuse) with one file, ``hang``, opened for direct I/O. Its READ requests are taken and never
answered. The kernel then waits for the answer on the reader's behalf; a fatal signal to the reader does
not end that wait once the request is with the server ("Either request is already in userspace, or it was
forced. Wait it out.": fs/fuse/dev.c, request_wait_answer): the reader stays in D state, unkillable and
unreapable, until the server answers or goes away. Killing this server aborts the connection, which ends
every such read with an error, so a test's stuck processes die with it.

Prints ``ready`` once the kernel's INIT is answered, then one ``read <pid>`` line per READ it keeps.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

IN_HEADER = struct.Struct("<IIQQIIIHH")  # len, opcode, unique, nodeid, uid, gid, pid, total_extlen, padding
OUT_HEADER = struct.Struct("<IiQ")  # len, error, unique
ATTR = struct.Struct(
    "<QQQQQQIIIIIIIIII"
)  # fuse_attr: ino size blocks [amc]time [amc]timensec mode nlink uid gid rdev blksize flags
INIT_OUT = struct.Struct("<IIIIHHIIHHII24x")  # fuse_init_out (64 bytes)
LOOKUP, FORGET, GETATTR, OPEN, READ, RELEASE, FLUSH, INIT, INTERRUPT, BATCH_FORGET = 1, 2, 3, 14, 15, 18, 25, 26, 36, 42
NO_REPLY = (FORGET, INTERRUPT, BATCH_FORGET)
FOPEN_DIRECT_IO = 1  # reads go to the server, not through the page cache (whose waits are killable)
ENOENT, ENOSYS = 2, 38
ROOT, FILE = 1, 2
NAME = b"hang"
MS_NOSUID, MS_NODEV, MNT_DETACH = 2, 4, 2


def attr(node: int) -> bytes:
    mode, nlink, size = (stat.S_IFDIR | 0o755, 2, 0) if node == ROOT else (stat.S_IFREG | 0o444, 1, 4096)
    return ATTR.pack(node, size, 8, 0, 0, 0, 0, 0, 0, mode, nlink, 0, 0, 0, 4096, 0)


def reply(fd: int, unique: int, body: bytes = b"", error: int = 0) -> None:
    os.write(fd, OUT_HEADER.pack(OUT_HEADER.size + len(body), -error, unique) + body)


def answer(fd: int, opcode: int, unique: int, node: int, body: bytes) -> None:
    if opcode == INIT:
        _major, minor, readahead, _flags = struct.unpack_from("<IIII", body)
        reply(fd, unique, INIT_OUT.pack(7, min(minor, 31), readahead, 0, 16, 12, 65536, 1, 0, 0, 0, 0))
        print("ready", flush=True)
    elif opcode == LOOKUP:
        if node == ROOT and body.rstrip(b"\0") == NAME:
            reply(fd, unique, struct.pack("<QQQQII", FILE, 0, 3600, 3600, 0, 0) + attr(FILE))
        else:
            reply(fd, unique, error=ENOENT)
    elif opcode == GETATTR:
        reply(fd, unique, struct.pack("<QII", 3600, 0, 0) + attr(node))
    elif opcode == OPEN:
        reply(fd, unique, struct.pack("<QII", 1, FOPEN_DIRECT_IO, 0))
    elif opcode in (RELEASE, FLUSH):
        reply(fd, unique)
    else:
        reply(fd, unique, error=ENOSYS)


def serve(mountpoint: str) -> None:
    fd = os.open("/dev/fuse", os.O_RDWR)
    libc = ctypes.CDLL(None, use_errno=True)
    options = f"fd={fd},rootmode=40000,user_id=0,group_id=0".encode()
    if libc.mount(b"gpucluster-dstate", mountpoint.encode(), b"fuse", MS_NOSUID | MS_NODEV, options) != 0:
        sys.exit(f"mount: {os.strerror(ctypes.get_errno())}")
    while True:
        try:
            data = os.read(fd, 1 << 18)
        except OSError:  # ENODEV: unmounted
            return
        _, opcode, unique, node, _, _, pid, _, _ = IN_HEADER.unpack_from(data)
        if opcode == READ:
            print(f"read {pid}", flush=True)  # taken, never answered
        elif opcode not in NO_REPLY:
            answer(fd, opcode, unique, node, data[IN_HEADER.size :])


def unmount(mountpoint: str) -> None:
    ctypes.CDLL(None).umount2(mountpoint.encode(), MNT_DETACH)


def state(pid: int) -> str:
    """The process's state letter (R, S, D, T, Z), or "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def wait_for_state(pid: int, want: str, seconds: float = 5.0) -> str:
    end = time.monotonic() + seconds
    while state(pid) != want and time.monotonic() < end:
        time.sleep(0.05)
    return state(pid)


class Hung:
    """The file (``path``), and the server's word that a reader's request is with it (:meth:`taken`)."""

    def __init__(self, path: Path, server: subprocess.Popen[str]) -> None:
        self.path = path
        self.server = server

    def __str__(self) -> str:
        return str(self.path)

    def taken(self, pid: int) -> bool:
        """Block until the server has taken a READ of ``pid`` (False if it ends first)."""
        assert self.server.stdout is not None
        for line in self.server.stdout:
            if line.split() == ["read", str(pid)]:
                return True
        return False


@contextlib.contextmanager
def hung_file(tmp_path: Path) -> Iterator[Hung]:
    """The path of a file whose readers, once killed, stay in D state until this context ends (root and
    /dev/fuse: CI runs as root; elsewhere the test skips). On exit the server is killed, which ends every
    such read, and the mount is detached."""
    import pytest

    from tests.conftest import IN_CI, ROOT

    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        (pytest.fail if IN_CI else pytest.skip)("a FUSE mount needs root and /dev/fuse (CI runs as root)")
    mountpoint = tmp_path / "fuse"
    mountpoint.mkdir()
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.agents.health.dstate", str(mountpoint)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready", "the FUSE server did not start"
        yield Hung(mountpoint / NAME.decode(), server)
    finally:
        server.kill()
        server.wait()
        unmount(str(mountpoint))


if __name__ == "__main__":
    serve(sys.argv[1])
