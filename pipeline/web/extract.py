"""HTML/PDF/plain text -> title, text, date. The text returned is exactly the text quotes are checked against.

HTML: trafilatura (precision-oriented, JSON output with metadata) on a tree we parse ourselves, so neither
trafilatura nor htmldate ever sees a string they could mistake for a URL to download. The date is htmldate's
(original publication date), run by trafilatura's metadata step on that same tree, or directly when
trafilatura keeps nothing. When trafilatura keeps nothing, or under 500 characters while trafilatura's baseline
(JSON-LD body, <article>, paragraphs, then the whole body text) finds five times more, the baseline's text is
used: a page with text is never empty, and a paywall notice kept instead of the article is replaced.
Paragraphs are separated by "\\n". A document with no text at all raises ExtractionError.

PDF: pypdf in a child process (`python -m pipeline.web.pdf_worker`) with a wall-clock timeout, an
address-space limit and a page limit, so a hostile PDF cannot hang or exhaust the agent.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import unicodedata
from pathlib import Path

import lxml.html
import trafilatura
from htmldate import find_date
from lxml.etree import ParserError
from pydantic import BaseModel
from trafilatura.utils import load_html

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_LXML = threading.Lock()
_SHORT_TEXT = 500  # characters; below this trafilatura's pick is compared with the baseline's
_MUCH_LONGER = 5


class Extracted(BaseModel):
    """What extraction keeps of a page: its title, its text (quotes are checked against it) and its date."""

    title: str | None = None
    text: str
    published: str | None = None
    truncated: bool = False  # a PDF read only up to its page limit


class ExtractionError(Exception):
    """The document cannot be turned into text; the message is one line saying why."""


def _clean(text: str) -> str:
    text = _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    return text.strip()


def _parse(html: str) -> lxml.html.HtmlElement:
    # Parsing ourselves and handing both libraries the tree is what keeps them from fetching: htmldate
    # downloads any str that starts with "http" and has no space. trafilatura's loader (which never
    # fetches) repairs markup the way its extractor expects (F1 0.963 vs 0.957 with plain lxml).
    if not html.strip():
        raise ExtractionError("the page is empty")
    html = _CONTROL.sub("", html)
    tree = load_html(html)
    if tree is not None:
        return tree
    try:  # a fragment or text without <html>: trafilatura's loader refuses it as "dubious", lxml wraps it
        return lxml.html.document_fromstring(html)
    except (ParserError, ValueError) as e:
        raise ExtractionError(f"the page is not parseable HTML ({e})") from None


def _title_of(tree: lxml.html.HtmlElement) -> str | None:
    title = tree.findtext(".//title")
    title = " ".join(title.split()) if title else ""
    return title or None


def _date_of(tree: lxml.html.HtmlElement, url: str | None) -> str | None:
    try:
        return find_date(tree, url=url, extensive_search=True, original_date=True, outputformat="%Y-%m-%d")
    except Exception:  # htmldate bugs on odd markup must not cost us the page
        return None


def _trafilatura(tree: lxml.html.HtmlElement, url: str | None) -> dict[str, object]:
    try:
        raw = trafilatura.extract(
            tree,
            url=url,
            output_format="json",
            with_metadata=True,
            favor_precision=True,
            include_comments=False,
            include_tables=True,  # tables carry article content on this data (F1 0.963 with, 0.948 without)
            include_images=False,
            include_links=False,
            deduplicate=False,  # trafilatura's dedup cache is process-wide: it would drop text seen on *other* pages
        )
        return json.loads(raw) if raw else {}
    except Exception:  # a trafilatura failure on odd markup falls back to the baseline rather than losing the page
        return {}


def _baseline(tree: lxml.html.HtmlElement) -> str:
    try:
        return _clean(trafilatura.baseline(tree)[1])
    except Exception:
        return ""


def extract_html(html: str, url: str | None = None) -> Extracted:
    """Main text, title and publication date of a decoded HTML page; ExtractionError when it holds no text.

    One page at a time in a process: trafilatura parses with one module-level lxml parser, and two threads
    parsing with it at once corrupted the heap ("double free", the process aborted) when fetches ran in parallel.
    Fetching stays parallel; only this CPU-bound step waits its turn.
    """
    with _LXML:
        return _extract_html(html, url)


def _extract_html(html: str, url: str | None) -> Extracted:
    tree = _parse(html)
    doc = _trafilatura(tree, url)
    text = _clean(str(doc.get("text") or ""))
    if len(text) < _SHORT_TEXT:
        # A short result is sometimes a paywall notice or teaser kept instead of the body; when the
        # baseline finds many times more text, that text is the page (on the benchmark: one page, F1 0 -> 0.92).
        fallback = _baseline(tree)
        if not text or len(fallback) >= _MUCH_LONGER * len(text):
            text = fallback
    if not text:
        raise ExtractionError("the page has no readable text (it may need JavaScript, or be an image or a form)")
    title = str(doc.get("title") or "").strip() or _title_of(tree)
    # trafilatura's metadata step already ran htmldate on this tree; run it ourselves only when that step did not.
    published = str(doc["date"]) if doc.get("date") else (None if doc else _date_of(tree, url))
    return Extracted(title=title, text=text, published=published)


def extract_text_plain(text: str) -> Extracted:
    """A text/plain document as it is (newlines normalised, control characters dropped)."""
    cleaned = _clean(text)
    if not cleaned:
        raise ExtractionError("the document is empty")
    return Extracted(title=None, text=cleaned, published=None)


def extract_pdf(data: bytes, *, timeout: float = 20, max_pages: int = 200, max_memory_mb: int = 512) -> Extracted:
    """Text of a PDF's first `max_pages` pages, parsed in a child process limited in time and memory."""
    if b"%PDF-" not in data[:1024]:
        raise ExtractionError("not a PDF (no %PDF- header)")
    env = dict(os.environ)
    # The child must import this package even when it is run from a checkout rather than installed.
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-m", "pipeline.web.pdf_worker", "--max-pages", str(max_pages),
           "--max-memory-mb", str(max_memory_mb), "--cpu-seconds", str(max(1, int(timeout) + 1))]
    try:
        proc = subprocess.run(cmd, input=data, capture_output=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise ExtractionError(f"PDF extraction took longer than {timeout:g} s and was stopped") from None
    try:
        answer = json.loads(proc.stdout.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        if proc.returncode < 0 or b"MemoryError" in proc.stderr:
            raise ExtractionError(
                f"PDF extraction exceeded its limits ({max_memory_mb} MB memory or CPU time) and was stopped") from None
        last = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        raise ExtractionError(f"PDF extraction failed (worker exit code {proc.returncode}"
                              + (f": {' '.join(last[0].split())[:160]}" if last[0] else "") + ")") from None
    if not answer.get("ok"):
        raise ExtractionError(str(answer.get("error") or "PDF extraction failed"))
    text = _clean(answer.get("text") or "")
    if not text:
        raise ExtractionError("the PDF has no extractable text (it may be scanned images)")
    share = garbled_share(text)
    if share > GARBLED_LIMIT:
        raise ExtractionError(f"the PDF's text is garbled: {share:.0%} of it is glyph names or characters with no "
                              "meaning (its fonts have no Unicode map), so nothing in it can be quoted")
    return Extracted(title=answer.get("title") or None, text=text, published=answer.get("published") or None,
                     truncated=bool(answer.get("truncated")))


# Text from fonts with no Unicode map comes out as glyph names ("/G21", "g0123", "(cid:12)", "/uni0041") or as
# private-use and replacement characters. Real text in any script is mostly letters inside words.
GARBLED_LIMIT = 0.3
_GLYPH_TOKEN = re.compile(r"^(?:/?(?:g|G|glyph|uni|u)[0-9A-Fa-f]{1,6}|\(cid:\d+\)|/[A-Za-z]?\d+)+$")


def garbled_share(text: str) -> float:
    """The share of the text's non-space characters that belong to glyph-name tokens or are private-use,
    replacement or unassigned characters (0 for real text, towards 1 for text from unmapped fonts)."""
    chars = [c for c in text if not c.isspace()]
    if not chars:
        return 0.0
    bad = sum(len(token) for token in text.split() if _GLYPH_TOKEN.match(token))
    bad += sum(1 for c in chars if c == "\ufffd" or unicodedata.category(c) in ("Co", "Cn"))
    return min(1.0, bad / len(chars))
