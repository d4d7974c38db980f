"""A cited passage shown in the text the run read, with the quote highlighted: how a reader checks a quote from a
document (the user's file itself is never served). The text is the run store's record of the read, or for a
benchmark run over a shipped documents corpus, the corpus file's text when it is the same."""
from __future__ import annotations

import hashlib
import html
from pathlib import Path

from pydantic import BaseModel, ValidationError

from pipeline.bench.suite import MANIFEST
from pipeline.config import ConfigError, Settings
from pipeline.core.event_types import FetchEvent
from pipeline.core.location import cite
from pipeline.core.schema import Finding, RunResult, Source
from pipeline.store.base import RunStore
from pipeline.web.docs_build import doc_path
from pipeline.web.docs_index import DocsIndex
from pipeline.web.folder import Unreadable
from ui.render import STYLE, strip_bidi

CONTEXT_CHARS = 1_500  # of the text shown on each side of the quote, cut at a paragraph break where there is one


class Passage(BaseModel):
    """A finding's quote in its source's text: where it is, and the inert HTML that shows it."""

    finding: str
    title: str
    where: str  # "reports/annual review.pdf, p. 14" or the page's address
    html: str


def recorded_text(store: RunStore | None, run_id: str, source: Source) -> str | None:
    """The text of `source` as the run read it (its sha256 matches), from the run store's record; None if absent."""
    if store is None or store.run(run_id) is None:
        return None
    for stored in store.events(run_id, kinds=["fetch"]):
        try:
            event = stored.event()
        except (ValueError, ValidationError):
            continue
        if isinstance(event, FetchEvent) and event.ok and event.text is not None and \
                hashlib.sha256(event.text.encode("utf-8")).hexdigest() == source.sha256:
            return event.text
    return None


def corpus_text(rr: RunResult, source: Source, corpora: Path, settings: Settings) -> str | None:
    """The text of a document `source` of a benchmark run over a shipped documents corpus, as its index reads it
    now, when that is the text the run read (its sha256 matches); else None."""
    path = doc_path(source.final_url)
    if rr.bench is None or path is None:
        return None
    folder = corpora / rr.bench.corpus
    if not folder.resolve().is_relative_to(corpora.resolve()) or not folder.is_dir() or (folder / MANIFEST).is_file():
        return None
    try:
        index = DocsIndex.open(folder, settings)
    except ConfigError:
        return None
    try:
        text = index.document(path).text
    except Unreadable:
        return None
    finally:
        index.close()
    return text if hashlib.sha256(text.encode("utf-8")).hexdigest() == source.sha256 else None


def _window(text: str, start: int, end: int, context: int) -> tuple[int, int]:
    """The span shown around text[start:end]: about `context` characters each side, widened to paragraph breaks."""
    lo, hi = max(0, start - context), min(len(text), end + context)
    if lo > 0 and (brk := text.find("\n", lo, start)) != -1:
        lo = brk + 1
    if hi < len(text) and (brk := text.rfind("\n", end, hi)) != -1:
        hi = brk
    return lo, hi


def _esc(text: str) -> str:
    return html.escape(strip_bidi(text), quote=True).replace("\n", "<br>")


def passage(rr: RunResult, finding_id: str, text: str | None, context: int = CONTEXT_CHARS) -> Passage | str:
    """The passage of `finding_id` in `text` (its source's recorded text), or why it cannot be shown."""
    found = next((f for f in rr.findings if f.id == finding_id), None)
    if found is None:
        return f"This run has no finding {finding_id[:20]}."
    src = next((s for s in rr.sources if s.id == found.source), None)
    if src is None or text is None:
        return (f"The text {found.id} was quoted from is not stored on this server (the run store holds it for runs "
                "made here), so the passage cannot be shown; its quote is in the report.")
    start, end = _span(found, text)
    if start < 0:
        return f"The quote of {found.id} is not at its recorded place in the stored text, so it is not shown."
    lo, hi = _window(text, start, end, context)
    body = (("…" if lo > 0 else "") + _esc(text[lo:start]) + f'<mark class="vb-mark">{_esc(text[start:end])}</mark>'
            + _esc(text[end:hi]) + ("…" if hi < len(text) else ""))
    where = ", ".join(p for p in ((src.path or src.final_url), cite(found.location)) if p)
    return Passage(finding=found.id, title=src.title or src.path or "Untitled source", where=where,
                   html=f'<style>{STYLE}.vb-mark{{background:#fff1a8;padding:0 .1em}}</style>'
                        f'<div class="vb-report vb-passage">{body}</div>')


def _span(f: Finding, text: str) -> tuple[int, int]:
    """Where the finding's quote is: its recorded offsets when the text there is the quote, else (-1, -1)."""
    if 0 <= f.start < f.end <= len(text) and text[f.start:f.end] == f.quote:
        return f.start, f.end
    return -1, -1
