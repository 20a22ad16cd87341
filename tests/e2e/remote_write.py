"""A stand-in for AMP's remote-write endpoint: an HTTP server on 127.0.0.1 that records every POST (path, headers,
body) and answers 200; and a decoder of what Prometheus sends there (the snappy block format, then the
``prometheus.WriteRequest`` protobuf), written from the two formats' public descriptions so the test needs no new
dependency. Only what the test reads is decoded: each time series' labels and sample count."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Post:
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """Records remote-write POSTs; ``url(path)`` is where to send them."""

    def __init__(self) -> None:
        self.posts: list[Post] = []
        lock, posts = threading.Lock(), self.posts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    posts.append(Post(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def snappy_decompress(data: bytes) -> bytes:
    """Snappy's block format: the uncompressed length, then literals and back-references."""
    length, pos = _varint(data, 0)
    out = bytearray()
    while pos < len(data):
        tag = data[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:  # literal; lengths over 60 follow in 1-4 little-endian bytes
            size = tag >> 2
            if size >= 60:
                extra = size - 59
                size = int.from_bytes(data[pos : pos + extra], "little")
                pos += extra
            size += 1
            out += data[pos : pos + size]
            pos += size
            continue
        if kind == 1:
            size, offset = ((tag >> 2) & 7) + 4, ((tag >> 5) << 8) | data[pos]
            pos += 1
        else:
            width = 2 if kind == 2 else 4
            size, offset = (tag >> 2) + 1, int.from_bytes(data[pos : pos + width], "little")
            pos += width
        if not 0 < offset <= len(out):
            raise ValueError(f"snappy: bad offset {offset} at {pos}")
        for _ in range(size):  # byte by byte: a copy may overlap what it writes
            out.append(out[-offset])
    if len(out) != length:
        raise ValueError(f"snappy: {len(out)} bytes, the header said {length}")
    return bytes(out)


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """A protobuf message's (field number, value) pairs: varints as ints, length-delimited as bytes."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            size, pos = _varint(data, pos)
            out.append((number, data[pos : pos + size]))
            pos += size
        elif wire in (1, 5):  # fixed64 (a sample's value), fixed32
            pos += 8 if wire == 1 else 4
        else:
            raise ValueError(f"protobuf: wire type {wire} at {pos}")
    return out


def write_request_series(body: bytes) -> list[tuple[dict[str, str], int]]:
    """Each series of a snappy-encoded ``WriteRequest`` (field 1, ``TimeSeries``: labels in field 1, samples in 2):
    its labels and its number of samples."""
    series = []
    for number, ts in _fields(snappy_decompress(body)):
        if number != 1 or not isinstance(ts, bytes):
            continue  # metadata (field 3)
        labels: dict[str, str] = {}
        samples = 0
        for field, value in _fields(ts):
            if field == 1 and isinstance(value, bytes):
                pair = dict(_fields(value))
                name, val = pair.get(1, b""), pair.get(2, b"")
                assert isinstance(name, bytes) and isinstance(val, bytes)
                labels[name.decode()] = val.decode()
            elif field == 2:
                samples += 1
        series.append((labels, samples))
    return series
