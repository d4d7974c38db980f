"""A documents folder in a run: its search provider, search beside the web, and the loader serving doc: identifiers.

A document read takes a `documents` unit from the budget (not a `fetches` one); its FetchResult carries the file's
path and layout (page starts, headings), which the notebook keeps so each finding gets its page and heading.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from itertools import chain, zip_longest

from pipeline.config import Settings
from pipeline.core.budget import Budget, Phase
from pipeline.core.schema import DocumentInfo, FetchResult, Problem, SearchResult
from pipeline.web.docs_build import doc_path, doc_url
from pipeline.web.docs_index import DocsIndex
from pipeline.web.fetch import Loaded, PageLoader, failed
from pipeline.web.folder import MEDIA_TYPES, Unreadable
from pipeline.web.search.base import SearchFailed, SearchProvider


class DocsSearch:
    """The documents folder behind the SearchProvider interface (recency is ignored: files are not news)."""

    name = "documents"

    def __init__(self, index: DocsIndex) -> None:
        self.index = index

    def search(self, query: str, n: int = 10, recency_days: int | None = None) -> list[SearchResult]:
        return self.index.search(query, n)


class BothSearch:
    """The documents and a web provider searched together, their results taken in turn (documents first); one
    that fails leaves the other's results, and only when both fail does the search fail."""

    def __init__(self, docs: SearchProvider, web: SearchProvider) -> None:
        self._docs, self._web = docs, web
        self.name = f"{docs.name}+{web.name}"

    def search(self, query: str, n: int = 10, recency_days: int | None = None) -> list[SearchResult]:
        found: list[list[SearchResult]] = []
        errors: list[SearchFailed] = []
        for provider in (self._docs, self._web):
            try:
                found.append(provider.search(query, n, recency_days))
            except SearchFailed as e:
                errors.append(e)
        if not found:
            raise errors[0]
        both = [r for r in chain.from_iterable(zip_longest(*found)) if r is not None]
        return both[:n]


class DocumentPages:
    """A PageLoader: doc: identifiers from the documents folder; any other URL from `web`, or refused without it."""

    def __init__(self, index: DocsIndex, budget: Budget | None, web: PageLoader | None = None) -> None:
        self._index, self._budget, self._web = index, budget, web

    def load(self, url: str, phase: Phase) -> Loaded:
        path = doc_path(url)
        if path is None:
            if self._web is not None:
                return self._web.load(url, phase)
            return Loaded(failed(url, "blocked", "this run reads only the documents folder; search it for "
                                                 "doc: identifiers"), False)
        refusal = self._budget.spend("documents", phase) if self._budget is not None else None
        if refusal is not None:
            return Loaded(failed(url, "budget", refusal.message), False)
        try:
            doc = self._index.document(path)
        except Unreadable as e:
            return Loaded(failed(url, "unsupported_type", f"the document {path} cannot be read: {e}"), True)
        return Loaded(FetchResult(
            ok=True, url=url, final_url=doc_url(doc.path), status=200, content_type=MEDIA_TYPES[doc.kind],
            title=doc.title, text=doc.text, published=doc.published, bytes=doc.size,
            document=DocumentInfo(path=doc.path, layout=doc.layout, published_from=doc.published_from)), True)


def searches_web(settings: Settings) -> bool:
    """Whether a run over a documents folder also searches the web: only when RESEARCH_SEARCH_PROVIDER is set."""
    return settings.docs_dir is None or "search_provider" in settings.model_fields_set


def documents_only(settings: Settings, folder: str | os.PathLike[str]) -> Settings:
    """`settings` researching `folder` alone: no web search, whatever RESEARCH_SEARCH_PROVIDER says (a benchmark
    over a documents corpus)."""
    chosen = settings.model_copy(update={"docs_dir": str(folder)})
    chosen.__pydantic_fields_set__.discard("search_provider")  # what searches_web reads: the provider was not chosen
    return chosen


def provider_name(settings: Settings) -> str:
    """The name a run's searches are recorded under: the provider's, "documents", or "documents+<provider>"."""
    if settings.docs_dir is None:
        return settings.search_provider
    return f"{DocsSearch.name}+{settings.search_provider}" if searches_web(settings) else DocsSearch.name


def with_documents(index: DocsIndex, settings: Settings, budget: Budget | None,
                   web_search: Callable[[], SearchProvider],
                   web_pages: PageLoader) -> tuple[SearchProvider, PageLoader]:
    """The search provider and page loader of a run over `index`: the documents alone, or beside the web."""
    if not searches_web(settings):
        return DocsSearch(index), DocumentPages(index, budget)
    return BothSearch(DocsSearch(index), web_search()), DocumentPages(index, budget, web_pages)


NOTICE_STEP = "documents"  # the step event that records the refusal notice, so a replay reports it too


def refused_notice(index: DocsIndex, most: int = 10) -> list[str]:
    """One line naming the files of the folder that could not be read and why (the first `most`), or none."""
    refused = index.refused()
    if not refused:
        return []
    listed = "; ".join(f"{r.path} ({r.reason})" for r in refused[:most])
    more = f"; and {len(refused) - most} more" if len(refused) > most else ""
    return [f"{len(refused)} file{'s' if len(refused) != 1 else ''} of the documents folder could not be read, so "
            f"nothing was quoted from {'them' if len(refused) != 1 else 'it'}: {listed}{more}. "
            f"`python -m pipeline docs check {index.root}` lists them all"]


def notice_problem(message: str) -> Problem:
    """The run's problem for a refusal notice."""
    return Problem(kind="documents_refused", step="research", message=message)
