"""Replay by wrapping: a model transport, a searcher and a page loader that serve a tape's recorded outcomes and fall
through to the live one for a call the tape lacks (resume, --live-model), or answer "not recorded" (offline replay).

Each wraps at the level its calls were recorded: a model request (below the turn, repair and continuation logic),
a search as the model saw it (above the provider, where refusals are messages), a page load (below the Fetcher's
cache, which answered repeats in the recorded run too). A served outcome is charged to the budget exactly as
recorded and reported like a live one, marked `replayed`.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pipeline.core.budget import Budget, Phase
from pipeline.core.event_types import ModelRequestEvent, ModelResponseEvent
from pipeline.core.events import EventSink
from pipeline.core.schema import SearchResult
from pipeline.models.base import WARM_PURPOSE, Exchange, LLMError, ModelTransport
from pipeline.replay.tape import ModelCall, Tape
from pipeline.web.fetch import Loaded, PageLoader, failed
from pipeline.web.search.base import SearchFailed
from pipeline.web.search.service import Searcher, SearchOutcome, search_event


class RecordedModel:
    """A ModelTransport answering from the tape; a request it lacks goes to `live`, or with none fails not_recorded."""

    def __init__(self, tape: Tape, budget: Budget, events: EventSink, live: ModelTransport | None = None):
        self._tape, self._budget, self._events, self._live = tape, budget, events, live

    def send(self, body: dict[str, Any], phase: Phase, purpose: str) -> Exchange:
        if purpose.startswith(WARM_PURPOSE) and self._tape.model_offline and not self._tape.has_model(purpose):
            raise LLMError("not_recorded", "the recording has no cache warming here; nothing depends on it")
        recorded = self._tape.model(purpose, body)
        if recorded is not None:
            return self._served(recorded, body, phase, purpose)
        if self._live is None or self._tape.model_offline:
            raise LLMError("not_recorded", f"the recording has no model call {purpose!r} (the code or prompts "
                                           "changed since it was made); replay it with --live-model to call the model")
        return self._live.send(body, phase, purpose)

    def _served(self, rec: ModelCall, body: dict[str, Any], phase: Phase, purpose: str) -> Exchange:
        """A recorded call's outcome, reported like a live one and charged with its recorded usage."""
        if rec.outcome == "refused":
            raise LLMError("budget", rec.message or "BUDGET_EXHAUSTED", replayed=True)
        model = rec.model or body["model"]
        self._events.emit(ModelRequestEvent(purpose=purpose, model=model, phase=phase, body=body, replayed=True))
        if rec.outcome == "error" or rec.response is None:
            raise LLMError(rec.error_kind or "server", rec.message or "recorded failure", replayed=True)
        used = rec.used()
        used.cost_usd = self._budget.book(model, used)  # it was paid for in the recorded run
        self._events.emit(ModelResponseEvent(
            purpose=purpose, model=model, response=rec.response, stop_reason=rec.stop_reason,
            usage=dict(rec.usage), cost_usd=used.cost_usd, ms=rec.ms, request_id=rec.request_id, replayed=True,
        ), tokens=used.input_tokens + used.output_tokens, ms=rec.ms)
        return Exchange(rec.response, used, rec.request_id)


class RecordedSearch:
    """A Searcher answering from the tape; a search it lacks goes to `live`, or in an offline replay gets a message.

    Anthropic's server-side search is a model call: the tape serves it at the model level, through `live`."""

    def __init__(self, tape: Tape, live: Searcher, budget: Budget | None, events: EventSink,
                 clock: Callable[[], float] = time.monotonic):
        self._tape, self._live, self._budget, self._events, self._clock = tape, live, budget, events, clock

    @property
    def provider_name(self) -> str:
        return self._live.provider_name

    def search(self, query: str, n: int = 10, recency_days: int | None = None,
               phase: Phase = Phase.RESEARCH) -> SearchOutcome:
        query = " ".join(query.split())
        provider = self._live.provider_name
        recorded = self._tape.search(query, n, recency_days, provider) if query else None
        started = self._clock()
        if recorded is not None:
            if recorded.charged and self._budget is not None:
                self._budget.book_unit("searches")
            outcome = SearchOutcome(query=query, provider=provider, results=list(recorded.results),
                                    message=recorded.message)
            event = search_event(outcome, n=n, recency_days=recency_days, phase=phase, charged=recorded.charged,
                                 replayed=True)
        elif query and self._tape.web_offline and provider != "anthropic":
            outcome = SearchOutcome(query=query, provider=provider, message=(
                f"SEARCH_FAILED: the recording has no search for {query!r}; work with the searches already made."))
            event = search_event(outcome, n=n, recency_days=recency_days, phase=phase, charged=False,
                                 not_recorded=True)
        else:
            return self._live.search(query, n, recency_days, phase)
        self._events.emit(event, ms=(self._clock() - started) * 1000)
        return outcome


class RecordedPages:
    """A PageLoader answering from the tape; a page it lacks comes from `live`, or in an offline replay fails."""

    def __init__(self, tape: Tape, live: PageLoader, budget: Budget | None):
        self._tape, self._live, self._budget = tape, live, budget

    def load(self, url: str, phase: Phase) -> Loaded:
        recorded = self._tape.fetch(url)
        if recorded is not None:
            if recorded.charged and self._budget is not None:  # a file of a documents folder is a document read
                self._budget.book_unit("documents" if recorded.result.document is not None else "fetches")
            return Loaded(recorded.result.model_copy(update={"url": url}), recorded.charged, replayed=True)
        if self._tape.web_offline:
            return Loaded(failed(url, "network", "the recording being replayed has no fetch of this URL"), False,
                          not_recorded=True)
        return self._live.load(url, phase)


class RecordedProvider:
    """The search provider of an offline replay: it has only a name; every search is answered from the tape."""

    def __init__(self, name: str):
        self.name = name

    def search(self, query: str, n: int = 10, recency_days: int | None = None) -> list[SearchResult]:
        raise SearchFailed(f"SEARCH_FAILED: this replay has no recording of a search for {query!r}; "
                           "use the searches already made.")
