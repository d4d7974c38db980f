"""A run's timeline: one compact entry per search, fetch and model call, from live events or the run store."""
from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from pipeline.core.event_types import Event, FetchEvent, ModelErrorEvent, ModelResponseEvent, SearchEvent, StepEvent
from pipeline.core.schema import RunResult
from pipeline.store.base import RunStore
from pipeline.store.files import RUN_ID, TIMELINE_SUFFIX


def step_times(rr: RunResult) -> dict[str, float]:
    """Seconds per step; `started_at` (a timestamp) and `total` are not steps."""
    return {k: v for k, v in rr.timings.items() if k not in ("started_at", "total")}


class TimelineEntry(BaseModel):
    """One search, fetch or model call of a run (no request or page bodies), in the order it happened."""

    step: str = ""
    kind: str
    label: str = ""
    ok: bool = True
    tokens: int = 0
    cost_usd: float = 0.0
    ms: float = 0.0


class Timeline(BaseModel):
    """A run's calls and where they came from: "events" (recorded live) or "timings" (step times only)."""

    origin: str
    entries: list[TimelineEntry] = Field(default_factory=list)


class TimelineRecorder:
    """An event sink that keeps a compact timeline entry per search, fetch and model call; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[TimelineEntry] = []
        self._step = ""

    def emit(self, event: Event, *, tokens: int = 0, ms: float = 0.0) -> None:
        entry = self._entry(event, tokens, ms)
        with self._lock:
            if isinstance(event, StepEvent) and event.status == "started":
                self._step = event.name
            if entry is not None:
                entry.step = entry.step or self._step
                self._entries.append(entry)

    @staticmethod
    def _entry(event: Event, tokens: int, ms: float) -> TimelineEntry | None:
        match event:
            case SearchEvent():
                return TimelineEntry(kind="search", label=event.query[:200], ok=not event.message or bool(event.count),
                                     ms=ms)
            case FetchEvent():
                return TimelineEntry(kind="fetch", label=(event.final_url or event.url)[:300], ok=event.ok, ms=ms)
            case ModelResponseEvent():
                return TimelineEntry(kind="model", label=event.purpose, tokens=tokens, cost_usd=event.cost_usd, ms=ms)
            case ModelErrorEvent():
                return TimelineEntry(kind="model", label=f"{event.purpose} ({event.error_kind})", ok=False)
        return None

    def entries(self) -> list[TimelineEntry]:
        with self._lock:
            return [e.model_copy() for e in self._entries]


TIMELINE_KINDS = ("step", "search", "fetch", "model_response", "model_error")


def timeline_of_events(events: Iterable[tuple[Event, int, float]]) -> list[TimelineEntry]:
    """Timeline entries from (event, tokens, ms) in the order they happened (e.g. the run store's)."""
    recorder = TimelineRecorder()
    for event, tokens, ms in events:
        recorder.emit(event, tokens=tokens, ms=ms)
    return recorder.entries()


def load_timeline(rr: RunResult, folder: Path | None = None, store: RunStore | None = None) -> Timeline:
    """The timeline of `rr`: saved beside it in `folder`, else from the run store when it recorded the run, else one
    entry per step with its wall time."""
    if folder is not None and RUN_ID.match(rr.run_id):
        path = Path(folder) / f"{rr.run_id}{TIMELINE_SUFFIX}"
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return Timeline(origin="events", entries=[TimelineEntry.model_validate(e) for e in raw])
        except (OSError, ValueError, ValidationError):
            pass
    if store is not None:
        events = store.events(rr.run_id, kinds=TIMELINE_KINDS)
        if events:
            return Timeline(origin="run store", entries=timeline_of_events(
                (e.event(), e.tokens, e.ms) for e in events))
    return Timeline(origin="timings", entries=[TimelineEntry(step=name, kind="step", label=name, ms=secs * 1000)
                                               for name, secs in step_times(rr).items()])
