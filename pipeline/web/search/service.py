"""Search providers behind one interface, chosen by RESEARCH_SEARCH_PROVIDER, and the budgeted SearchService.

Providers (pipeline/web/providers/ and corpus.py): brave, tavily, searxng, anthropic (server-side web search
tool, through llm.py), corpus (offline saved pages). Each `search(query, n, recency_days)` returns
list[SearchResult] (title, url, snippet, published) or raises SearchFailed, after transient faults were retried
in code (see providers/base.py). SearchService turns every remote fault, refusal and empty answer into a
message for the model; it never raises for them.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import httpx
from pydantic import BaseModel

from pipeline.core.budget import Budget, Phase
from pipeline.config import ConfigError, Settings
from pipeline.core.events import EventSink, NullSink
from pipeline.core.schema import SearchResult
from pipeline.replay.tape import NOT_RECORDED, Tape, charge_unit
from pipeline.web.corpus import Corpus, CorpusSearch
from pipeline.web.search.anthropic import AnthropicWebSearch, parse_web_search_blocks
from pipeline.web.search.base import SearchFailed, SearchProvider, Sleep, default_http_client
from pipeline.web.search.brave import BraveSearch
from pipeline.web.search.searxng import SearxngSearch
from pipeline.web.search.tavily import TavilySearch
from pipeline.core.urls import normalise_url

__all__ = [
    "AnthropicWebSearch", "BraveSearch", "CorpusSearch", "SearchFailed", "SearchOutcome", "SearchProvider",
    "SearchService", "SearxngSearch", "TavilySearch", "make_provider", "parse_web_search_blocks",
]


def _anthropic_provider(settings: Settings) -> AnthropicWebSearch:
    # Imported here: llm.py is the only module that imports the SDK, and other providers should not load it.
    from pipeline.models.anthropic import LLM, LLMError
    from pipeline.core.schema import BudgetLimits

    llm = LLM(settings, Budget(BudgetLimits(), settings.price))
    return AnthropicWebSearch(llm.server_web_search, errors=(LLMError,))


def make_provider(settings: Settings, *, http: httpx.Client | None = None, sleep: Sleep = time.sleep,
                  server_web_search: Callable[[str, int, int | None], list[dict[str, Any]]] | None = None,
                  ) -> SearchProvider:
    """The provider RESEARCH_SEARCH_PROVIDER names; ConfigError naming the variable when its key/URL is missing.

    For `anthropic`, pass the run's `llm.server_web_search` so its searches count against the run's budget;
    without it a separate LLM with default budget limits is made (the CLI's one-off search).
    """
    settings.require_search_access()
    name = settings.search_provider
    if name == "corpus":
        return CorpusSearch(Corpus.open(settings.corpus_dir))
    if name == "anthropic":
        if server_web_search is not None:
            from pipeline.models.anthropic import LLMError  # here, not at the top: only this provider needs the SDK loaded

            return AnthropicWebSearch(server_web_search, errors=(LLMError,))
        return _anthropic_provider(settings)
    client = http or default_http_client()
    if name == "brave":
        assert settings.brave_api_key is not None
        return BraveSearch(settings.brave_api_key.get_secret_value(), client, base_url=settings.search_base_url,
                           sleep=sleep)
    if name == "tavily":
        assert settings.tavily_api_key is not None
        return TavilySearch(settings.tavily_api_key.get_secret_value(), client, base_url=settings.search_base_url,
                            sleep=sleep)
    if name == "searxng":
        base = settings.search_base_url or settings.searxng_url
        assert base is not None
        return SearxngSearch(base, client, sleep=sleep)
    raise ConfigError(f"RESEARCH_SEARCH_PROVIDER={name} is not a known provider; use brave, tavily, searxng, "
                      "anthropic or corpus.")


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
        try:
            key = normalise_url(result.url)
        except ValueError:
            key = result.url
        if key not in seen:
            seen.add(key)
            kept.append(result)
    return kept


class SearchService:
    """Budgeted, recorded searches: each costs one `searches` unit; remote faults become messages, never raises.

    With a `tape`, a search the recording holds is answered from it (and charged as it was); in a replay, one it
    lacks is answered with a message, never sent.
    """

    def __init__(self, provider: SearchProvider, budget: Budget | None = None, events: EventSink | None = None,
                 clock: Callable[[], float] = time.monotonic, *, tape: Tape | None = None):
        self._provider = provider
        self._budget = budget
        self._events = events or NullSink()
        self._clock = clock
        self._tape = tape

    def search(self, query: str, n: int = 10, recency_days: int | None = None,
               phase: Phase = Phase.RESEARCH) -> SearchOutcome:
        """Up to `n` results for `query`, or a message saying why there are none."""
        query = " ".join(query.split())
        outcome = SearchOutcome(query=query, provider=self._provider.name)
        started = self._clock()
        charged, extra = False, {}
        recorded = self._tape.search(query, n, recency_days, self._provider.name) if self._tape and query else None
        if recorded is not None:
            charged = recorded.charged and charge_unit(self._budget, "searches")
            outcome.results, outcome.message, extra = list(recorded.results), recorded.message, {"replayed": True}
        elif self._tape is not None and self._tape.web_offline and query and self._provider.name != "anthropic":
            outcome.message = (f"SEARCH_FAILED: the recording has no search for {query!r}; "
                               "work with the searches already made.")
            extra = {NOT_RECORDED: True}
        elif not query:
            outcome.message = "SEARCH_REFUSED: the query is empty; write a few keywords."
        elif self._budget is not None and (refusal := self._budget.spend("searches", phase)) is not None:
            outcome.message = refusal.message
        else:
            charged = True
            try:
                outcome.results = unique_results(self._provider.search(query, n=max(1, n), recency_days=recency_days))[:n]
                if not outcome.results:
                    outcome.message = f"NO_RESULTS: the search returned nothing for {query!r}; try different words."
            except SearchFailed as e:
                outcome.message = str(e)
        self._events.emit("search", {
            "query": query, "provider": outcome.provider, "n": n, "recency_days": recency_days,
            "phase": phase.value, "count": len(outcome.results), "message": outcome.message,
            "results": [r.model_dump() for r in outcome.results], "charged": charged, **extra,
        }, ms=(self._clock() - started) * 1000)
        return outcome
