"""The reference row of every scoreboard: what a plain BM25 top-3 sentence selector cites from the same frozen web.

For each question, every page of its corpus (every file of a documents corpus) is read as a run would read it, split
into sentences, and the three sentences with the highest Okapi BM25 score for the question's words (lowercased words
less English stop words; no stemming, no question analysis, no threshold) become the findings of a report that quotes
them (a document's with its page and heading). That report is graded
exactly like a run (bench/grade.py), so the baseline never names a gap and never shows a conflict: it is the floor
every mode must beat. BM25 itself is rank-bm25's BM25Okapi, so the reference is not our own code.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rank_bm25 import BM25Okapi

from pipeline.bench.grade import BASELINE, RunGrade, grade_run
from pipeline.bench.suite import MANIFEST, Suite, SuiteQuestion
from pipeline.config import ConfigError, Settings
from pipeline.core.location import locate
from pipeline.core.schema import Finding, Plan, Report, RunResult, Source, SubQuestion, TextLayout
from pipeline.research.extractive.sentences import split_sentences
from pipeline.research.extractive.terms import STOP_WORDS
from pipeline.web.corpus import Corpus
from pipeline.web.docs_build import doc_url
from pipeline.web.docs_index import DocsIndex
from pipeline.web.fetch import Fetcher

TOP = 3
MIN_QUOTE_CHARS = 15  # the quote matcher's floor: a shorter sentence could not be a finding of any mode
_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """Lowercased words without English stop words: the baseline's whole text analysis."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]


@dataclass
class _Sentence:
    page: int
    start: int
    end: int


@dataclass
class _Page:
    url: str
    title: str | None
    published: str | None
    text: str
    path: str | None = None  # a file of a documents corpus, with its page starts and headings
    layout: TextLayout | None = None


class CorpusIndex:
    """Every readable page of one frozen web, split into sentences, under one BM25 index."""

    def __init__(self, pages: Sequence[_Page]):
        self.pages = list(pages)
        self.sentences: list[_Sentence] = []
        tokens: list[list[str]] = []
        for p, page in enumerate(self.pages):
            for span in split_sentences(page.text):
                if len(span.text) >= MIN_QUOTE_CHARS and (ws := words(span.text)):
                    self.sentences.append(_Sentence(p, span.start, span.end))
                    tokens.append(ws)
        self._bm25 = BM25Okapi(tokens) if tokens else None

    @classmethod
    def open(cls, folder: Path, settings: Settings) -> CorpusIndex:
        """The pages of the corpus in `folder`, read by the fetcher exactly as a run reads them (a documents corpus:
        its files as the index read them, which is what a run reads)."""
        if folder.is_dir() and not (folder / MANIFEST).is_file():
            docs = DocsIndex.open(folder, settings)
            try:
                return cls([_Page(url=doc_url(d.path), title=d.title, published=d.published, text=d.text, path=d.path,
                                  layout=d.layout) for d in docs.documents() if d.text])
            finally:
                docs.close()
        corpus = Corpus.open(folder, searchable=False)
        try:
            fetcher = Fetcher(settings, corpus=corpus)
            pages = []
            for url in corpus.urls():
                got = fetcher.fetch(url)
                if got.ok and got.text:
                    pages.append(_Page(url=got.final_url or url, title=got.title, published=got.published,
                                       text=got.text))
        finally:
            corpus.close()
        return cls(pages)

    def text_of(self, source: Source) -> str | None:
        """The text of the page `source` was cut from (the grader re-checks every quote against it)."""
        return next((p.text for p in self.pages if p.url == source.url), None)

    def layout_of(self, source: Source) -> TextLayout | None:
        """The page starts and headings of the document `source` was cut from (None for a web page)."""
        return next((p.layout for p in self.pages if p.url == source.url), None)

    def top(self, question: str, k: int = TOP) -> list[_Sentence]:
        """The `k` sentences of highest BM25 score for `question` (ties by position), none scoring zero or less."""
        query = words(question)
        if self._bm25 is None or not query:
            return []
        scores = self._bm25.get_scores(query)
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        return [self.sentences[i] for i in order[:k] if scores[i] > 0]


def baseline_result(question: SuiteQuestion, index: CorpusIndex) -> RunResult:
    """The baseline's answer to `question` as a RunResult: its top sentences as findings, quoted one per line."""
    picked = index.top(question.question)
    sources: dict[int, Source] = {}
    findings: list[Finding] = []
    now = datetime.now(UTC).isoformat(timespec="seconds")
    for n, s in enumerate(picked, 1):
        page = index.pages[s.page]
        if s.page not in sources:
            sources[s.page] = Source(id=f"S{len(sources) + 1}", url=page.url, final_url=page.url, title=page.title,
                                     published=page.published, fetched_at=now, chars=len(page.text),
                                     sha256=hashlib.sha256(page.text.encode("utf-8")).hexdigest(),
                                     kind="document" if page.path is not None else None, path=page.path)
        quote = page.text[s.start:s.end]
        findings.append(Finding(id=f"F{n}", sub_question="Q1", source=sources[s.page].id, claim=quote, quote=quote,
                                start=s.start, end=s.end, support="supported",
                                location=locate(page.layout, s.start, s.end)))
    lines = [f"# {question.question}", ""] + [f'- "{f.quote}" [{f.id}]' for f in findings]
    return RunResult(run_id=f"{BASELINE}-{question.id}", question=question.question, mode="extractive",
                     models={"lead": "none", "worker": "none"}, status="complete",
                     plan=Plan(sub_questions=[SubQuestion(id="Q1", question=question.question)]),
                     sources=list(sources.values()), findings=findings,
                     report=Report(markdown="\n".join(lines) + "\n"))


def baseline_grades(suite: Suite, questions: Sequence[SuiteQuestion], corpora: Path,
                    settings: Settings) -> list[RunGrade]:
    """The baseline's grade on each of `questions` that runs on a frozen web (a live question has none)."""
    indexes: dict[str, CorpusIndex | None] = {}
    grades = []
    for q in questions:
        name = suite.corpus_of(q)
        if name not in indexes:
            folder = suite.corpus_dir(corpora, q)
            try:
                indexes[name] = None if folder is None else CorpusIndex.open(folder, settings)
            except ConfigError:
                indexes[name] = None  # a missing corpus: the runs' own grades already say so
        index = indexes[name]
        if index is None:
            continue
        grades.append(grade_run(q, baseline_result(q, index), index.text_of, mode=BASELINE, repeat=1,
                                layout_of=index.layout_of))
    return grades
