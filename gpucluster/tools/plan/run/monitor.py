"""The mock monitor that records what a plan shows and Pulumi's own mock monitor does not keep: each
resource's parent, whether it is protected or retained on delete, its inputs, and every
``register_outputs`` (stack exports) — plus closing the event loops the runtime's worker threads make."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor, Mocks
from pulumi.runtime.sync_await import _ensure_event_loop


@dataclass
class Registration:
    urn: str
    type: str
    name: str
    parent: str | None
    custom: bool
    protect: bool
    retain_on_delete: bool
    delete_before_replace: bool
    ignore_changes: list[str]
    dependencies: list[str]
    provider: str | None
    inputs: dict[str, Any]
    id: str | None = None
    state: dict[str, Any] = field(default_factory=dict)


def _close_thread_loop() -> None:
    """Close the event loop of the current worker thread, if it has one.

    The runtime calls the mock monitor from its executor's worker threads, and the monitor runs
    ``_sync_await`` there, which gives each worker thread an event loop of its own that nothing ever
    closes. Such a loop is only collected when its thread is gone, often at interpreter exit, where
    ``BaseEventLoop.__del__`` may find its self-pipe socket already finalized and print ``Exception
    ignored … Invalid file descriptor: -1`` after the plan succeeded. Closing it in the thread that
    made it, right after the call, leaves nothing for the collector to find.
    """
    if threading.current_thread() is threading.main_thread():
        return
    policy = asyncio.get_event_loop_policy()
    try:
        loop = policy.get_event_loop()
    except RuntimeError:  # this thread has no loop
        return
    if not loop.is_running():
        loop.close()
        policy.set_event_loop(None)


def _closing_thread_loop(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _ensure_event_loop()  # what the monitor's own methods do first; deserializing needs one
        try:
            return method(*args, **kwargs)
        finally:
            _close_thread_loop()

    return wrapper


class RecordingMonitor(MockMonitor):
    """The mock monitor, keeping what a plan needs to show: parents, protection, outputs."""

    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []
        self.outputs: dict[str, dict[str, Any]] = {}

    def forget(self) -> None:
        """Drop what was recorded so far (the throwaway stack ``set_mocks`` registers)."""
        self.registrations.clear()
        self.outputs.clear()
        self.resources.clear()

    @_closing_thread_loop
    def Invoke(self, request: Any) -> Any:
        return super().Invoke(request)

    @_closing_thread_loop
    def ReadResource(self, request: Any) -> Any:
        return super().ReadResource(request)

    @_closing_thread_loop
    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        inputs = rpc.deserialize_properties(request.object) if request.type != "pulumi:pulumi:Stack" else {}
        state = self.resources.get(response.urn)
        self.registrations.append(
            Registration(
                urn=response.urn,
                type=request.type,
                name=request.name,
                parent=request.parent or None,
                custom=bool(request.custom),
                protect=bool(request.protect),
                retain_on_delete=bool(request.retainOnDelete),
                delete_before_replace=bool(request.deleteBeforeReplace),
                ignore_changes=list(request.ignoreChanges),
                dependencies=list(request.dependencies),
                provider=request.provider or None,
                inputs=dict(inputs),
                id=state.id if state else None,
                state=dict(state.state) if state else {},
            )
        )
        return response

    @_closing_thread_loop
    def RegisterResourceOutputs(self, request: Any) -> Any:
        self.outputs[request.urn] = dict(rpc.deserialize_properties(request.outputs))
        return super().RegisterResourceOutputs(request)
