# pyright: strict
"""The bounded HTTP loop that the exporter (``/metrics`` on :9400) and the head node's SigV4 signer (127.0.0.1:9091)
serve with: a job or a local user may open as many connections as it likes, and neither the number of threads, nor
the memory, nor the time a slow client holds grows with them.

- One event-loop thread reads every connection's request (line, headers, body) under one deadline
  (:attr:`Limits.request_seconds`): a client that sends nothing, or a byte at a time, is dropped when it runs out
  (slowloris), and waiting on it costs no thread.
- A complete request is answered by one of :attr:`Limits.workers` threads (the exporter's cached text, the signer's
  forward to AMP); the thread count is fixed at start, never one per client.
- At most :attr:`Limits.connections` connections are open. Past that the loop stops accepting (further clients wait
  in the kernel's listen backlog, which is bounded) and, while it waits, drops the oldest connection still sending
  its request after :attr:`Limits.grace_seconds` (a real client sends its request at once).
- A request head is at most :data:`MAX_HEAD` bytes, a body at most :attr:`Limits.max_body` (0: no body); every
  answer closes its connection (``Connection: close``).

The listening socket is the caller's: bound here (:func:`listening_socket`) or inherited from systemd
(:func:`systemd_socket`: a ``.socket`` unit holds the port while the service restarts, so no other process can take
it in between).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http import HTTPStatus

LOG = logging.getLogger("gpucluster_agents.metrics")
MAX_HEAD = 16 * 1024  # request line and headers; Prometheus sends a few hundred bytes
TIMEOUTS = (TimeoutError, asyncio.TimeoutError)  # one class from Python 3.11, two before (the nodes may run 3.10)
SD_LISTEN_FDS_START = 3  # sd_listen_fds(3): systemd passes its sockets from fd 3 on


@dataclass(frozen=True)
class Limits:
    connections: int = 512  # open at once (the file-descriptor limit is 1024 under systemd's default)
    workers: int = 4  # threads that answer complete requests
    request_seconds: float = 5.0  # to send the whole request, from the connection's accept
    grace_seconds: float = 0.5  # at the cap: a connection still sending its request after this is dropped first
    max_body: int = 0  # bytes of a request body (Content-Length); 0: requests carry none
    backlog: int = 1024  # the kernel's queue of connections not yet accepted (when bound here)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes = b""


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


Handler = Callable[[Request], Response]


class _Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def listening_socket(address: str, port: int, backlog: int = Limits.backlog) -> socket.socket:
    """A TCP socket bound to ``address``:``port`` (0: a free one) and listening."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    return socket.create_server((address, port), family=family, backlog=backlog)


def systemd_socket(environ: dict[str, str] | None = None) -> socket.socket:
    """The one listening TCP socket systemd passed (``LISTEN_FDS=1``, ``LISTEN_PID`` this process, fd 3), the
    variables removed so that no child takes them for its own. OSError naming what is missing otherwise."""
    env = os.environ if environ is None else environ
    pid, fds = env.get("LISTEN_PID", ""), env.get("LISTEN_FDS", "")
    if pid != str(os.getpid()):
        raise OSError(f"no socket from systemd (LISTEN_PID={pid or 'unset'}, this process is {os.getpid()})")
    if fds != "1":
        raise OSError(f"LISTEN_FDS={fds or 'unset'}: the .socket unit must pass exactly one socket")
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        env.pop(name, None)
    sock = socket.socket(fileno=SD_LISTEN_FDS_START)
    if sock.type != socket.SOCK_STREAM or not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
        sock.detach()
        raise OSError("the socket systemd passed is not a listening TCP socket (ListenStream=)")
    sock.set_inheritable(False)
    return sock


def _status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Unknown"


def encode(response: Response, server: str) -> bytes:
    head = [f"HTTP/1.1 {_status_line(response.status)}", f"Server: {server}", f"Content-Length: {len(response.body)}"]
    head += [f"{k}: {v}" for k, v in response.headers] + ["Connection: close", "", ""]
    return "\r\n".join(head).encode("latin-1") + response.body


@dataclass
class _Conn:
    writer: asyncio.StreamWriter
    opened: float
    reading: bool = True


@dataclass
class BoundedServer:
    """``serve_forever`` in one thread (the loop) plus ``limits.workers`` threads; ``shutdown`` from another."""

    sock: socket.socket
    handle: Handler
    limits: Limits = field(default_factory=Limits)
    name: str = "gpucluster-metrics"
    _conns: dict[int, _Conn] = field(default_factory=dict[int, _Conn], init=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False)
    _stop: asyncio.Event | None = field(default=None, init=False)
    _closed: asyncio.Event | None = field(default=None, init=False)
    _done: threading.Event = field(default_factory=threading.Event, init=False)
    _keys: itertools.count[int] = field(default_factory=itertools.count, init=False)

    @property
    def server_address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()[:2]
        return str(host), int(port)

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Serve until :meth:`shutdown` (``poll_interval``: accepted for socketserver's signature, unused)."""
        del poll_interval
        self._done.clear()
        try:
            asyncio.run(self._main())
        finally:
            self._done.set()

    def shutdown(self) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            loop.call_soon_threadsafe(stop.set)
            self._done.wait(30)

    def server_close(self) -> None:
        self.sock.close()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop, self._closed = asyncio.Event(), asyncio.Event()
        self.sock.setblocking(False)
        pool = ThreadPoolExecutor(max_workers=self.limits.workers, thread_name_prefix=self.name)
        accept = asyncio.ensure_future(self._accept(pool))
        try:
            await self._stop.wait()
        finally:
            accept.cancel()
            for conn in list(self._conns.values()):
                conn.writer.transport.abort()
            with contextlib.suppress(asyncio.CancelledError):
                await accept
            pool.shutdown(wait=False, cancel_futures=True)

    async def _room(self) -> None:
        """Return when a connection may be accepted: below the cap, or once the oldest connection still sending its
        request has had its grace (it is dropped)."""
        if self._closed is None:
            raise RuntimeError("the serve loop waits for room only once it runs (serve_forever sets it up)")
        while len(self._conns) >= self.limits.connections:
            now = time.monotonic()
            slow = min((c for c in self._conns.values() if c.reading), key=lambda c: c.opened, default=None)
            if slow is not None and now - slow.opened >= self.limits.grace_seconds:
                slow.writer.transport.abort()
                self._conns = {k: c for k, c in self._conns.items() if c is not slow}
                continue
            wait = self.limits.grace_seconds - (now - slow.opened) if slow is not None else self.limits.request_seconds
            self._closed.clear()
            with contextlib.suppress(*TIMEOUTS):
                await asyncio.wait_for(self._closed.wait(), max(wait, 0.01))

    async def _accept(self, pool: ThreadPoolExecutor) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._room()
            try:
                conn, _peer = await loop.sock_accept(self.sock)
            except OSError:  # EMFILE and friends: back off rather than spin
                await asyncio.sleep(0.1)
                continue
            try:
                reader, writer = await asyncio.open_connection(sock=conn, limit=MAX_HEAD)
            except OSError:  # gone between accept and now
                conn.close()
                continue
            key = next(self._keys)
            self._conns[key] = _Conn(writer, time.monotonic())
            task = asyncio.ensure_future(self._serve(key, reader, writer, pool))
            task.add_done_callback(lambda _t, key=key: self._forget(key))

    def _forget(self, key: int) -> None:
        self._conns.pop(key, None)
        if self._closed is not None:
            self._closed.set()

    async def _read(self, reader: asyncio.StreamReader) -> Request:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError as exc:
            raise _Refused(431, "request head too large") from exc
        lines = head.decode("latin-1").split("\r\n")
        words = lines[0].split(" ")
        if len(words) != 3 or not words[2].startswith("HTTP/1."):
            raise _Refused(400, "not an HTTP/1 request line")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, sep, value = line.partition(":")
                if not sep or not name or name != name.strip():
                    raise _Refused(400, "bad header line")
                headers[name.lower()] = value.strip()
        if "transfer-encoding" in headers:
            raise _Refused(411, "a body needs a Content-Length")
        text = headers.get("content-length", "0")
        if not (text.isascii() and text.isdigit()):
            raise _Refused(400, "bad Content-Length")
        length = int(text)
        if length > self.limits.max_body:
            raise _Refused(413, f"body over {self.limits.max_body} bytes")
        body = await reader.readexactly(length) if length else b""
        return Request(words[0], words[1], headers, body)

    async def _serve(
        self, key: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pool: ThreadPoolExecutor
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + self.limits.request_seconds
        try:
            try:
                request = await asyncio.wait_for(self._read(reader), self.limits.request_seconds)
            except _Refused as exc:
                response = Response(exc.status, f"{exc}\n".encode())
            else:
                if (conn := self._conns.get(key)) is not None:
                    conn.reading = False
                try:
                    response = await loop.run_in_executor(pool, self.handle, request)
                except Exception:  # the handler's fault: this client gets a 500, the loop goes on
                    LOG.exception("%s: request %s %s failed", self.name, request.method, request.path)
                    response = Response(500, b"internal error\n")
            writer.write(encode(response, self.name))
            # the answer goes out in the time left, at least a second: a client that does not read is dropped too
            await asyncio.wait_for(writer.drain(), max(deadline - time.monotonic(), 1.0))
            writer.close()
        except (*TIMEOUTS, asyncio.IncompleteReadError, ConnectionError, OSError):
            writer.transport.abort()  # too slow, gone, or closed mid-request
        except Exception:  # a bug of this loop's: this connection is closed, the loop goes on
            LOG.exception("%s: connection failed", self.name)
            writer.transport.abort()
