"""What every step of one run shares: settings, model client, budget, notebook, search, fetcher, events."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .budget import Budget
from .config import Settings
from .events import EventSink, NullSink
from .llm import LLM
from .notebook import Notebook
from .schema import Calculation, RunStats
from .web.fetch import Fetcher
from .web.search import SearchService


class CalculationLog:
    """The run's `calculate` results, numbered C1.., thread-safe; the same expression is one entry."""

    def __init__(self, existing: list[Calculation] | None = None):
        self._items: list[Calculation] = list(existing or [])
        self._lock = threading.Lock()

    def add(self, expression: str, result: str, sub_question: str | None = None) -> Calculation:
        with self._lock:
            for c in self._items:
                if c.expression == expression and c.sub_question == sub_question:
                    return c
            calc = Calculation(id=f"C{len(self._items) + 1}", expression=expression, result=result,
                               sub_question=sub_question)
            self._items.append(calc)
            return calc

    def all(self) -> list[Calculation]:
        with self._lock:
            return list(self._items)


class StatsCounter:
    """Thread-safe counters behind RunStats."""

    def __init__(self, start: RunStats | None = None):
        self._stats = (start or RunStats()).model_copy()
        self._lock = threading.Lock()

    def bump(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self._stats, name, getattr(self._stats, name) + n)

    def snapshot(self) -> RunStats:
        with self._lock:
            return self._stats.model_copy()


@dataclass
class RunContext:
    """Shared by all steps and worker threads of one run; each part is thread-safe."""

    settings: Settings
    llm: LLM
    budget: Budget
    notebook: Notebook
    search: SearchService
    fetcher: Fetcher
    events: EventSink = field(default_factory=NullSink)
    calculations: CalculationLog = field(default_factory=CalculationLog)
    stats: StatsCounter = field(default_factory=StatsCounter)

    @property
    def lead_model(self) -> str:
        return self.settings.lead_model

    @property
    def worker_model(self) -> str:
        return self.settings.worker_model
