"""The shipped suites load, and every answer term is in the text the program extracts from one of its gold pages."""
from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from pipeline.bench.suite import Suite, load_suite
from pipeline.config import Settings
from pipeline.web.corpus import Corpus
from pipeline.web.fetch import Fetcher

ROOT = Path(__file__).resolve().parents[1]
SUITES = ROOT / "benchmarks" / "suites"
CORPORA = ROOT / "benchmarks" / "corpora"
SHIPPED = sorted(SUITES.glob("*.json"))


@cache
def suite(name: str) -> Suite:
    return load_suite(SUITES / name)


@cache
def page_text(corpus: str, url: str) -> str | None:
    """The text the program quotes from: the corpus page, through the fetcher's extraction."""
    folder = CORPORA / corpus
    saved = Corpus.open(folder)
    assert saved.get(url) is not None, f"{url} is not in the {corpus} corpus"
    return Fetcher(Settings(corpus_dir=str(folder)), corpus=saved).fetch(url).text


def test_the_news_and_pydocs_suites_are_shipped() -> None:
    assert {p.name for p in SHIPPED} >= {"news.json", "pydocs.json"}
    news, pydocs = suite("news.json"), suite("pydocs.json")
    assert len(news.questions) >= 30 and len(pydocs.questions) >= 15
    assert {"single_page", "two_page", "unanswerable"} <= {q.kind for q in news.questions}
    assert all(len(q.gold_pages) >= 2 for q in news.questions if q.kind == "two_page")


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_suite_file_loads_and_names_a_corpus(path: Path) -> None:
    s = suite(path.name)
    folder = s.corpus_dir(CORPORA)
    assert folder is None or (folder / "manifest.jsonl").is_file()


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_answer_term_is_in_the_text_of_a_gold_page(path: Path) -> None:
    s = suite(path.name)
    if s.corpus_dir(CORPORA) is None:
        pytest.skip("a live suite has no frozen pages")
    missing = []
    for q in s.questions:
        texts = [(page_text(s.corpus, url) or "").lower() for url in q.gold_pages]
        for group in q.answer_terms:
            if not any(term.lower() in text for term in group for text in texts):
                missing.append(f"{q.id}: {group}")
        for value in q.expect_conflict:
            if not any(value.lower() in text for text in texts):
                missing.append(f"{q.id}: conflict value {value!r}")
    assert missing == []
