"""The event sink every external call reports to (the run store implements it), and secret redaction."""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from pipeline.core.event_types import Event, parse_event

# Token counts, not tokens: usage fields such as input_tokens and OpenAI's prompt_tokens_details.
_COUNTS = ("_tokens", "_tokens_details")
_SECRET_KEYS = re.compile(
    r"(api[-_]?key|authori[sz]ation|x-api-key|x-subscription-token|access[-_]?code|token|secret|password)", re.I)
# Key shapes (Anthropic, OpenAI's project, service-account, admin and legacy keys, Tavily), each only at a word start:
# "risk-adjusted-..." or a URL slug "ask-the-experts-..." is text, not a key.
_KEY_SHAPES = re.compile(r"(?<![\w-])(?:sk-ant-[A-Za-z0-9_\-]{8,}|sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{20,}"
                         r"|sk-[A-Za-z0-9]{32,}|tvly-[A-Za-z0-9_\-]{8,})")


class EventSink(Protocol):
    """Receives one event per model call, search, fetch, tool call and step boundary."""

    def emit(self, event: Event, *, tokens: int = 0, ms: float = 0.0) -> None: ...


class NullSink:
    """Discards events (the default when no run store is attached)."""

    def emit(self, event: Event, *, tokens: int = 0, ms: float = 0.0) -> None:
        return None


class FanOut:
    """Sends each event to several sinks (progress display, run store, app)."""

    def __init__(self, *sinks: EventSink):
        self._sinks = sinks

    def emit(self, event: Event, *, tokens: int = 0, ms: float = 0.0) -> None:
        for sink in self._sinks:
            sink.emit(event, tokens=tokens, ms=ms)


@dataclass(frozen=True)
class Emitted:
    """One event as a ListSink kept it: secrets redacted, with its token count and duration."""

    event: Event
    tokens: int = 0
    ms: float = 0.0

    @property
    def kind(self) -> str:
        return self.event.kind

    @property
    def payload(self) -> dict[str, Any]:
        """The event's JSON form, as a run store writes it."""
        return self.event.payload()


@dataclass
class ListSink:
    """Keeps events in memory, secrets redacted, thread-safe; for tests and progress displays."""

    events: list[Emitted] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def emit(self, event: Event, *, tokens: int = 0, ms: float = 0.0) -> None:
        kept = parse_event(event.kind, redact(event.payload()))
        with self._lock:
            self.events.append(Emitted(kept, tokens, ms))

    def of(self, kind: str) -> list[Emitted]:
        with self._lock:
            return [e for e in self.events if e.kind == kind]


def redact(value: Any, secrets: tuple[str, ...] = ()) -> Any:
    """A copy of `value` with secret-named fields, key-shaped strings and each of `secrets` replaced by "[redacted]"."""
    if isinstance(value, dict):
        return {(_scrub(k, secrets) if isinstance(k, str) else k):
                ("[redacted]" if isinstance(k, str) and _SECRET_KEYS.search(k) and not k.endswith(_COUNTS)
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
