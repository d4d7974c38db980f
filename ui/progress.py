"""What a live run's progress looks like, and the event sink that collects it while the run works."""
from __future__ import annotations

import threading
from collections import deque
from typing import Literal

from pydantic import BaseModel

from pipeline.core.event_types import (
    AssignedEvent,
    Event,
    FetchEvent,
    FindingEvent,
    ModelErrorEvent,
    ModelResponseEvent,
    RejectedEvent,
    SearchEvent,
    StepEvent,
)
from pipeline.core.schema import BudgetLimits

JobStatus = Literal["running", "finished", "failed", "interrupted"]


class LiveProgress(BaseModel):
    """What the page shows while a run works: the step, budget use against its limits, findings so far."""

    job_id: str
    run_id: str
    question: str
    mode: str
    status: JobStatus
    cancel_requested: bool = False
    step: str = "starting"
    searches: int = 0
    fetches: int = 0
    model_calls: int = 0
    cost_usd: float = 0.0
    limits: BudgetLimits
    findings: int = 0
    rejected: int = 0
    recent: list[str] = []
    seconds: float = 0.0
    error: str | None = None


class ProgressSink:
    """An event sink for one live run: the current step, findings and rejections, and a short activity log."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.step = "starting"
        self.finding_ids: set[str] = set()
        self.rejected = 0
        self.recent: deque[str] = deque(maxlen=8)

    def emit(self, event: Event, *, tokens: int = 0, ms: float = 0.0) -> None:
        with self._lock:
            if isinstance(event, StepEvent) and event.status == "started":
                self.step = f"{event.name} ({event.part})" if event.part else event.name
            elif isinstance(event, FindingEvent) or (isinstance(event, AssignedEvent) and event.what == "finding"):
                # the notebook assigns every kept finding an id; the model steps also announce theirs: count each once
                self.finding_ids.add(event.id)
            elif isinstance(event, RejectedEvent):
                self.rejected += 1
            line = _activity(event, tokens)
            if line:
                self.recent.append(line)

    def snapshot(self) -> tuple[str, int, int, list[str]]:
        """(step, findings, rejected, recent activity lines)."""
        with self._lock:
            return self.step, len(self.finding_ids), self.rejected, list(self.recent)


def _activity(event: Event, tokens: int) -> str | None:
    match event:
        case SearchEvent():
            return f"search: {event.query[:80]} ({event.count} results)"
        case FetchEvent(cached=False):
            return f"fetch: {event.url[:90]} ({'ok' if event.ok else event.error_kind or 'failed'})"
        case ModelResponseEvent():
            return f"model: {event.purpose} ({tokens:,} tokens, ${event.cost_usd:.4f})"
        case ModelErrorEvent():
            return f"model: {event.purpose} failed ({event.error_kind})"
    return None
