"""The offline corpus: built from the fixture pages, BM25 search, get() by URL variants, safe queries, index reuse."""
from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import pytest

from pipeline.config import ConfigError, Settings
from pipeline.web.corpus import Corpus, CorpusPage, CorpusSearch, build_corpus, corpus_from_extraction_set
from pipeline.web.fetch import Fetcher
from pipeline.web.search.service import make_provider

PAGES = Path(__file__).parent / "fixtures" / "pages"
TRUTH: dict[str, dict[str, str]] = json.loads((PAGES / "ground-truth.json").read_text(encoding="utf-8"))
RAW = {pid: gzip.decompress((PAGES / "html" / f"{pid}.html.gz").read_bytes()) for pid in TRUTH}
EUROPA_SPACE = "https://www.space.com/jupiter-moon-europa-water-vapor-confirmed.html"
PANARMENIAN = "http://www.panarmenian.net/eng/news/275221/"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    return corpus_from_extraction_set(PAGES, tmp_path_factory.mktemp("corpus"))


def _sentence(pid: str) -> str:
    """A stretch of the middle paragraph of the page's annotated body: 14 words, or 60 characters of unspaced text."""
    paragraphs = [p for p in TRUTH[pid]["articleBody"].split("\n") if len(p) >= 60]
    middle = paragraphs[len(paragraphs) // 2]
    words = middle.split()
    return " ".join(words[:14]) if len(words) >= 14 else middle[:60]


def test_every_fixture_page_is_in_the_corpus(corpus: Corpus) -> None:
    assert len(corpus) == len(TRUTH)
    assert sorted(corpus.urls()) == sorted(t["url"] for t in TRUTH.values())


@pytest.mark.parametrize("pid", sorted(TRUTH))
def test_a_sentence_from_a_page_ranks_that_page_first(corpus: Corpus, pid: str) -> None:
    results = corpus.search(_sentence(pid), n=3)
    assert results[0].url == TRUTH[pid]["url"]


def test_results_carry_title_snippet_and_date(corpus: Corpus) -> None:
    results = corpus.search("Europa water vapor plumes Hubble", n=5)
    top = results[0]
    assert top.url == EUROPA_SPACE
    assert "Europa" in top.title
    assert top.published == "2019-11-18"
    assert re.search(r"(?i)europa|plume|vapor", top.snippet) and len(top.snippet) < 400
    assert {r.url for r in results[:2]} == {EUROPA_SPACE, next(t["url"] for t in TRUTH.values()
                                                               if "sciencealert.com/nasa-finds" in t["url"])}


def test_title_words_weigh_more_than_body_words(tmp_path: Path) -> None:
    filler = "<p>" + "Ordinary words about the weather and the harbour. " * 30 + "</p>"
    pages = [CorpusPage("https://a.example/1", f"<html><head><title>Lighthouse</title></head><body><article>"
                        f"<h1>Lighthouse</h1>{filler}</article></body></html>".encode()),
             CorpusPage("https://a.example/2", f"<html><head><title>Harbour news</title></head><body><article>"
                        f"<h1>Harbour news</h1>{filler}<p>A lighthouse is mentioned once here.</p></article>"
                        "</body></html>".encode())]
    assert [r.url for r in build_corpus(pages, tmp_path).search("lighthouse", 2)] == ["https://a.example/1",
                                                                                     "https://a.example/2"]


@pytest.mark.parametrize("variant", [
    EUROPA_SPACE,
    EUROPA_SPACE + "?utm_source=twitter&utm_medium=social",
    EUROPA_SPACE + "#comments",
    "HTTPS://WWW.SPACE.COM/jupiter-moon-europa-water-vapor-confirmed.html",
    "http://www.space.com/jupiter-moon-europa-water-vapor-confirmed.html",
])
def test_get_serves_the_saved_bytes_for_url_variants(corpus: Corpus, variant: str) -> None:
    saved = corpus.get(variant)
    pid = next(k for k, v in TRUTH.items() if v["url"] == EUROPA_SPACE)
    assert saved is not None and saved.body == RAW[pid]
    assert saved.final_url == EUROPA_SPACE and saved.content_type == "text/html"


def test_get_ignores_a_trailing_slash_and_misses_unknown_urls(corpus: Corpus) -> None:
    saved = corpus.get(PANARMENIAN.rstrip("/"))
    assert saved is not None and saved.url == PANARMENIAN
    assert corpus.get("https://www.space.com/some-other-story.html") is None
    assert corpus.get("not a url") is None


@pytest.mark.parametrize("query", ['NEAR(europa plumes, 2)', '"unbalanced quote europa', 'title:europa',
                                   'europa* OR', 'AND OR NOT europa', '^europa -plumes',
                                   "europa'); DROP TABLE pages;--"])
def test_fts_syntax_in_queries_is_plain_words(corpus: Corpus, query: str) -> None:
    results = corpus.search(query, n=3)
    assert results and "europa" in results[0].url


@pytest.mark.parametrize("query", ["", "   ", "!!! ... ???", "-- ** ^^ ()"])
def test_queries_without_words_return_nothing(corpus: Corpus, query: str) -> None:
    assert corpus.search(query) == []


def test_zero_matches_is_an_empty_list(corpus: Corpus) -> None:
    assert corpus.search("xylophonequux zanzibarian") == []


def test_index_is_reused_when_unchanged_and_rebuilt_when_a_file_changes(tmp_path: Path) -> None:
    pages = [CorpusPage(TRUTH[pid]["url"], RAW[pid]) for pid in sorted(TRUTH)[:3]]
    build_corpus(pages, tmp_path).close()
    index = tmp_path / ".index.sqlite"
    before = index.stat()
    again = Corpus.open(tmp_path)
    assert index.stat().st_mtime_ns == before.st_mtime_ns and index.stat().st_ino == before.st_ino
    assert again.search("quuxwordnowhere") == []
    again.close()

    manifest = [json.loads(line) for line in (tmp_path / "manifest.jsonl").read_text().splitlines()]
    changed = tmp_path / manifest[0]["path"]
    changed.write_bytes(gzip.compress(b"<html><head><title>Changed</title></head><body><article><p>"
                                      + b"The quuxwordnowhere festival returns to the harbour next spring. " * 8
                                      + b"</p></article></body></html>"))
    rebuilt = Corpus.open(tmp_path)
    assert index.stat().st_ino != before.st_ino
    hits = rebuilt.search("quuxwordnowhere")
    assert [h.url for h in hits] == [manifest[0]["url"]] and hits[0].title == "Changed"


def test_manifest_title_and_published_override_extraction(tmp_path: Path) -> None:
    pid = sorted(TRUTH)[0]
    corpus = build_corpus([CorpusPage(TRUTH[pid]["url"], RAW[pid], title="Saved title", published="2001-02-03")],
                          tmp_path)
    (hit,) = corpus.search(_sentence(pid), 5)
    assert (hit.title, hit.published) == ("Saved title", "2001-02-03")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can write to a read-only folder")
def test_a_read_only_folder_is_indexed_in_memory(tmp_path: Path) -> None:
    pages = [CorpusPage(TRUTH[pid]["url"], RAW[pid]) for pid in sorted(TRUTH)[:2]]
    build_corpus(pages, tmp_path).close()
    (tmp_path / ".index.sqlite").unlink()
    tmp_path.chmod(0o555)
    try:
        corpus = Corpus.open(tmp_path)
        assert corpus.search(_sentence(sorted(TRUTH)[1]))[0].url == TRUTH[sorted(TRUTH)[1]]["url"]
        assert not (tmp_path / ".index.sqlite").exists()
    finally:
        tmp_path.chmod(0o755)


def test_a_folder_that_is_not_a_corpus_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="manifest.jsonl is missing.*RESEARCH_CORPUS_DIR"):
        Corpus.open(tmp_path)
    (tmp_path / "manifest.jsonl").write_text('{"url": "https://a.example/", "path": "../../etc/passwd"}\n')
    with pytest.raises(ConfigError, match="line 1.*not a file inside"):
        Corpus.open(tmp_path)
    (tmp_path / "manifest.jsonl").write_text('{"path": "x.html"}\n')
    with pytest.raises(ConfigError, match="line 1 is not a valid entry"):
        Corpus.open(tmp_path)


def test_corpus_is_the_search_provider_chosen_by_settings(corpus: Corpus) -> None:
    provider = make_provider(Settings(search_provider="corpus", corpus_dir=str(corpus.root)))
    assert isinstance(provider, CorpusSearch) and provider.name == "corpus"
    assert provider.search(_sentence(sorted(TRUTH)[0]), n=1, recency_days=1)[0].url == TRUTH[sorted(TRUTH)[0]]["url"]


def test_the_fetcher_serves_the_saved_copy_with_the_indexed_text(corpus: Corpus) -> None:
    pid = next(k for k, v in TRUTH.items() if v["url"] == EUROPA_SPACE)
    result = Fetcher(Settings(), corpus=corpus).fetch(EUROPA_SPACE + "?utm_campaign=x")
    assert result.ok and result.final_url == EUROPA_SPACE
    assert _sentence(pid) in " ".join((result.text or "").split())
    assert corpus.search(_sentence(pid), 1)[0].url == EUROPA_SPACE


def test_fetch_from_corpus_uses_the_manifest_title_and_date(tmp_path: Path) -> None:
    from pipeline.config import Settings
    from pipeline.web.corpus import CorpusPage, build_corpus
    from pipeline.web.fetch import Fetcher

    build_corpus([CorpusPage(url="https://notes.example/a", body=b"Plain notes about the corpus and its pages.",
                             content_type="text/plain", title="Saved notes", published="2024-02-03")], tmp_path)
    result = Fetcher(Settings(), corpus=Corpus.open(tmp_path)).fetch("https://notes.example/a")
    assert result.ok and (result.title, result.published) == ("Saved notes", "2024-02-03")


def test_a_corpus_opened_for_pages_only_builds_no_index_and_refuses_search(tmp_path: Path) -> None:
    root = tmp_path / "c"
    build_corpus([CorpusPage("https://example.org/a", b"<html><body><p>" + b"Words to read here. " * 30
                             + b"</p></body></html>")], root)
    for index in root.glob(".index*"):
        index.unlink()
    corpus = Corpus.open(root, searchable=False)
    assert corpus.get("https://example.org/a") is not None and not list(root.glob(".index*"))
    with pytest.raises(ValueError, match="without its search index"):
        corpus.search("words")


def test_search_stays_fast_on_a_page_that_repeats_a_common_word(tmp_path: Path) -> None:
    # 200,000 "the": FTS5's snippet() over the whole row took minutes; snippets now come from a bounded lead.
    import subprocess
    import sys
    flood = CorpusPage(url="https://a.example/bridge", content_type="text/plain",
                       body=("The new bridge will open in May. " + "the " * 200_000).encode())
    plain = [CorpusPage(url=f"https://b.example/{i}", content_type="text/plain",
                        body=f"Page {i}: the bridge over the river opens in June.".encode()) for i in range(3)]
    build_corpus([flood, *plain], tmp_path).close()
    script = ("import sys; from pipeline.web.corpus import Corpus; "
              "hits = Corpus.open(sys.argv[1]).search('When will the new bridge over the river open', 10); "
              "print(len(hits), hits[0].url, hits[0].snippet[:40])")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[1], check=True)
    count, url, snippet = done.stdout.split(" ", 2)
    assert count == "4" and url == "https://a.example/bridge" and snippet.startswith("The new bridge will open")
