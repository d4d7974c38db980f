"""The event sink every external call reports to (the run store implements it), and secret redaction."""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

_SECRET_KEYS = re.compile(r"(api[-_]?key|authori[sz]ation|x-api-key|x-subscription-token|access[-_]?code|token|secret|password)", re.I)
_KEY_SHAPES = re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}|tvly-[A-Za-z0-9_\-]{8,}")


class EventSink(Protocol):
    """Receives one event per model call, search, fetch, tool call and step boundary."""

    def emit(self, kind: str, payload: dict[str, Any], *, tokens: int = 0, ms: float = 0.0) -> None: ...


class NullSink:
    """Discards events (the default when no run store is attached)."""

    def emit(self, kind: str, payload: dict[str, Any], *, tokens: int = 0, ms: float = 0.0) -> None:
        return None


class FanOut:
    """Sends each event to several sinks (progress display, run store, app)."""

    def __init__(self, *sinks: EventSink):
        self._sinks = sinks

    def emit(self, kind: str, payload: dict[str, Any], *, tokens: int = 0, ms: float = 0.0) -> None:
        for sink in self._sinks:
            sink.emit(kind, payload, tokens=tokens, ms=ms)


@dataclass
class Event:
    kind: str
    payload: dict[str, Any]
    tokens: int = 0
    ms: float = 0.0


@dataclass
class ListSink:
    """Keeps events in memory, thread-safe; for tests and progress displays."""

    events: list[Event] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def emit(self, kind: str, payload: dict[str, Any], *, tokens: int = 0, ms: float = 0.0) -> None:
        with self._lock:
            self.events.append(Event(kind, redact(payload), tokens, ms))

    def of(self, kind: str) -> list[Event]:
        with self._lock:
            return [e for e in self.events if e.kind == kind]


def redact(value: Any, secrets: tuple[str, ...] = ()) -> Any:
    """A copy of `value` with secret-named fields, key-shaped strings and each of `secrets` replaced by "[redacted]"."""
    if isinstance(value, dict):
        return {(_scrub(k, secrets) if isinstance(k, str) else k):
                ("[redacted]" if isinstance(k, str) and _SECRET_KEYS.search(k) and not k.endswith("_tokens")
                 else redact(v, secrets)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    if isinstance(value, str):
        return _scrub(value, secrets)
    return value


def _scrub(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, "[redacted]")
    return _KEY_SHAPES.sub("[redacted]", text)
