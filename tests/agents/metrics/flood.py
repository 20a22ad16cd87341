"""Clients that flood an exporter, as a job can (docs/monitoring.md, "Floods and squatters"): ``clients`` connections each GETting
``/metrics`` in a loop (``--idle``: each connecting and sending nothing, a slowloris), for ``seconds``.

    python -m tests.agents.metrics.flood --port P --clients 400 --seconds 8 [--idle]

Prints one JSON line at the end: requests answered (status 200), failed (refused, reset, timed out). Run as its
own process, so that the flood does not share the measuring test's interpreter.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

REQUEST = b"GET /metrics HTTP/1.1\r\nHost: node\r\nUser-Agent: flood\r\n\r\n"


async def _client(port: int, until: float, counts: dict[str, int]) -> None:
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
            writer.write(REQUEST)
            answer = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            counts["ok" if answer.startswith(b"HTTP/1.") and b" 200 " in answer[:16] else "failed"] += 1
        except (OSError, TimeoutError):
            counts["failed"] += 1
            await asyncio.sleep(0.01)


async def _idle(port: int, until: float, counts: dict[str, int]) -> None:
    while time.monotonic() < until:  # connect, send nothing, reconnect once dropped
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            counts["ok"] += 1
            await asyncio.wait_for(reader.read(), max(until - time.monotonic(), 0.01))
            writer.close()
        except (OSError, TimeoutError):
            counts["failed"] += 1
            await asyncio.sleep(0.01)


async def flood(port: int, clients: int, seconds: float, idle: bool) -> dict[str, int]:
    counts = {"ok": 0, "failed": 0}
    until = time.monotonic() + seconds
    run = _idle if idle else _client
    await asyncio.gather(*(run(port, until, counts) for _ in range(clients)))
    return counts


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--clients", type=int, default=400)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--idle", action="store_true")
    a = p.parse_args()
    print(json.dumps(asyncio.run(flood(a.port, a.clients, a.seconds, a.idle))), flush=True)


if __name__ == "__main__":
    main()
