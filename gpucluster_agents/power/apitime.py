# pyright: strict
"""How long a call of the agent waited on EC2, so its own time can be told from AWS's (or moto's).

botocore announces each API call with events: ``provide-client-params`` first, ``after-call`` (or
``after-call-error``) last, retries and their back-off sleeps included in between. The timer counts
the wall time during which at least one call was in flight (parallel calls count once), so
``total - api_seconds`` is the agent's own time: Python, the journal, scontrol."""

from __future__ import annotations

import threading
import time
from typing import Any


class ApiTimer:
    def __init__(self) -> None:
        self.api_seconds = 0.0
        self.calls = 0
        self._inflight = 0
        self._since = 0.0
        self._lock = threading.Lock()

    def attach(self, client: Any) -> ApiTimer:
        events = client.meta.events
        service = client.meta.service_model.endpoint_prefix  # "ec2", "s3": one timer may watch several clients
        events.register_first(f"provide-client-params.{service}", self._start)
        events.register_last(f"after-call.{service}", self._stop)
        events.register_last(f"after-call-error.{service}", self._stop)
        return self

    def _start(self, **_: Any) -> None:
        with self._lock:
            if self._inflight == 0:
                self._since = time.monotonic()
            self._inflight += 1
            self.calls += 1

    def _stop(self, **_: Any) -> None:
        with self._lock:
            if self._inflight == 0:
                return
            self._inflight -= 1
            if self._inflight == 0:
                self.api_seconds += time.monotonic() - self._since
