"""Frozen webs that hold failures: a saved HTTP status instead of a page, and a search outage."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline.config import ConfigError, Settings
from pipeline.core.schema import RunOptions
from pipeline.research.orchestrator import research
from pipeline.research.steps.checks import Evidence, check_report
from pipeline.web.corpus import Corpus, CorpusPage, CorpusSearch, build_corpus
from pipeline.web.fetch import Fetcher
from pipeline.web.search.base import SearchFailed

PAGE = (b"<html><head><title>Lunar landers</title></head><body><article><p>NASA added five companies to its "
        b"lunar lander program, so 14 companies can now bid on task orders.</p></article></body></html>")


def _paywalled(tmp_path: Path) -> Path:
    """A corpus of one readable page and two saved failures (a paywall and a server error)."""
    root = tmp_path / "c"
    build_corpus([CorpusPage("https://news.example/open", PAGE)], root)
    with (root / "manifest.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"url": "https://paper.example/landers", "status": 403, "title": "Lunar landers (paywall)",
                            "snippet": "NASA lunar lander companies task orders"}) + "\n")
        f.write(json.dumps({"url": "https://down.example/landers", "status": 500, "title": "Lunar landers down",
                            "snippet": "lunar lander companies"}) + "\n")
    return root


def test_a_saved_failure_is_listed_by_search_and_fetched_as_its_status(tmp_path: Path) -> None:
    corpus = Corpus.open(_paywalled(tmp_path))
    urls = [r.url for r in corpus.search("lunar lander companies", 5)]
    assert {"https://paper.example/landers", "https://down.example/landers"} <= set(urls)
    fetcher = Fetcher(Settings(), corpus=corpus)
    paywall = fetcher.fetch("https://paper.example/landers")
    assert (paywall.ok, paywall.error_kind, paywall.status) == (False, "http_status", 403)
    assert "refused access" in (paywall.error or "")
    assert fetcher.fetch("https://down.example/landers").status == 500
    assert fetcher.fetch("https://news.example/open").ok


def test_an_entry_needs_a_page_or_a_status(tmp_path: Path) -> None:
    root = tmp_path / "c"
    root.mkdir()
    (root / "manifest.jsonl").write_text(json.dumps({"url": "https://x.example/"}) + "\n")
    with pytest.raises(ConfigError, match="line 1"):
        Corpus.open(root)


def test_every_page_paywalled_gives_gaps_and_says_why(tmp_path: Path) -> None:
    root = tmp_path / "c"
    root.mkdir()
    (root / "manifest.jsonl").write_text("".join(
        json.dumps({"url": f"https://p{i}.example/landers", "status": 403, "title": f"Lunar landers {i}",
                    "snippet": "lunar lander companies task orders"}) + "\n" for i in range(3)))
    settings = Settings(corpus_dir=str(root), db_path=str(tmp_path / "r.sqlite"))
    rr = research("How many companies can bid on lunar lander task orders?", settings,
                  options=RunOptions(mode="extractive"))
    assert rr.findings == [] and rr.sources == [] and rr.report.gaps
    assert "\n> 3 pages found could not be read (3 HTTP 403)" in rr.report.markdown
    evidence = Evidence(findings=[], sources=[], gaps=rr.report.gaps, question=rr.question)
    assert check_report(rr.report.markdown, evidence) == []  # the note reports on the run; it is no claim


def test_a_search_outage_is_a_message_and_the_run_names_its_gaps(tmp_path: Path) -> None:
    root = _paywalled(tmp_path)
    (root / "corpus.json").write_text(json.dumps({"search_fails": "the search service is down (HTTP 503)"}))
    with pytest.raises(SearchFailed, match="HTTP 503"):
        CorpusSearch(Corpus.open(root)).search("lunar")
    settings = Settings(corpus_dir=str(root), db_path=str(tmp_path / "r.sqlite"))
    rr = research("How many companies can bid on lunar lander task orders?", settings,
                  options=RunOptions(mode="extractive"))
    assert rr.findings == [] and rr.report.gaps and rr.usage.searches >= 1
    assert rr.status == "partial" and [p.kind for p in rr.problems] == ["search_failed"]
    assert re.search(r"\n> All \d+ searches failed, so no page could be found \(SEARCH_FAILED: the search service "
                     r"is down \(HTTP 503\)\)", rr.report.markdown)


def test_invalid_corpus_settings_name_the_file(tmp_path: Path) -> None:
    root = _paywalled(tmp_path)
    (root / "corpus.json").write_text('{"search_fail": true}')
    with pytest.raises(ConfigError, match="corpus.json.*RESEARCH_CORPUS_DIR"):
        Corpus.open(root)
