"""A run's events as MCP progress notifications.

The run works in threads (its own worker thread, and the tools mode's worker pool); the MCP session lives on the
event loop. `ProgressBridge` is the run's event sink: each event worth telling becomes one short line, handed to the
loop without waiting for the client (a full buffer drops the line, a finished request ignores it), and a task on the
loop sends the lines in order as `notifications/progress`. A request without a progress token sends nothing.
"""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream

from pipeline.core.event_types import (
    Event,
    FetchEvent,
    FindingEvent,
    ModelErrorEvent,
    ModelResponseEvent,
    SearchEvent,
    StepEvent,
)

log = logging.getLogger(__name__)
Report = Callable[[float, float | None, str | None], Awaitable[None]]
MAX_LINE = 200


def _short(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def describe(event: Event) -> str | None:
    """One line for a progress notification, or None for an event not worth telling."""
    match event:
        case StepEvent():
            name = event.name + (f" ({event.part})" if event.part and event.part != event.name else "")
            name += f" {event.sub_question}" if event.sub_question else ""
            name += f" round {event.round}" if event.round else ""
            counts = [f"{n} {label}" for n, label in ((event.findings, "findings"), (event.problems, "problems"))
                      if n is not None]
            return f"{name} {event.status}" + (f": {', '.join(counts)}" if counts else "")
        case SearchEvent(replayed=False):
            return f"search {_short(event.query, 80)!r}: {event.count} results"
        case FetchEvent(cached=False, replayed=False):
            return f"fetch {_short(event.url, 120)}: {'ok' if event.ok else event.error_kind or 'failed'}"
        case FindingEvent():
            return f"finding {event.id} kept (source {event.source})"
        case ModelResponseEvent(replayed=False):
            return f"model {event.purpose}: ${event.cost_usd:.4f}"
        case ModelErrorEvent():
            return f"model {event.purpose} failed ({event.error_kind})"
    return None


class ProgressBridge:
    """An event sink, safe in any thread, whose lines reach the client as progress notifications while `running()`.

    `scrub` is applied to every line (the server's secrets never leave it).
    """

    def __init__(self, report: Report, *, scrub: Callable[[str], str] = lambda s: s, buffer: int = 256) -> None:
        self._report, self._scrub = report, scrub
        self._send, self._receive = anyio.create_memory_object_stream[str](buffer)
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self.sent = 0
        self.dropped = 0

    def emit(self, event: Event, *, tokens: int = 0, ms: float = 0.0) -> None:
        line = describe(event)
        if line is not None:
            self.post(line)

    def post(self, line: str) -> None:
        """Queue `line` from a thread other than the loop's; never raises, never waits for the client."""
        if self._token is None:
            return
        try:
            anyio.from_thread.run_sync(self._offer, _short(self._scrub(line), MAX_LINE), token=self._token)
        except Exception:  # the request ended (closed stream) or the loop stopped: the line is not needed
            self.dropped += 1

    def _offer(self, line: str) -> None:
        try:
            self._send.send_nowait(line)
        except anyio.WouldBlock:
            self.dropped += 1

    async def say(self, line: str) -> None:
        """Queue `line` from the event loop itself."""
        self._offer(_short(self._scrub(line), MAX_LINE))

    @asynccontextmanager
    async def running(self) -> AsyncIterator[ProgressBridge]:
        """Forward queued lines while the block runs; on leaving, the lines still queued are sent, then it ends."""
        self._token = anyio.lowlevel.current_token()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._forward, self._receive)
            try:
                yield self
            finally:
                self._send.close()

    async def _forward(self, receive: MemoryObjectReceiveStream[str]) -> None:
        async with receive:
            async for line in receive:
                self.sent += 1
                try:
                    await self._report(float(self.sent), None, line)
                except Exception as e:  # the client went away: the run's result still matters
                    log.debug("progress notification not sent: %s", e)
