"""Extraction of real pages (tests/fixtures/pages), fallbacks, no network, and PDFs in a limited child process."""
from __future__ import annotations

import gzip
import io
import json
import re
import socket
import time
from pathlib import Path
from typing import Any

import htmldate
import pytest
import trafilatura
from pypdf import PdfReader, PdfWriter
from trafilatura.utils import load_html

from pipeline.web.charset import decode_text
from pipeline.web.extract import ExtractionError, extract_html, extract_pdf, extract_text_plain, garbled_share

PAGES = Path(__file__).parent / "fixtures" / "pages"
TRUTH: dict[str, dict[str, str]] = json.loads((PAGES / "ground-truth.json").read_text(encoding="utf-8"))
WORD = re.compile(r"\w+")


def page_html(page_id: str) -> str:
    return decode_text(gzip.decompress((PAGES / "html" / f"{page_id}.html.gz").read_bytes()), None, html=True)


def page_id(prefix: str) -> str:
    return next(k for k in TRUTH if k.startswith(prefix))


def shingle_f1(truth: str, predicted: str) -> float:
    def shingles(text: str) -> set[tuple[str, ...]]:
        words = WORD.findall(text.lower())
        return {tuple(words[i:i + 4]) for i in range(len(words) - 3)}
    true, pred = shingles(truth), shingles(predicted)
    if not true or not pred:
        return 0.0
    p, r = len(true & pred) / len(pred), len(true & pred) / len(true)
    return 2 * p * r / (p + r) if p + r else 0.0


# --- HTML ---------------------------------------------------------------------------------------------------

# trafilatura's default reading keeps related-story teasers on these two pages (F1 0.76 and 0.85); precision mode
# scored higher on them and lost on held-out pages of other kinds (docs/EXTRACTION_RULES.md).
TEASERS = ("d90bda7ed1", "f8ff621a0b")


@pytest.mark.parametrize("pid", [pytest.param(pid, marks=pytest.mark.xfail(strict=True, reason="teasers kept"))
                                 if pid.startswith(TEASERS) else pid for pid in sorted(TRUTH)])
def test_real_page_keeps_the_article_its_title_and_a_date(pid: str) -> None:
    truth = TRUTH[pid]
    got = extract_html(page_html(pid), url=truth["url"])
    paragraphs = [p for p in truth["articleBody"].split("\n") if len(p) > 60]
    assert paragraphs[-1][:80] in got.text  # a sentence from the end of the annotated body, verbatim
    assert shingle_f1(truth["articleBody"], got.text) >= 0.9
    assert got.title
    assert got.published and re.fullmatch(r"\d{4}-\d{2}-\d{2}", got.published)


@pytest.mark.parametrize("prefix,published", [("06e5123e4e", "2019-11-18"), ("1ace8c85aa", "2019-11-18"),
                                              ("d90bda7ed1", "2019-11-20"), ("85439e26c4", "2016-12-01")])
def test_publication_dates_of_known_pages(prefix: str, published: str) -> None:
    pid = page_id(prefix)
    assert extract_html(page_html(pid), url=TRUTH[pid]["url"]).published == published


def test_paragraphs_are_separated_by_one_newline() -> None:
    pid = page_id("14cc2a0ca5")
    first, second = [p for p in TRUTH[pid]["articleBody"].split("\n") if p.strip()][:2]
    assert f"{first}\n{second}" in extract_html(page_html(pid)).text


def test_script_payloads_stay_out_of_the_text() -> None:
    pid = page_id("1ace8c85aa")
    html = page_html(pid)
    assert "tc_app_data" in html and "clickTrackerInit" in html
    text = extract_html(html).text
    assert "tc_app_data" not in text and "clickTrackerInit" not in text and "function(" not in text

    article = " ".join(f"<p>Paragraph {i} of the report says the river rose by {i} metres overnight.</p>"
                       for i in range(12))
    page = (f"<html><head><title>Floods</title><style>.x{{color:red}}</style></head><body><article>{article}"
            "<script>var note = 'SCRIPT SENTENCE THAT MUST NOT APPEAR';</script>"
            "<script type='application/json'>{\"hidden\": \"JSON PAYLOAD THAT MUST NOT APPEAR\"}</script>"
            "<noscript>Enable JavaScript to continue</noscript></article></body></html>")
    got = extract_html(page)
    assert "Paragraph 11 of the report says the river rose by 11 metres overnight." in got.text
    assert "MUST NOT APPEAR" not in got.text and "color:red" not in got.text


def test_a_tiny_page_trafilatura_drops_falls_back_to_its_whole_text() -> None:
    page = ("<html><head><title>Moved</title></head><body><ul><li><a href='/a'>New address: 12 Harbour Road</a></li>"
            "<li><a href='/b'>Open Monday to Friday</a></li></ul></body></html>")
    assert trafilatura.extract(load_html(page), favor_precision=True) is None  # the case the fallback exists for
    got = extract_html(page)
    assert got.text == "New address: 12 Harbour Road\nOpen Monday to Friday"
    assert got.title == "Moved"


def test_a_short_notice_is_replaced_by_the_much_longer_body() -> None:
    pid = page_id("f8ff621a")  # Barron's: trafilatura keeps only the reprint notice
    html = page_html(pid)
    alone = trafilatura.extract(load_html(html), favor_precision=True, include_comments=False) or ""
    assert "Home Depot (ticker: HD)" not in alone
    got = extract_html(html, url=TRUTH[pid]["url"])
    assert "Home Depot (ticker: HD) reported $2.53 in" in got.text
    assert shingle_f1(TRUTH[pid]["articleBody"], got.text) >= 0.85


def test_fragments_and_plain_strings_are_text_not_urls_to_fetch(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[object] = []
    real_getaddrinfo, real_connect = socket.getaddrinfo, socket.socket.connect

    def spy_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append(host)
        return real_getaddrinfo(host, *args, **kwargs)

    def spy_connect(self: socket.socket, address: Any) -> Any:
        attempts.append(address)
        return real_connect(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", spy_getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", spy_connect)

    got = extract_html("https://news.example.com/2019/11/18/story")
    assert got.text == "https://news.example.com/2019/11/18/story"
    extract_html("<p>Just a fragment, dated 18 November 2019.</p>")
    extract_html(page_html(page_id("686bb170ef")), url="https://www.space.com/x.html")
    assert attempts == []
    # The danger is real: htmldate given that string itself tries to download it (and the spy sees it).
    try:
        htmldate.find_date("https://news.example.com/2019/11/18/story")
    except Exception:
        pass
    assert attempts


@pytest.mark.parametrize("page", ["", "   \n ", "<html><body><script>var a = 1;</script></body></html>"])
def test_pages_without_text_raise_a_clear_error(page: str) -> None:
    with pytest.raises(ExtractionError, match="empty|no readable text"):
        extract_html(page)


def test_plain_text_is_kept_with_normalised_newlines() -> None:
    got = extract_text_plain("  Line one\r\nLine two\x00\rLine three\n\n")
    assert got.text == "Line one\nLine two\nLine three"
    assert got.title is None and got.published is None
    with pytest.raises(ExtractionError):
        extract_text_plain(" \n\t ")


# --- PDF ----------------------------------------------------------------------------------------------------

def make_pdf(pages: list[list[str]], info: str = "") -> bytes:
    """A minimal valid PDF: one Helvetica text stream per page, correct xref offsets."""
    n = len(pages)
    objs = ["<< /Type /Catalog /Pages 2 0 R >>",
            f"<< /Type /Pages /Kids [{' '.join(f'{4 + 2 * i} 0 R' for i in range(n))}] /Count {n} >>",
            "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for lines in pages:
        stream = "BT /F1 12 Tf 72 720 Td 14 TL " + " ".join(f"({line}) '" for line in lines) + " ET"
        objs.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                    f"/Contents {len(objs) + 2} 0 R >>")
        objs.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    objs.append(f"<< {info} >>")
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, obj in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{obj}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    trailer = f"<< /Size {len(objs) + 1} /Root 1 0 R /Info {len(objs)} 0 R >>"
    out += f"trailer\n{trailer}\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


REPORT = make_pdf([["Annual report 2023.", "Revenue rose by 12 percent."], ["Page two says costs fell."],
                   ["Page three is an appendix."]],
                  info="/Title (Annual Report) /CreationDate (D:20230115120000Z)")


def test_pdf_text_title_and_date() -> None:
    assert PdfReader(io.BytesIO(REPORT)).pages[0].extract_text()  # the builder makes a PDF pypdf can read
    got = extract_pdf(REPORT)
    assert "Revenue rose by 12 percent." in got.text and "Page three is an appendix." in got.text
    assert got.title == "Annual Report" and got.published == "2023-01-15"


def test_pdf_page_limit() -> None:
    got = extract_pdf(REPORT, max_pages=2)
    assert "Page two says costs fell." in got.text and "appendix" not in got.text


@pytest.mark.parametrize("data,reason", [(b"%PDF-1.7\n1 0 obj << /Type /Catalog", "malformed"),
                                         (b"<html>not a pdf</html>", "not a PDF")])
def test_malformed_pdf_is_an_extraction_error(data: bytes, reason: str) -> None:
    with pytest.raises(ExtractionError, match=reason):
        extract_pdf(data)


def test_encrypted_pdf_needs_a_password() -> None:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(REPORT)))
    writer.encrypt(user_password="secret", owner_password="owner", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    with pytest.raises(ExtractionError, match="encrypted and needs a password"):
        extract_pdf(buffer.getvalue())


def test_pdf_worker_over_its_time_limit_is_stopped() -> None:
    started = time.monotonic()
    with pytest.raises(ExtractionError, match="longer than 0.05 s"):
        extract_pdf(REPORT, timeout=0.05)
    assert time.monotonic() - started < 3


def test_pdf_worker_over_its_memory_limit_fails_cleanly() -> None:
    with pytest.raises(ExtractionError, match="memory"):
        extract_pdf(REPORT, max_memory_mb=40)


def test_pages_are_extracted_one_at_a_time_across_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    # trafilatura parses with one module-level lxml parser; used by two threads at once it corrupted the heap.
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from pipeline.web import extract

    inside, most = 0, 0
    lock = threading.Lock()
    real = extract._extract_html

    def counting(html: str, url: str | None, outline: bool) -> extract.Extracted:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        time.sleep(0.01)
        try:
            return real(html, url, outline)
        finally:
            with lock:
                inside -= 1

    monkeypatch.setattr(extract, "_extract_html", counting)
    page = "<html><body><article><p>" + "A sentence of the article body. " * 40 + "</p></article></body></html>"
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda _: extract.extract_html(page), range(16)))
    assert most == 1 and all(r.text for r in results)


def test_a_pdf_cut_at_the_page_limit_says_so() -> None:
    assert extract_pdf(REPORT, max_pages=2).truncated and not extract_pdf(REPORT).truncated


def test_glyph_name_text_is_garbled_and_refused_with_the_reason() -> None:
    assert garbled_share("Revenue rose by 12 percent in 2023, the report says.") == 0.0
    assert garbled_share("Выручка выросла на 12 процентов. 收入增长了百分之十二。") == 0.0
    assert garbled_share("/G21/G22 g0041 g0042 (cid:12) (cid:13) /uni0041 \ue001\ue002") > 0.9
    glyphs = make_pdf([["/G21 /G22 /G23 g0041 g0042 g0043", "(cid:12) (cid:13) (cid:14) /uni0041 /uni0042"]])
    with pytest.raises(ExtractionError, match="garbled: .* glyph names"):
        extract_pdf(glyphs)
    mostly_words = make_pdf([["Revenue rose by 12 percent over the year, and costs fell by 3 percent.", "g0041"]])
    assert "Revenue rose" in extract_pdf(mostly_words).text  # one stray glyph token does not condemn a page


@pytest.mark.parametrize("error,named", [("DependencyError", "needs a feature this reader lacks"),
                                         ("DeprecationError", "no longer supports"),
                                         ("ZeroDivisionError", "could not be read (ZeroDivisionError")])
def test_pypdf_failures_are_named_not_a_bare_exit_code(monkeypatch: pytest.MonkeyPatch, error: str,
                                                        named: str) -> None:
    import pypdf
    import pypdf.errors

    from pipeline.web import pdf_worker

    kind = getattr(pypdf.errors, error, None) or ZeroDivisionError

    def failing_reader(*args: object, **kwargs: object) -> object:
        raise kind("JPXDecode needs pillow")

    monkeypatch.setattr(pypdf, "PdfReader", failing_reader)  # a library failure, planted where pypdf raises it
    answer = pdf_worker.extract(REPORT, 10)
    assert answer["ok"] is False and named in str(answer["error"])


def test_a_long_glyph_name_token_is_judged_in_linear_time() -> None:
    # The former pattern read "/g152" two ways and backtracked exponentially when a long token failed at its end.
    import subprocess
    import sys
    script = ("from pipeline.web.extract import garbled_share; "
              "print(garbled_share('/g152' * 2000 + 'x'), garbled_share('/g152/g131 ' * 1000))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.stdout.split() == ["0.0", "1.0"]
