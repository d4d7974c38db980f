"""The stored page text a grade checks quotes against: the run store's recorded fetch, else the corpus page (a
frozen web's saved page, or a documents corpus's file as its index read it, with its page starts and headings)."""
from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import ValidationError

from pipeline.bench.grade import DocLayout, PageText
from pipeline.bench.suite import LIVE, MANIFEST
from pipeline.config import ConfigError, Settings
from pipeline.core.event_types import FetchEvent
from pipeline.core.schema import RunResult, Source, TextLayout
from pipeline.store.base import RunStore
from pipeline.web.corpus import Corpus
from pipeline.web.docs_build import StoredDocument, doc_path
from pipeline.web.docs_index import DocsIndex
from pipeline.web.fetch import Fetcher
from pipeline.web.folder import Unreadable


class PageTexts:
    """Page texts for grading, cached: by sha256 from the run store's fetches of a run, by URL from each corpus."""

    def __init__(self, settings: Settings, corpora: Path, store: RunStore | None = None):
        self._settings = settings
        self._corpora = Path(corpora)
        self._store = store
        self._corpus: dict[str, Corpus | None] = {}
        self._docs: dict[str, DocsIndex | None] = {}
        self._fetched: dict[tuple[str, str], str | None] = {}

    def for_run(self, result: RunResult, corpus: str) -> PageText:
        """page_text(source) for the sources of `result`, a run over `corpus` (a folder name, or "live")."""
        recorded = self._recorded(result.run_id)

        def page_text(source: Source) -> str | None:
            text = recorded.get(source.sha256)
            return text if text is not None else self._from_corpus(corpus, source.final_url)
        return page_text

    def _recorded(self, run_id: str) -> dict[str, str]:
        """The text of every page the run store recorded the run fetching, by its sha256 (scrubbed text won't match)."""
        if self._store is None or self._store.run(run_id) is None:
            return {}
        texts: dict[str, str] = {}
        for stored in self._store.events(run_id, kinds=["fetch"]):
            try:
                event = stored.event()
            except (ValueError, ValidationError):
                continue
            if isinstance(event, FetchEvent) and event.ok and event.text is not None:
                texts[hashlib.sha256(event.text.encode("utf-8")).hexdigest()] = event.text
        return texts

    def layouts(self, corpus: str) -> DocLayout:
        """layout_of(source) for a documents corpus: the page starts and headings of the file a source names."""
        def layout_of(source: Source) -> TextLayout | None:
            doc = self._document(corpus, source.final_url)
            return doc.layout if doc is not None else None
        return layout_of

    def _document(self, corpus: str, url: str) -> StoredDocument | None:
        """The file `url` (doc:PATH) names in the documents corpus `corpus`, as its index read it; else None."""
        path = doc_path(url)
        if path is None or corpus == LIVE:
            return None
        if corpus not in self._docs:
            folder = self._corpora / corpus
            try:
                self._docs[corpus] = DocsIndex.open(folder, self._settings) if (
                    folder.is_dir() and not (folder / MANIFEST).is_file()) else None
            except ConfigError:
                self._docs[corpus] = None
        index = self._docs[corpus]
        try:
            return index.document(path) if index is not None else None
        except Unreadable:
            return None

    def _from_corpus(self, corpus: str, url: str) -> str | None:
        """What a fetch of `url` from the corpus gives (the page quotes were taken from); None for a live suite."""
        if corpus == LIVE:
            return None  # a live page may have changed since: only the run store's copy counts
        if doc_path(url) is not None:
            doc = self._document(corpus, url)
            return doc.text if doc is not None else None
        key = (corpus, url)
        if key not in self._fetched:
            saved = self._open(corpus)
            self._fetched[key] = None if saved is None else Fetcher(self._settings, corpus=saved).fetch(url).text
        return self._fetched[key]

    def _open(self, corpus: str) -> Corpus | None:
        if corpus not in self._corpus:
            try:
                self._corpus[corpus] = Corpus.open(self._corpora / corpus, searchable=False)
            except ConfigError:
                self._corpus[corpus] = None  # graded as "no stored text" for every quote
        return self._corpus[corpus]

    def close(self) -> None:
        for c in self._corpus.values():
            if c is not None:
                c.close()
        for d in self._docs.values():
            if d is not None:
                d.close()
        self._corpus.clear()
        self._docs.clear()
