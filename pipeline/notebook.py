"""The sources and findings of one run, thread-safe; a finding is kept only if its quote is in its fetched source."""
from __future__ import annotations

import hashlib
import threading
from datetime import datetime, timezone
from typing import Callable

from pydantic import BaseModel, Field

from .quotes import QuoteIndex
from .schema import Confidence, FetchResult, Finding, RejectedFinding, Source, Support
from .web.urls import normalise_url


class StoredSource(BaseModel):
    """A source with the exact text its quotes are checked against (checkpoints and the run store keep this)."""

    source: Source
    text: str


class NotebookState(BaseModel):
    """Everything needed to rebuild a notebook (resume after a crash)."""

    sources: list[StoredSource] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    rejected: list[RejectedFinding] = Field(default_factory=list)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Notebook:
    """Sources deduplicated by normalised URL; findings verified against the full source text before they are kept."""

    def __init__(self, clock: Callable[[], str] = _now):
        self._clock = clock
        self._lock = threading.RLock()
        self._sources: dict[str, StoredSource] = {}
        self._by_url: dict[str, str] = {}
        self._indexes: dict[str, QuoteIndex] = {}
        self._findings: dict[str, Finding] = {}
        self._by_span: dict[tuple[str, int, int], str] = {}
        self._rejected: list[RejectedFinding] = []

    @classmethod
    def from_state(cls, state: NotebookState, clock: Callable[[], str] = _now) -> Notebook:
        nb = cls(clock)
        for stored in state.sources:
            nb._put_source(stored)
        for f in state.findings:
            nb._findings[f.id] = f
            nb._by_span[(f.source, f.start, f.end)] = f.id
        nb._rejected = list(state.rejected)
        return nb

    def _put_source(self, stored: StoredSource) -> None:
        s = stored.source
        self._sources[s.id] = stored
        for u in (s.url, s.final_url):
            self._by_url.setdefault(normalise_url(u), s.id)

    def add_source(self, page: FetchResult) -> Source:
        """Record a successful fetch and return its Source; the same page by another URL spelling returns the first."""
        if not page.ok or page.text is None:
            raise ValueError(f"only successful fetches become sources (got {page.error_kind} for {page.url})")
        final = page.final_url or page.url
        with self._lock:
            for u in (page.url, final):
                existing = self._by_url.get(normalise_url(u))
                if existing:
                    self._by_url.setdefault(normalise_url(page.url), existing)
                    self._by_url.setdefault(normalise_url(final), existing)
                    return self._sources[existing].source
            source = Source(
                id=f"S{len(self._sources) + 1}", url=page.url, final_url=final, title=page.title,
                published=page.published, fetched_at=self._clock(),
                sha256=hashlib.sha256(page.text.encode("utf-8")).hexdigest(), chars=len(page.text),
            )
            self._put_source(StoredSource(source=source, text=page.text))
            return source

    def resolve_source(self, ref: str) -> Source | None:
        """The source named by an id ("S3") or by any URL it was fetched under; None if not fetched in this run."""
        ref = ref.strip()
        with self._lock:
            if ref in self._sources:
                return self._sources[ref].source
            sid = self._by_url.get(normalise_url(ref)) if "://" in ref else None
            return self._sources[sid].source if sid else None

    def text(self, source_id: str) -> str:
        """The full stored text of a source (what quotes are checked against)."""
        with self._lock:
            return self._sources[source_id].text

    def _index(self, source_id: str) -> QuoteIndex:
        with self._lock:
            idx = self._indexes.get(source_id)
            if idx is None:
                idx = self._indexes[source_id] = QuoteIndex(self._sources[source_id].text)
            return idx

    def add_finding(
        self, *, source: str, claim: str, quote: str, sub_question: str | None = None,
        confidence: Confidence = "medium", confirmed_with_find_in_page: bool = False,
    ) -> Finding | RejectedFinding:
        """Verify the quote in the source's full text and keep the finding, or keep and return the rejection."""

        def reject(reason: str) -> RejectedFinding:
            r = RejectedFinding(sub_question=sub_question, source=source, claim=claim, quote=quote, reason=reason)
            with self._lock:
                self._rejected.append(r)
            return r

        if not claim.strip():
            return reject("the claim is empty; state what the quote shows")
        src = self.resolve_source(source)
        if src is None:
            return reject(f"source {source!r} was not fetched in this run; fetch the page first "
                          "(search snippets cannot be quoted)")
        index = self._index(src.id)
        span = index.find(quote)
        if span is None:
            return reject(index.explain_miss(quote))
        with self._lock:
            existing = self._by_span.get((src.id, span.start, span.end))
            if existing:
                return self._findings[existing]
            finding = Finding(
                id=f"F{len(self._findings) + 1}", sub_question=sub_question, source=src.id, claim=claim.strip(),
                quote=self._sources[src.id].text[span.start:span.end], start=span.start, end=span.end,
                confidence=confidence, confirmed_with_find_in_page=confirmed_with_find_in_page,
            )
            self._findings[finding.id] = finding
            self._by_span[(src.id, span.start, span.end)] = finding.id
            return finding

    def set_support(self, finding_id: str, support: Support) -> Finding:
        """Record the support judge's verdict on a finding."""
        with self._lock:
            f = self._findings[finding_id].model_copy(update={"support": support})
            self._findings[finding_id] = f
            return f

    def sources(self) -> list[Source]:
        with self._lock:
            return [s.source for s in self._sources.values()]

    def findings(self) -> list[Finding]:
        with self._lock:
            return list(self._findings.values())

    def rejected(self) -> list[RejectedFinding]:
        with self._lock:
            return list(self._rejected)

    def state(self) -> NotebookState:
        """A snapshot for checkpoints."""
        with self._lock:
            return NotebookState(sources=list(self._sources.values()), findings=self.findings(),
                                 rejected=list(self._rejected))
