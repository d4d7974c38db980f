"""A progress display on stderr: an event sink that prints one short line per search, fetch and model call."""
from __future__ import annotations

import sys
import threading
from typing import TextIO

from pipeline.core.event_types import Event, FetchEvent, ModelErrorEvent, ModelResponseEvent, SearchEvent, StepEvent


def _short(text: str, width: int = 70) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


class StderrProgress:
    """Prints events as they happen; thread-safe; quiet=True prints nothing."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False):
        self._stream = stream or sys.stderr
        self._quiet = quiet
        self._lock = threading.Lock()
        self._cost = 0.0

    def emit(self, event: Event, *, tokens: int = 0, ms: float = 0.0) -> None:
        line = self._line(event, tokens, ms)
        if line is None or self._quiet:
            return
        with self._lock:
            print(line, file=self._stream, flush=True)

    def _line(self, event: Event, tokens: int, ms: float) -> str | None:
        match event:
            case SearchEvent():
                return f"  search  {_short(event.query, 50)!r} -> {len(event.results)} results"
            case FetchEvent():
                return f"  fetch   {_short(event.url, 60)} [{event.error_kind or 'ok'}]"
            case ModelResponseEvent():
                self._cost += event.cost_usd
                return (f"  model   {event.purpose} {tokens:,} tokens {ms / 1000:.1f}s "
                        f"(run so far ${self._cost:.4f})")
            case ModelErrorEvent():
                return f"  model   {event.purpose} failed: {_short(event.message, 80)}"
            case StepEvent():
                return f"[{event.name}] {event.status}"
        return None
