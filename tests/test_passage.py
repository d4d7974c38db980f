"""A document's quote shown in the text the run read (ui/passage.py), and document citations in the rendered report:
the path and page or heading, and a link to the app's own view of the passage, never to the file."""
from __future__ import annotations

from pathlib import Path

from pipeline.config import SHIPPED_CORPORA, Settings
from pipeline.core.schema import Finding, Location, Report, RunResult, Source
from pipeline.store.files import read_run_file
from ui.passage import corpus_text, passage
from ui.render import report_html

BEFORE = "Summary of the year.\nThe plant ran all year.\n"
QUOTE = "The reactor output rose to 41 megawatts in March 2023."
AFTER = "\nOperators confirmed the <new> figure.\nMore text."
TEXT = BEFORE + QUOTE + AFTER


def doc_run(start: int = len(BEFORE)) -> RunResult:
    src = Source(id="S1", url="doc:reports/annual%20review.pdf", final_url="doc:reports/annual%20review.pdf",
                 title="Annual review", fetched_at="2026-12-05T10:00:00+00:00", sha256="0" * 64, chars=len(TEXT),
                 kind="document", path="reports/annual review.pdf")
    f = Finding(id="F1", sub_question="Q1", source="S1", claim="Output rose.", quote=QUOTE, start=start,
                end=start + len(QUOTE), location=Location(page=14, page_start=3, page_end=58, heading="Results"))
    return RunResult(run_id="docrun", question="What was the output?", mode="extractive", status="complete",
                     sources=[src], findings=[f], report=Report(markdown="# Output\n\nIt rose to 41 megawatts [F1].\n"))


def test_the_quote_is_highlighted_in_the_text_around_it_with_its_file_and_page() -> None:
    shown = passage(doc_run(), "F1", TEXT)
    assert not isinstance(shown, str)
    assert shown.where == "reports/annual review.pdf, p. 14, Results" and shown.title == "Annual review"
    assert f'<mark class="vb-mark">{QUOTE}</mark>' in shown.html
    assert "The plant ran all year." in shown.html and "&lt;new&gt;" in shown.html and "<new>" not in shown.html


def test_a_long_text_is_cut_to_the_paragraphs_around_the_quote() -> None:
    text = "far before\n" + "x" * 5_000 + "\nnear before\n" + QUOTE + "\nnear after\n" + "y" * 5_000 + "\nfar after"
    rr = doc_run(start=text.index(QUOTE))
    shown = passage(rr, "F1", text, context=100)
    assert not isinstance(shown, str)
    assert "near before" in shown.html and "near after" in shown.html
    assert "far before" not in shown.html and "far after" not in shown.html and shown.html.count("…") == 2


def test_what_cannot_be_shown_is_said() -> None:
    assert "no finding F9" in str(passage(doc_run(), "F9", TEXT))
    assert "not stored on this server" in str(passage(doc_run(), "F1", None))
    assert "not at its recorded place" in str(passage(doc_run(start=0), "F1", TEXT))


def test_a_document_citation_names_its_file_and_page_and_opens_the_apps_view() -> None:
    html = report_html(doc_run())
    assert "document reports/annual review.pdf, p. 14, Results" in html
    assert 'href="/report?run=docrun&amp;passage=F1"' in html
    assert 'href="doc:' not in html and "file://" not in html  # the identifier is never made a link


def test_a_committed_run_over_the_shipped_documents_corpus_opens_its_passage(tmp_path: Path) -> None:
    folder = Path(__file__).resolve().parents[1] / "benchmark_runs" / "docs"
    runs = [read_run_file(p) for p in sorted(folder.glob("*.json"))
            if p.name != "summary.json" and not p.name.endswith(".timeline.json")]
    rr = next(r for r in runs if r.findings and any(s.kind == "document" for s in r.sources))
    f = next(f for f in rr.findings if next(s for s in rr.sources if s.id == f.source).kind == "document")
    src = next(s for s in rr.sources if s.id == f.source)
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    shown = passage(rr, f.id, corpus_text(rr, src, SHIPPED_CORPORA, settings))
    assert not isinstance(shown, str) and '<mark class="vb-mark">' in shown.html
    changed = src.model_copy(update={"sha256": "0" * 64})  # the corpus file is no longer the text the run read
    assert corpus_text(rr, changed, SHIPPED_CORPORA, settings) is None
