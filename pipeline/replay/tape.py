"""A run's recorded outcomes (model calls, searches, fetches, id assignments), served back instead of the network.

Replay and resume are one mechanism: the orchestrator runs again, and every external call first asks the tape.
- REPLAY: everything comes from the recording; a call it lacks fails with a message, nothing reaches the network.
- LIVE_MODEL: searches and fetches come from the recording (the same evidence); the model is called for real.
- RESUME: everything the recording holds is served; what it lacks (work not finished before the crash) runs live
  and is recorded, so finished work is never repeated.

Keys: a model call by (purpose, n-th call with that purpose) - each purpose is one sequential stream (planner:0,
worker:Q1, analyst:Q1:S2, support_judge:F3, writer, ...), so the key does not depend on thread timing or on
request bytes (page wrappers carry a random nonce); a search by (query, n, recency_days, n-th); a fetch by
normalised URL (n-th; a page reached by redirect also by its final URL). A served outcome is charged to the
budget exactly as recorded, so the ledger ends where the original ended, and on resume continues from where it
stopped. Source, finding and calculation ids are preset from the recording, so parallel workers reproduce the
original numbering (the recorded model replies refer to those ids).
"""
from __future__ import annotations

import hashlib
import json
import threading
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, TypeVar

from pipeline.core.event_types import (
    AssignedEvent,
    Event,
    FetchEvent,
    ModelErrorEvent,
    ModelErrorKind,
    ModelRequestEvent,
    ModelResponseEvent,
    SearchEvent,
    StepEvent,
)
from pipeline.core.events import redact
from pipeline.core.notebook import PresetIds
from pipeline.core.schema import FetchResult, SearchResult, Usage
from pipeline.core.untrusted import without_nonces
from pipeline.core.urls import url_key
from pipeline.store.base import RunStore, StoredEvent
from pipeline.web import docs_pages

C = TypeVar("C")
_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
# The kinds of event a tape is built from.
TAPE_KINDS = ("model_request", "model_response", "model_error", "search", "fetch", "assigned", "step")


class TapeMode(StrEnum):
    REPLAY = "replay"
    LIVE_MODEL = "live_model"
    RESUME = "resume"


@dataclass(frozen=True)
class ModelCall:
    """One recorded HTTP call to the model: a response, an API error, or a budget refusal (nothing was sent)."""

    outcome: Literal["response", "error", "refused"]
    purpose: str
    model: str = ""
    response: dict[str, Any] | None = None
    stop_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    request_id: str | None = None
    ms: float = 0.0
    error_kind: ModelErrorKind | None = None
    message: str | None = None
    digest: str | None = None

    def used(self) -> Usage:
        return Usage(**{k: int(self.usage.get(k) or 0) for k in _USAGE_FIELDS}, model_calls=1)


@dataclass(frozen=True)
class SearchCall:
    provider: str
    results: list[SearchResult]
    message: str | None
    charged: bool


@dataclass(frozen=True)
class FetchCall:
    result: FetchResult
    charged: bool


def request_digest(body: dict[str, Any]) -> str:
    """A fingerprint of a model request that ignores the page-wrapper nonces and the granted max_tokens."""
    # Redacted like the recorded copy, so a key-shaped string in a page does not count as a change.
    asked = {k: v for k, v in body.items() if k not in ("max_tokens", "max_completion_tokens")}
    text = json.dumps(redact(asked), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(without_nonces(text).encode()).hexdigest()[:16]


def search_key(query: str, n: int, recency_days: int | None) -> str:
    return json.dumps([" ".join(query.split()), n, recency_days])


class Tape:
    """Recorded outcomes of one run, served in order per key; thread-safe."""

    def __init__(self, events: Iterable[StoredEvent | Event], mode: TapeMode, *, run_id: str | None = None):
        self.mode = mode
        self.run_id = run_id
        self._lock = threading.Lock()
        self._models: dict[str, list[ModelCall]] = defaultdict(list)
        self._searches: dict[str, list[SearchCall]] = defaultdict(list)
        self._fetches: dict[str, list[FetchCall]] = defaultdict(list)
        self._redirected: dict[str, list[FetchCall]] = defaultdict(list)  # successes by their final URL
        self._served_fetches: set[int] = set()  # ids of FetchCalls served, so one reached twice is charged once
        self._taken: dict[tuple[str, str], int] = defaultdict(int)
        self.ids = PresetIds()
        self.calculation_ids: dict[tuple[str, str | None], str] = {}
        self.provider: str | None = None
        self.notices: list[str] = []  # the documents folder's refusal notice, as the run reported it
        self.served = 0
        self.missed: list[str] = []
        self.diverged: list[str] = []
        self.events: list[Event] = [e.event() if isinstance(e, StoredEvent) else e for e in events]
        self._load(self.events)

    @classmethod
    def from_store(cls, store: RunStore, run_id: str, mode: TapeMode) -> Tape:
        return cls(store.events(run_id, TAPE_KINDS), mode, run_id=run_id)

    @property
    def model_offline(self) -> bool:
        """True when a model call the tape lacks must fail instead of going to the network."""
        return self.mode is TapeMode.REPLAY

    @property
    def web_offline(self) -> bool:
        """True when a search or fetch the tape lacks must fail instead of going to the network."""
        return self.mode is not TapeMode.RESUME

    @property
    def serves_model(self) -> bool:
        return self.mode is not TapeMode.LIVE_MODEL

    # -- building ------------------------------------------------------------------------------------------
    def _load(self, events: Iterable[Event]) -> None:
        open_requests: dict[str, ModelRequestEvent] = {}
        for e in events:
            match e:
                case SearchEvent(not_recorded=True) | FetchEvent(not_recorded=True):
                    continue
                case ModelRequestEvent():
                    open_requests[e.purpose] = e  # an earlier request still open was cut off by a crash: dropped
                case ModelResponseEvent():
                    req = open_requests.pop(e.purpose, None)
                    self._models[e.purpose].append(ModelCall(
                        "response", e.purpose, model=e.model, response=e.response, stop_reason=e.stop_reason,
                        usage=e.usage,
                        request_id=e.request_id, ms=e.ms,
                        digest=request_digest(req.body) if req and "body" in req.model_fields_set else None))
                case ModelErrorEvent():
                    req = open_requests.pop(e.purpose, None)
                    if req is not None:
                        self._models[e.purpose].append(ModelCall("error", e.purpose, model=req.model,
                                                                 error_kind=e.error_kind, message=e.message))
                    elif e.error_kind == "budget":
                        self._models[e.purpose].append(ModelCall("refused", e.purpose, message=e.message))
                    # other errors without an open request were derived from a response (refusal, malformed): not calls
                case SearchEvent() if e.query:
                    self.provider = self.provider or e.provider or None
                    charged = e.charged if e.charged is not None else not _refused(e.message)
                    self._searches[search_key(e.query, e.n, e.recency_days)].append(
                        SearchCall(e.provider, list(e.results), e.message, charged))
                case FetchEvent(cached=False):
                    result = e.result()
                    charged = e.charged if e.charged is not None else result.error_kind not in ("budget", "blocked")
                    call = FetchCall(result, charged)
                    self._fetches[url_key(result.url)].append(call)
                    if result.ok and result.final_url and url_key(result.final_url) != url_key(result.url):
                        self._redirected[url_key(result.final_url)].append(call)
                case AssignedEvent():
                    self._preset(e)
                case StepEvent(name=docs_pages.NOTICE_STEP, errors=[*notices]):
                    self.notices.extend(notices)

    def _preset(self, e: AssignedEvent) -> None:
        if e.what == "source":
            for u in e.urls or []:
                self.ids.sources.setdefault(u, (e.id, e.fetched_at or ""))
        elif e.what == "finding" and e.source is not None and e.start is not None and e.end is not None:
            self.ids.findings.setdefault((e.source, e.start, e.end), e.id)
        elif e.what == "calculation" and e.expression is not None:
            self.calculation_ids.setdefault((e.expression, e.sub_question), e.id)

    # -- serving -------------------------------------------------------------------------------------------
    def _next(self, table: dict[str, list[C]], space: str, key: str) -> C | None:
        with self._lock:
            n = self._taken[(space, key)]
            self._taken[(space, key)] = n + 1
            calls = table.get(key) or []
            if n < len(calls):
                self.served += 1
                return calls[n]
            self.missed.append(f"{space} {key}")
            return None

    def has_model(self, purpose: str) -> bool:
        """True when the recording holds a call of this purpose not yet served."""
        with self._lock:
            return self._taken[("model", purpose)] < len(self._models.get(purpose) or [])

    def model(self, purpose: str, body: dict[str, Any]) -> ModelCall | None:
        """The recorded outcome of this purpose's next call, or None (not recorded, or the model is live)."""
        if not self.serves_model:
            return None
        call = self._next(self._models, "model", purpose)
        if call is not None and call.digest is not None and call.digest != request_digest(body):
            with self._lock:
                self.diverged.append(purpose)
        return call

    def search(self, query: str, n: int, recency_days: int | None, provider: str) -> SearchCall | None:
        """The recorded outcome of this search, or None. Anthropic's server-side search is a model call: in
        replay and resume it is served at the model level instead, so its tokens are charged too."""
        if provider == "anthropic" and self.serves_model:
            return None
        return self._next(self._searches, "search", search_key(query, n, recency_days))

    def fetch(self, url: str) -> FetchCall | None:
        """The recorded outcome of fetching this URL (not a cache hit: those are the Fetcher's own), or None.

        A URL the recording reached only by redirect is served that page: the original run's Fetcher answered it
        from its cache by final URL, which depends on which thread came first. A page served twice (by its URL
        and by its final URL) is charged once, as in the original run.
        """
        key = url_key(url)
        with self._lock:
            n = self._taken[("fetch", key)]
            self._taken[("fetch", key)] = n + 1
            calls = self._fetches.get(key) or []
            call = calls[n] if n < len(calls) else next(iter(self._redirected.get(key) or []), None)
            if call is None:
                self.missed.append(f"fetch {key}")
                return None
            self.served += 1
            if id(call) in self._served_fetches:
                return FetchCall(call.result, charged=False)
            self._served_fetches.add(id(call))
            return call

    def summary(self) -> dict[str, Any]:
        """Counts for the record and the CLI: served, missed and diverged requests."""
        with self._lock:
            return {"mode": self.mode.value, "from_run": self.run_id, "served": self.served,
                    "missed": len(self.missed), "diverged": sorted(set(self.diverged))}


def _refused(message: str | None) -> bool:
    return message is not None and message.startswith(("BUDGET_EXHAUSTED", "SEARCH_REFUSED"))
