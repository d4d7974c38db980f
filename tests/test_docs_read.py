"""Every kind of file a documents folder holds, read in the extraction workers: text, title, date, page starts and
heading paths; files that cannot be read are refused with a named reason."""
from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from pipeline.core.location import cite, locate
from pipeline.core.schema import TextLayout
from pipeline.web import pdf_worker
from pipeline.web.documents import Document, Kind
from pipeline.web.extract import Extracted, ExtractionError
from pipeline.web.workers import WorkerPool
from tests.fakes.documents import Scan, docx_bytes, encrypted_pdf, pdf_bytes, report_pages

PAGE_14 = "The reactor output rose to 41 megawatts in March 2023.\nOperators confirmed the new figure."


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    """Workers with OCR off (RESEARCH_OCR=off, read when they start): what an installation without tesseract does."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RESEARCH_OCR", "off")
        workers = WorkerPool(size=2)
        workers.read(Document(kind="text", body=b"start", url="doc:start.txt"))  # started under this environment
    yield workers
    workers.close()


@pytest.fixture(scope="module")
def ocr_pool() -> Iterator[WorkerPool]:
    """Workers that read scanned pages with Debian's tesseract-ocr (.ci/run installs it)."""
    if shutil.which("tesseract") is None:
        pytest.skip("needs Debian's tesseract-ocr (.ci/run installs it)")
    with pytest.MonkeyPatch.context() as env:
        env.delenv("RESEARCH_OCR", raising=False)
        workers = WorkerPool(size=1)
        workers.read(Document(kind="text", body=b"start", url="doc:start.txt"))
    yield workers
    workers.close()


def read(pool: WorkerPool, kind: Kind, body: bytes | str) -> Extracted:
    data = body.encode() if isinstance(body, str) else body
    return pool.read(Document(kind=kind, body=data, url=f"doc:file.{kind}", outline=True))


def where(got: Extracted, quote: str) -> tuple[int | None, str | None]:
    start = got.text.index(quote)
    found = locate(TextLayout(pages=got.pages, headings=got.headings), start, start + len(quote))
    assert found is not None
    return found.page, found.heading


def test_a_quote_on_page_14_of_a_20_page_pdf_is_on_page_14(pool: WorkerPool) -> None:
    got = read(pool, "pdf", pdf_bytes(report_pages(20, {14: PAGE_14}), title="Annual review"))
    assert got.title == "Annual review" and got.published == "2024-03-15"
    assert [p.page for p in got.pages] == list(range(1, 21))
    assert where(got, "The reactor output rose to 41 megawatts in March 2023.") == (14, None)
    assert where(got, "routine matters of page 13") == (13, None)
    start = got.text.index("Operators confirmed")
    location = locate(TextLayout(pages=got.pages), start, start + 10)
    assert location is not None and got.text[got.pages[13].start + (location.page_start or 0):][:10] == "Operators "


def test_pages_without_text_keep_the_printed_numbering_and_are_named(pool: WorkerPool) -> None:
    pages = report_pages(6, {5: "Page five says the harbour closed in 1999."})
    pages[2] = None  # page 3 is a scanned image: no text layer
    got = read(pool, "pdf", pdf_bytes(pages))
    assert [p.page for p in got.pages] == [1, 2, 4, 5, 6]
    assert where(got, "Page five says the harbour closed in 1999.")[0] == 5
    assert got.warnings == ["page 3 has no text layer (a scanned image?); OCR (tesseract-ocr) is not run"]


def test_one_page_the_reader_fails_on_costs_that_page_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import pypdf

    real = pypdf.PageObject.extract_text

    def fails_on_page_two(self: pypdf.PageObject, *args: object, **kwargs: object) -> str:
        text = real(self)
        if "Page two" in text:  # a library failure, planted where pypdf raises it
            raise KeyError("/Widths")
        return text

    monkeypatch.setattr(pypdf.PageObject, "extract_text", fails_on_page_two)
    answer = pdf_worker.extract(pdf_bytes(["Page one is fine.", "Page two breaks.", "Page three is fine."]), 10)
    assert answer["ok"] is True and answer["text"] == "Page one is fine.\n\nPage three is fine."
    assert answer["page_starts"] == [[1, 0], [3, len("Page one is fine.\n\n")]]
    assert answer["warnings"] == ["page 2 could not be read (KeyError: '/Widths')"]


def test_a_scanned_pdf_is_refused_naming_ocr(pool: WorkerPool) -> None:
    with pytest.raises(ExtractionError, match="no text layer.*OCR \\(tesseract-ocr\\)"):
        read(pool, "pdf", pdf_bytes([None, Scan("The dredging cost 12 million euros.")]))


SCANNED = "The harbour dredging cost 12 million euros in 2021.\nWork ended in the spring."


def test_a_scanned_page_is_read_by_ocr_and_its_quotes_say_so(ocr_pool: WorkerPool) -> None:
    got = read(ocr_pool, "pdf", pdf_bytes(["Page one has a text layer.", Scan(SCANNED), "Page three too."]))
    assert "The harbour dredging cost 12 million euros in 2021." in got.text
    assert [(p.page, p.ocr) for p in got.pages] == [(1, False), (2, True), (3, False)]
    assert got.warnings == ["page 2 is a scanned image: its text was read by OCR (tesseract)"]
    start = got.text.index("12 million euros")
    location = locate(TextLayout(pages=got.pages), start, start + 16)
    assert location is not None and location.page == 2 and location.ocr and cite(location) == "p. 2 (OCR text)"
    first = locate(TextLayout(pages=got.pages), 0, 4)
    assert first is not None and not first.ocr and cite(first) == "p. 1"


def test_a_scanned_page_ocr_reads_nothing_on_is_named(ocr_pool: WorkerPool) -> None:
    with pytest.raises(ExtractionError, match="no text layer.*OCR \\(tesseract\\) read no text"):
        read(ocr_pool, "pdf", pdf_bytes([None]))  # a page whose only image is one grey pixel


def test_an_encrypted_pdf_and_a_corrupt_one_are_refused_with_reasons(pool: WorkerPool) -> None:
    with pytest.raises(ExtractionError, match="encrypted and needs a password"):
        read(pool, "pdf", encrypted_pdf(["A secret page."]))
    with pytest.raises(ExtractionError, match="malformed"):
        read(pool, "pdf", b"%PDF-1.4\n1 0 obj << /Type /Catalog")
    with pytest.raises(ExtractionError, match="damaged or not a .docx"):
        read(pool, "docx", b"PK\x03\x04 not really a zip")


def test_a_word_file_with_a_table_and_a_footnote(pool: WorkerPool) -> None:
    data = docx_bytes("Plant report", [("Summary", ["The plant opened in 1998.", "It employs 300 people."])],
                      [["Year", "Output"], ["2022", "41 MW"]], "Figures for 2022 are provisional.")
    got = read(pool, "docx", data)
    assert got.title == "Plant report" and got.published == "2023-06-01"
    assert "Year | Output\n2022 | 41 MW" in got.text
    assert where(got, "2022 | 41 MW") == (None, "Results > Table 2")
    assert where(got, "It employs 300 people.") == (None, "Summary")
    assert where(got, "Figures for 2022 are provisional.") == (None, "Footnotes")


def test_markdown_with_front_matter_is_read_as_a_reader_sees_it(pool: WorkerPool) -> None:
    source = ("---\ntitle: Notes on tides\ndate: 2021-04-05\ntags: [sea]\n---\n# Tides\n\nThe **moon** pulls the "
              "[water](https://example.org) twice a day.\n\n## Spring tides\n\n| Month | Range |\n|---|---|\n"
              "| March | 4.1 m |\n")
    got = read(pool, "markdown", source)
    assert got.title == "Notes on tides" and got.published == "2021-04-05"
    assert "title:" not in got.text and "The moon pulls the water twice a day." in got.text
    assert where(got, "March | 4.1 m") == (None, "Tides > Spring tides")
    untitled = read(pool, "markdown", "Intro line.\n\n# First heading\n\nBody text.")
    assert untitled.title == "First heading" and untitled.published is None


def test_html_headings_and_plain_text(pool: WorkerPool) -> None:
    body = "Long paragraph about harbours, ships and their crews in winter. " * 4
    html = (f"<html><head><title>Harbour notes</title></head><body><article><h1>Harbours</h1><p>{body}</p>"
            f"<h2>Cranes</h2><p>The cranes lift 40 tonnes each. {body}</p></article></body></html>")
    got = read(pool, "html", html)
    assert got.title
    assert where(got, "The cranes lift 40 tonnes each.") == (None, "Harbours > Cranes")
    text = read(pool, "text", "Plain notes.\nThe ferry leaves at nine.")
    assert text.text == "Plain notes.\nThe ferry leaves at nine." and text.title is None and text.headings == []
