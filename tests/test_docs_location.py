"""Locations of quotes in documents (page, offsets within it, heading path), kept by the notebook, shown in the
Sources section; documents beside the web, each source labelled; document reads on their own budget."""
from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import Settings
from pipeline.core.budget import Budget
from pipeline.core.location import cite, locate
from pipeline.core.notebook import Notebook
from pipeline.core.schema import (
    BudgetLimits,
    DocumentInfo,
    FetchResult,
    Finding,
    HeadingMark,
    Location,
    PageMark,
    RunOptions,
    SearchResult,
    TextLayout,
)
from pipeline.research.orchestrator import research
from pipeline.research.steps.checks import Evidence
from pipeline.research.steps.write import sources_section
from pipeline.web.corpus import CorpusPage, build_corpus
from pipeline.web.docs_pages import BothSearch
from pipeline.web.search.base import SearchFailed
from tests.fakes.documents import pdf_bytes, report_pages, write

LAYOUT = TextLayout(pages=[PageMark(page=1, start=0), PageMark(page=2, start=100), PageMark(page=4, start=250)],
                    headings=[HeadingMark(start=90, path="Methods"), HeadingMark(start=240, path="Methods > Dose")])


def test_a_quote_is_located_by_its_offsets() -> None:
    assert locate(LAYOUT, 0, 10) == Location(page=1, page_start=0, page_end=10, heading=None)
    assert locate(LAYOUT, 99, 120) == Location(page=1, page_start=99, page_end=120, heading="Methods")
    assert locate(LAYOUT, 100, 120) == Location(page=2, page_start=0, page_end=20, heading="Methods")
    assert locate(LAYOUT, 260, 280) == Location(page=4, page_start=10, page_end=30, heading="Methods > Dose")
    assert locate(TextLayout(headings=LAYOUT.headings), 10, 20) is None  # before the first heading: no place
    assert locate(None, 0, 5) is None and locate(TextLayout(), 0, 5) is None
    assert cite(Location(page=14)) == "p. 14" and cite(Location(page=3, heading="Results")) == "p. 3, Results"
    assert cite(None) == ""


def _document(text: str, layout: TextLayout) -> FetchResult:
    return FetchResult(ok=True, url="doc:report.pdf", final_url="doc:report.pdf", title="Report", text=text,
                       published="2024-01-02", document=DocumentInfo(path="report.pdf", layout=layout,
                                                                     published_from="mtime"))


def test_the_notebook_gives_each_finding_of_a_document_its_location() -> None:
    text = "A" * 99 + " The dam holds 40 million cubic metres of water. " + "B" * 50
    notebook = Notebook()
    source = notebook.add_source(_document(text, TextLayout(pages=[PageMark(page=1, start=0),
                                                                   PageMark(page=2, start=100)])))
    assert (source.kind, source.path, source.published_from) == ("document", "report.pdf", "mtime")
    found = notebook.add_finding(source="doc:report.pdf", claim="The dam's capacity.",
                                 quote="The dam holds 40 million cubic metres of water.")
    assert isinstance(found, Finding) and found.location == Location(page=2, page_start=0, page_end=47)
    web = notebook.add_source(FetchResult(ok=True, url="https://example.org/a", text="Plain web text, no pages."))
    assert web.kind is None and web.path is None
    plain = notebook.add_finding(source=web.id, claim="c", quote="Plain web text, no pages.")
    assert isinstance(plain, Finding) and plain.location is None and "location" not in plain.model_dump_json()


def test_the_sources_section_names_the_page_and_labels_documents_and_web() -> None:
    notebook = Notebook()
    doc = notebook.add_source(_document("x" * 19 + " The bridge opened on 3 May 1931 to traffic.",
                                        TextLayout(pages=[PageMark(page=1, start=0), PageMark(page=14, start=20)])))
    web = notebook.add_source(FetchResult(ok=True, url="https://example.org/b", final_url="https://example.org/b",
                                          title="News", text="The bridge was repainted in 2001 by the city."))
    f1 = notebook.add_finding(source=doc.id, claim="c", quote="The bridge opened on 3 May 1931 to traffic.")
    f2 = notebook.add_finding(source=web.id, claim="c", quote="The bridge was repainted in 2001 by the city.")
    assert isinstance(f1, Finding) and isinstance(f2, Finding)
    section = sources_section("It opened in 1931 [F1] and was repainted [F2].",
                              Evidence(findings=[f1, f2], sources=[doc, web]))
    assert "- [F1] Report, document report.pdf, p. 14, 2024-01-02 (file date):" in section
    assert "- [F2] News, web https://example.org/b, undated:" in section
    only_web = sources_section("Repainted [F2].", Evidence(findings=[f2], sources=[web]))
    assert "- [F2] News, https://example.org/b, undated:" in only_web  # a web-only report reads as before


def test_document_reads_have_their_own_budget() -> None:
    budget = Budget(BudgetLimits(documents=2, reserve=0.0), Settings().price)
    assert budget.spend("documents") is None and budget.spend("documents") is None
    refusal = budget.spend("documents")
    assert refusal is not None and "documents budget" in refusal.message
    assert budget.used().documents == 2 and budget.used().fetches == 0
    assert "documents" not in BudgetLimits().model_dump() and BudgetLimits(documents=5).model_dump()["documents"] == 5


class _Provider:
    def __init__(self, name: str, results: list[str] | None) -> None:
        self.name, self._results = name, results

    def search(self, query: str, n: int = 10, recency_days: int | None = None) -> list[SearchResult]:
        if self._results is None:
            raise SearchFailed(f"SEARCH_FAILED: {self.name} is down")
        return [SearchResult(title=u, url=u) for u in self._results][:n]


def test_documents_and_web_are_searched_together() -> None:
    both = BothSearch(_Provider("documents", ["doc:a.pdf", "doc:b.md"]), _Provider("brave", ["https://x.org/1"]))
    assert both.name == "documents+brave"
    assert [r.url for r in both.search("q", 3)] == ["doc:a.pdf", "https://x.org/1", "doc:b.md"]
    half = BothSearch(_Provider("documents", ["doc:a.pdf"]), _Provider("brave", None))
    assert [r.url for r in half.search("q")] == ["doc:a.pdf"]
    with pytest.raises(SearchFailed, match="documents is down"):
        BothSearch(_Provider("documents", None), _Provider("brave", None)).search("q")


def test_a_run_over_documents_and_the_web_reads_both(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    write(docs, {"review.pdf": pdf_bytes(report_pages(16, {14: "The reactor output rose to 41 megawatts in "
                                                               "March 2023, the operator said."}), title="Review")})
    page = ("<html><head><title>Grid news</title></head><body><article><p>The reactor output rose to 39 megawatts "
            "in March 2023, according to the grid operator's monthly figures.</p></article></body></html>")
    corpus = build_corpus([CorpusPage("https://grid.example/news", page.encode())], tmp_path / "web")
    corpus.close()
    settings = Settings(search_provider="corpus", corpus_dir=str(tmp_path / "web"), docs_dir=str(docs),
                        cache_dir=str(tmp_path / "cache"))  # type: ignore[call-arg]
    result = research("What was the reactor output in March 2023?", settings,
                      options=RunOptions(mode="extractive"))
    kinds = {s.url: s.kind for s in result.sources}
    assert kinds == {"doc:review.pdf": "document", "https://grid.example/news": None}
    assert result.usage.documents == 1 and result.usage.fetches == 1
    pages = {f.location.page for f in result.findings if f.location is not None}
    assert pages == {14}
    sources = result.report.markdown.rsplit("\n## Sources\n", 1)[1]
    assert "document review.pdf, p. 14" in sources and "web https://grid.example/news" in sources
