"""Search providers behind one interface, chosen by RESEARCH_SEARCH_PROVIDER, and the budgeted SearchService.

Providers (registry.py names them; one module each in this folder, and pipeline/web/corpus.py): brave, tavily,
searxng, anthropic (server-side web search tool, through the model client), corpus (offline saved pages). Each
`search(query, n, recency_days)` returns list[SearchResult] (title, url, snippet, published) or raises
SearchFailed, after transient faults were retried in code (see base.py). SearchService turns every remote fault,
refusal and empty answer into a message for the model; it never raises for them.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from pydantic import BaseModel

from pipeline.core.budget import Budget, Phase
from pipeline.core.event_types import SearchEvent
from pipeline.core.events import EventSink, NullSink
from pipeline.core.schema import SearchResult
from pipeline.core.urls import url_key
from pipeline.web.corpus import CorpusSearch
from pipeline.web.search.anthropic import AnthropicWebSearch, parse_web_search_blocks
from pipeline.web.search.base import SearchFailed, SearchProvider
from pipeline.web.search.brave import BraveSearch
from pipeline.web.search.registry import make_provider
from pipeline.web.search.searxng import SearxngSearch
from pipeline.web.search.tavily import TavilySearch

__all__ = [
    "AnthropicWebSearch", "BraveSearch", "CorpusSearch", "SearchFailed", "SearchOutcome", "SearchProvider",
    "Searcher", "SearchService", "SearxngSearch", "TavilySearch", "make_provider", "parse_web_search_blocks",
    "search_event",
]


class SearchOutcome(BaseModel):
    """One search as the model sees it: results, and a message when there are none or it failed."""

    query: str
    provider: str
    results: list[SearchResult] = []
    message: str | None = None

    @property
    def ok(self) -> bool:
        return bool(self.results)


def unique_results(results: list[SearchResult]) -> list[SearchResult]:
    """`results` without repeats of the same page (by normalised URL), in order."""
    seen: set[str] = set()
    kept = []
    for result in results:
        key = url_key(result.url)
        if key not in seen:
            seen.add(key)
            kept.append(result)
    return kept


class Searcher(Protocol):
    """Searches for the steps and tools: each answer is a SearchOutcome, never an exception."""

    @property
    def provider_name(self) -> str: ...

    def search(self, query: str, n: int = 10, recency_days: int | None = None,
               phase: Phase = Phase.RESEARCH) -> SearchOutcome: ...


def search_event(outcome: SearchOutcome, *, n: int, recency_days: int | None, phase: Phase, charged: bool,
                 replayed: bool = False, not_recorded: bool = False) -> SearchEvent:
    """The event reporting one search."""
    return SearchEvent(query=outcome.query, provider=outcome.provider, n=n, recency_days=recency_days, phase=phase,
                       count=len(outcome.results), message=outcome.message, results=list(outcome.results),
                       charged=charged, replayed=replayed, not_recorded=not_recorded)


class SearchService:
    """Budgeted, recorded searches: each costs one `searches` unit; remote faults become messages, never raises."""

    def __init__(self, provider: SearchProvider, budget: Budget | None = None, events: EventSink | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self._provider = provider
        self._budget = budget
        self._events = events or NullSink()
        self._clock = clock

    @property
    def provider_name(self) -> str:
        return self._provider.name

    def search(self, query: str, n: int = 10, recency_days: int | None = None,
               phase: Phase = Phase.RESEARCH) -> SearchOutcome:
        """Up to `n` results for `query`, or a message saying why there are none."""
        query = " ".join(query.split())
        outcome = SearchOutcome(query=query, provider=self._provider.name)
        started = self._clock()
        charged = False
        if not query:
            outcome.message = "SEARCH_REFUSED: the query is empty; write a few keywords."
        elif self._budget is not None and (refusal := self._budget.spend("searches", phase)) is not None:
            outcome.message = refusal.message
        else:
            charged = True
            try:
                found = self._provider.search(query, n=max(1, n), recency_days=recency_days)
                outcome.results = unique_results(found)[:n]
                if not outcome.results:
                    outcome.message = f"NO_RESULTS: the search returned nothing for {query!r}; try different words."
            except SearchFailed as e:
                outcome.message = str(e)
        self._events.emit(search_event(outcome, n=n, recency_days=recency_days, phase=phase, charged=charged),
                          ms=(self._clock() - started) * 1000)
        return outcome
