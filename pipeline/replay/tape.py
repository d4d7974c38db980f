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
import re
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Iterable, Literal

from pipeline.core.budget import Budget
from pipeline.core.events import redact
from pipeline.core.notebook import PresetIds
from pipeline.core.schema import FetchResult, SearchResult, Usage
from pipeline.web.search.base import SearchFailed
from pipeline.core.urls import normalise_url

if TYPE_CHECKING:
    from pipeline.store.sqlite import RunStore, StoredEvent

NOT_RECORDED = "not_recorded"  # payload flag of an answer made up for a call the recording lacks
_NONCE = re.compile(r'(untrusted_page id=\\")[0-9a-f]+(\\")')
_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
_FETCH_FIELDS = frozenset(FetchResult.model_fields)


class TapeMode(str, Enum):
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
    usage: dict[str, int] = field(default_factory=dict)
    request_id: str | None = None
    ms: float = 0.0
    error_kind: str | None = None
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
    text = json.dumps(redact({k: v for k, v in body.items() if k != "max_tokens"}), sort_keys=True,
                      ensure_ascii=False)
    return hashlib.sha256(without_nonces(text).encode()).hexdigest()[:16]


def without_nonces(json_text: str) -> str:
    """JSON text with each page wrapper's random nonce blanked, so two sendings of one page compare equal."""
    return _NONCE.sub(r"\1-\2", json_text)


def search_key(query: str, n: int, recency_days: int | None) -> str:
    return json.dumps([" ".join(query.split()), n, recency_days])


def url_key(url: str) -> str:
    try:
        return normalise_url(url)
    except ValueError:
        return url.strip()


def charge_model(budget: Budget, model: str, used: Usage) -> float:
    """Book a served model call's recorded usage on the ledger (it was paid for in the recorded run); its cost."""
    return budget.book(model, used)


def charge_unit(budget: Budget | None, counter: Literal["searches", "fetches"]) -> bool:
    """Book one recorded search or fetch on the ledger; always True (kept for the callers' bookkeeping)."""
    if budget is not None:
        budget.book_unit(counter)
    return True


class RecordedProvider:
    """The search provider of a replay: it has only a name; every search is answered from the tape."""

    def __init__(self, name: str):
        self.name = name

    def search(self, query: str, n: int = 10, recency_days: int | None = None) -> list[SearchResult]:
        raise SearchFailed(f"SEARCH_FAILED: this replay has no recording of a search for {query!r}; "
                           "use the searches already made.")


class Tape:
    """Recorded outcomes of one run, served in order per key; thread-safe."""

    def __init__(self, events: Iterable[StoredEvent], mode: TapeMode, *, run_id: str | None = None):
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
        self.served = 0
        self.missed: list[str] = []
        self.diverged: list[str] = []
        self._load(events)

    @classmethod
    def from_store(cls, store: RunStore, run_id: str, mode: TapeMode) -> Tape:
        kinds = ["model_request", "model_response", "model_error", "search", "fetch", "assigned"]
        return cls(store.events(run_id, kinds), mode, run_id=run_id)

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
    def _load(self, events: Iterable[StoredEvent]) -> None:
        open_requests: dict[str, dict[str, Any]] = {}
        for e in events:
            p = e.payload
            if p.get(NOT_RECORDED):
                continue
            if e.kind == "model_request":
                open_requests[p["purpose"]] = p  # an earlier request still open was cut off by a crash: dropped
            elif e.kind == "model_response":
                req = open_requests.pop(p["purpose"], None)
                self._models[p["purpose"]].append(ModelCall(
                    "response", p["purpose"], model=p.get("model", ""), response=p["response"],
                    usage=p.get("usage") or {}, request_id=p.get("request_id"), ms=float(p.get("ms") or 0.0),
                    digest=request_digest(req["body"]) if req and isinstance(req.get("body"), dict) else None))
            elif e.kind == "model_error":
                req = open_requests.pop(p["purpose"], None)
                if req is not None:
                    self._models[p["purpose"]].append(ModelCall("error", p["purpose"], model=req.get("model", ""),
                                                                error_kind=p.get("kind"), message=p.get("message")))
                elif p.get("kind") == "budget":
                    self._models[p["purpose"]].append(ModelCall("refused", p["purpose"], message=p.get("message")))
                # other errors without an open request were derived from a response (refusal, malformed): not calls
            elif e.kind == "search" and isinstance(p.get("query"), str) and p["query"]:
                self.provider = self.provider or p.get("provider")
                self._searches[search_key(p["query"], int(p.get("n") or 10), p.get("recency_days"))].append(
                    SearchCall(p.get("provider", ""), [SearchResult.model_validate(r) for r in p.get("results") or []],
                               p.get("message"), bool(p.get("charged", not _refused(p.get("message"))))))
            elif e.kind == "fetch" and not p.get("cached"):
                result = FetchResult.model_validate({k: v for k, v in p.items() if k in _FETCH_FIELDS})
                charged = bool(p.get("charged", result.error_kind not in ("budget", "blocked")))
                call = FetchCall(result, charged)
                self._fetches[url_key(result.url)].append(call)
                if result.ok and result.final_url and url_key(result.final_url) != url_key(result.url):
                    self._redirected[url_key(result.final_url)].append(call)
            elif e.kind == "assigned":
                self._preset(p)

    def _preset(self, p: dict[str, Any]) -> None:
        what = p.get("what")
        if what == "source":
            for u in p.get("urls") or []:
                self.ids.sources.setdefault(u, (p["id"], p.get("fetched_at") or ""))
        elif what == "finding":
            self.ids.findings.setdefault((p["source"], int(p["start"]), int(p["end"])), p["id"])
        elif what == "calculation":
            self.calculation_ids.setdefault((p["expression"], p.get("sub_question")), p["id"])

    # -- serving -------------------------------------------------------------------------------------------
    def _next(self, table: dict[str, list[Any]], space: str, key: str) -> Any | None:
        with self._lock:
            n = self._taken[(space, key)]
            self._taken[(space, key)] = n + 1
            calls = table.get(key) or []
            if n < len(calls):
                self.served += 1
                return calls[n]
            self.missed.append(f"{space} {key}")
            return None

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
    return bool(message) and (message.startswith("BUDGET_EXHAUSTED") or message.startswith("SEARCH_REFUSED"))
