# pyright: strict, reportMissingTypeStubs=false
"""PutLogEvents within its limits, with retries.

Limits (the CloudWatch Logs API reference, PutLogEvents): a batch is at most 1,048,576 bytes counted as every
message's UTF-8 bytes plus 26 per event, at most 10,000 events, in chronological order, spanning at most 24 hours;
an event more than 2 hours in the future or older than 14 days (or the group's retention) is rejected while the rest
of the batch is taken (``rejectedLogEventsInfo``). Timestamps are the time a line was read, never a time parsed
from the line (log lines are not trusted), so a batch is in order by construction.

Throttling, a service error or a network error is retried with capped exponential backoff and jitter (botocore's
own retries are off, so one policy decides); a batch that still fails raises :class:`ShipError` and its offset is not
saved: the next pass reads it again. Rejected events are logged and skipped (they can never be accepted).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Sequence
from typing import Any, cast

from botocore.exceptions import BotoCoreError, ClientError

log = logging.getLogger("gpucluster_agents.logship")

MAX_BATCH_BYTES = 1_048_576
EVENT_OVERHEAD = 26
MAX_BATCH_EVENTS = 10_000
MAX_SPAN_MS = 24 * 3600 * 1000 - 60_000  # a minute under 24 hours
RETRYABLE = frozenset(
    (
        "ThrottlingException",
        "ServiceUnavailableException",
        "InternalFailure",
        "InternalServerError",
        "RequestLimitExceeded",
        "LimitExceededException",
        "OperationAbortedException",
    )
)
Event = tuple[int, str]
"""(timestamp in ms, message)"""


class ShipError(Exception):
    """A batch that was not accepted (after retries, or refused outright): its offsets stay unsaved."""


def batches(events: Sequence[Event]) -> list[list[Event]]:
    """``events`` (in order) cut into batches PutLogEvents accepts."""
    out: list[list[Event]] = []
    cur: list[Event] = []
    size = 0
    for ts, msg in events:
        n = len(msg.encode("utf-8")) + EVENT_OVERHEAD
        if cur and (size + n > MAX_BATCH_BYTES or len(cur) >= MAX_BATCH_EVENTS or ts - cur[0][0] > MAX_SPAN_MS):
            out.append(cur)
            cur, size = [], 0
        cur.append((ts, msg))
        size += n
    if cur:
        out.append(cur)
    return out


def _code(exc: BaseException) -> str:
    if not isinstance(exc, ClientError):
        return ""
    error = cast("dict[str, Any]", exc.response.get("Error") or {})  # pyright: ignore[reportUnknownMemberType]
    return str(error.get("Code", ""))


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, ClientError):
        return _code(exc) in RETRYABLE
    return isinstance(exc, BotoCoreError)  # connection refused or reset, timeouts, a bad answer


class Sink:
    """One log group's streams. ``stop``: set by SIGTERM, ends a regular pass's retries; ``deadline`` (monotonic
    seconds): the final flush's, after which it retries no more."""

    def __init__(self, client: Any, group: str, stop: threading.Event | None = None) -> None:
        self.client = client
        self.group = group
        self.stop = stop or threading.Event()
        self.streams: set[str] = set()
        self.attempts = 6
        self.retry_base = 0.5
        self.retry_cap = 30.0
        self.deadline: float | None = None

    def _sleep(self, attempt: int) -> bool:
        """Wait before retry ``attempt``; False when there is no time left (the final flush's deadline)."""
        delay = min(self.retry_cap, self.retry_base * 2**attempt) * random.uniform(0.5, 1.0)
        if self.deadline is None:
            # a pass SIGTERM interrupts gives up at once: the final flush (with its deadline) ships it again
            return not self.stop.wait(delay)
        delay = min(delay, self.deadline - time.monotonic())
        if delay <= 0:
            return False
        time.sleep(delay)
        return True

    def _call(self, what: str, fn: Any, **kwargs: Any) -> Any:
        last: BaseException | None = None
        for attempt in range(self.attempts):
            try:
                return fn(**kwargs)
            except Exception as exc:
                if not _retryable(exc):
                    raise
                last = exc
                log.warning("%s: %s (attempt %d of %d)", what, exc, attempt + 1, self.attempts)
                if attempt + 1 == self.attempts or not self._sleep(attempt):
                    break
        raise ShipError(f"{what}: gave up after retries: {last}")

    def ensure_stream(self, stream: str, force: bool = False) -> None:
        if stream in self.streams and not force:
            return
        try:
            self._call(f"CreateLogStream {stream}", self.client.create_log_stream, logGroupName=self.group, logStreamName=stream)
        except ClientError as exc:
            if _code(exc) != "ResourceAlreadyExistsException":
                raise ShipError(f"CreateLogStream {stream}: {exc}") from exc
        self.streams.add(stream)

    def put(self, stream: str, batch: Sequence[Event]) -> None:
        """Ship one batch (from :func:`batches`); returns once CloudWatch Logs has taken it."""
        self.ensure_stream(stream)
        events = [{"timestamp": ts, "message": msg} for ts, msg in batch]
        kwargs = {"logGroupName": self.group, "logStreamName": stream, "logEvents": events}
        try:
            resp = self._call(f"PutLogEvents {stream}", self.client.put_log_events, **kwargs)
        except ClientError as exc:
            if _code(exc) != "ResourceNotFoundException":
                raise ShipError(f"PutLogEvents {stream}: {exc}") from exc
            self.ensure_stream(stream, force=True)  # deleted by hand since: make it again
            try:
                resp = self._call(f"PutLogEvents {stream}", self.client.put_log_events, **kwargs)
            except ClientError as again:
                raise ShipError(f"PutLogEvents {stream}: {again}") from again
        rejected = cast("dict[str, Any]", resp).get("rejectedLogEventsInfo") if isinstance(resp, dict) else None
        if rejected:
            log.warning("PutLogEvents %s: CloudWatch Logs rejected events (skipped, they cannot be taken): %s", stream, rejected)
