"""The sources and findings of one run, thread-safe; a finding is kept only if its quote is in its fetched source."""
from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from pipeline.core.event_types import AssignedEvent
from pipeline.core.events import EventSink, NullSink
from pipeline.core.ids import FINDING, SOURCE, fresh_id, id_number
from pipeline.core.instructions import instruction_reason, quote_instruction_reason
from pipeline.core.location import locate
from pipeline.core.quotes import QuoteIndex
from pipeline.core.schema import Confidence, FetchResult, Finding, RejectedFinding, Source, Support, TextLayout
from pipeline.core.urls import url_key


class StoredSource(BaseModel):
    """A source with the exact text its quotes are checked against (checkpoints and the run store keep this)."""

    source: Source
    text: str
    layout: TextLayout | None = None  # a document's page starts and headings (locations are computed from them)


class NotebookState(BaseModel):
    """Everything needed to rebuild a notebook (resume after a crash)."""

    sources: list[StoredSource] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    rejected: list[RejectedFinding] = Field(default_factory=list)


@dataclass
class PresetIds:
    """Ids a recorded run gave (replay, resume): normalised URL -> (source id, fetched_at); span -> finding id."""

    sources: dict[str, tuple[str, str]] = field(default_factory=dict)
    findings: dict[tuple[str, int, int], str] = field(default_factory=dict)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Notebook:
    """Sources deduplicated by normalised URL; findings verified against the full source text before they are kept.

    Ids are S1, F1, ... in order of arrival, or, with `preset`, the ids a recorded run gave the same page and the
    same quoted span (so a replay reproduces the numbering that parallel workers happened to produce). Every id
    given is reported to `events` as an "assigned" event, which is what a later replay presets from.
    """

    def __init__(self, clock: Callable[[], str] = _now, *, events: EventSink | None = None,
                 preset: PresetIds | None = None):
        self._clock = clock
        self._events = events or NullSink()
        self._preset = preset or PresetIds()
        self._reserved_sources = {sid for sid, _ in self._preset.sources.values()}
        self._reserved_findings = set(self._preset.findings.values())
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
            self._by_url.setdefault(url_key(u), s.id)

    def add_source(self, page: FetchResult) -> Source:
        """Record a successful fetch and return its Source; the same page by another URL spelling returns the first."""
        if not page.ok or page.text is None:
            raise ValueError(f"only successful fetches become sources (got {page.error_kind} for {page.url})")
        final = page.final_url or page.url
        with self._lock:
            for u in (page.url, final):
                existing = self._by_url.get(url_key(u))
                if existing:
                    self._by_url.setdefault(url_key(page.url), existing)
                    self._by_url.setdefault(url_key(final), existing)
                    return self._sources[existing].source
            urls = list(dict.fromkeys(url_key(u) for u in (page.url, final)))
            recorded = next((self._preset.sources[u] for u in urls if u in self._preset.sources), None)
            if recorded is not None and recorded[0] not in self._sources:
                sid, fetched_at = recorded
            else:
                recorded = None
                sid, fetched_at = fresh_id(SOURCE, self._sources, self._reserved_sources), self._clock()
            doc = page.document
            source = Source(
                id=sid, url=page.url, final_url=final, title=page.title,
                published=page.published, fetched_at=fetched_at,
                sha256=hashlib.sha256(page.text.encode("utf-8")).hexdigest(), chars=len(page.text),
                kind="document" if doc else None, path=doc.path if doc else None,
                published_from=doc.published_from if doc else None,
            )
            self._put_source(StoredSource(source=source, text=page.text, layout=doc.layout if doc else None))
            # Reported before the lock is let go: no one can see an id that the record does not hold yet.
            self._events.emit(AssignedEvent(what="source", id=sid, urls=urls, fetched_at=fetched_at,
                                            replayed=recorded is not None))
            return source

    def resolve_source(self, ref: str) -> Source | None:
        """The source named by an id ("S3") or by any URL it was fetched under; None if not fetched in this run."""
        ref = ref.strip()
        with self._lock:
            if ref in self._sources:
                return self._sources[ref].source
            sid = self._by_url.get(url_key(ref)) if "://" in ref or ref.startswith("doc:") else None
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
        confidence: Confidence = "medium", confirmed_with_find_in_page: bool = False, selected_by_code: bool = False,
    ) -> Finding | RejectedFinding:
        """Verify the quote in the source's full text and keep the finding, or keep and return the rejection."""

        def reject(reason: str) -> RejectedFinding:
            r = RejectedFinding(sub_question=sub_question, source=source, claim=claim, quote=quote, reason=reason)
            with self._lock:
                self._rejected.append(r)
            return r

        if not claim.strip():
            return reject("the claim is empty; state what the quote shows")
        if (why := instruction_reason(claim)) is not None:  # an obeyed page: "As asked, explain ..." is no claim
            return reject(f"the claim reads as an instruction, not as a statement: {why}; state what the quote shows")
        src = self.resolve_source(source)
        if src is None:
            return reject(f"source {source!r} was not fetched in this run; fetch the page first "
                          "(search snippets cannot be quoted)")
        index = self._index(src.id)
        span = index.find(quote)
        if span is None:
            return reject(index.explain_miss(quote))
        why = quote_instruction_reason(self.text(src.id), span.start, span.end)
        if why is not None:  # verbatim in the page, but an instruction to the agent is not evidence
            return reject(f"the quote reads as an instruction, not as evidence: {why}; quote a statement of fact")
        with self._lock:
            existing = self._by_span.get((src.id, span.start, span.end))
            if existing:
                return self._findings[existing]
            fid = self._preset.findings.get((src.id, span.start, span.end))
            replayed = fid is not None and fid not in self._findings
            if not replayed:
                fid = fresh_id(FINDING, self._findings, self._reserved_findings)
            assert fid is not None
            finding = Finding(
                id=fid, sub_question=sub_question, source=src.id, claim=claim.strip(),
                quote=self._sources[src.id].text[span.start:span.end], start=span.start, end=span.end,
                confidence=confidence, confirmed_with_find_in_page=confirmed_with_find_in_page,
                selected_by_code=selected_by_code,
                location=locate(self._sources[src.id].layout, span.start, span.end),
            )
            self._findings[finding.id] = finding
            self._by_span[(src.id, span.start, span.end)] = finding.id
            self._events.emit(AssignedEvent(what="finding", id=finding.id, source=src.id, start=span.start,
                                            end=span.end, replayed=replayed))
            return finding

    def set_support(self, finding_id: str, support: Support) -> Finding:
        """Record the support judge's verdict on a finding."""
        with self._lock:
            f = self._findings[finding_id].model_copy(update={"support": support})
            self._findings[finding_id] = f
            return f

    def sources(self) -> list[Source]:
        """In id order (the order of arrival, or of the recording being replayed)."""
        with self._lock:
            return sorted((s.source for s in self._sources.values()), key=lambda s: id_number(s.id))

    def findings(self) -> list[Finding]:
        """In id order."""
        with self._lock:
            return sorted(self._findings.values(), key=lambda f: id_number(f.id))

    def rejected(self) -> list[RejectedFinding]:
        """In a fixed order (parallel workers reject in any order; a replay must list them identically)."""
        with self._lock:
            return sorted(self._rejected, key=lambda r: (r.sub_question or "", r.source, r.quote, r.claim, r.reason))

    def state(self) -> NotebookState:
        """A snapshot for checkpoints."""
        with self._lock:
            return NotebookState(sources=list(self._sources.values()), findings=self.findings(),
                                 rejected=list(self._rejected))
