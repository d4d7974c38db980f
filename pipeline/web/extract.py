"""HTML/PDF/plain text -> title, text, date. The text returned is exactly the text quotes are checked against.

HTML: trafilatura's default reading (JSON output with metadata) on a tree we parse ourselves, so neither
trafilatura nor htmldate ever sees a string they could mistake for a URL to download. Before extraction the tree
loses what the page hides and its reader-comment sections (_prepare). When trafilatura keeps nothing, its baseline
(JSON-LD body, <article>, paragraphs, then the whole body text) reads the page: a page with text is never empty.
The baseline also replaces trafilatura's reading when it finds five times more, most of it in paragraph-long lines
(not a menu dump): a paywall notice or teaser was kept instead of the body.
Each rule was decided on a split of real pages, and the rules fitted to the tuning pages that lost on held-out
pages were dropped: docs/EXTRACTION_RULES.md, benchmarks/perf/extraction_rules_bench.py.
The date is htmldate's (original publication date), run by trafilatura's metadata step on that same tree,
or directly when trafilatura keeps nothing. Paragraphs are separated by "\\n". A document with no text at all
(reader comments aside) raises ExtractionError.

Fetches and the corpus never call these functions in their own process: workers.py runs them (through
documents.read_document) in worker processes under CPU, memory and output budgets.

PDF: pypdf (pdf_worker.extract; in extract_pdf, a child process of its own) that stops itself at the page where
its CPU budget runs out (the text read so far comes back marked truncated, with the reason), under an address-space
limit, a page limit and a generous wall-clock backstop, so a hostile PDF cannot hang or exhaust the agent.
"""
from __future__ import annotations

import itertools
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
from lxml import etree
from lxml.etree import ParserError
from pydantic import BaseModel, Field
from trafilatura.utils import load_html

from pipeline.core.schema import HeadingMark, PageMark
from pipeline.web.flatten import flatten
from pipeline.web.headings import headings_in
from pipeline.web.pdf_worker import PAGE_BREAK

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# Invisible to a reader, legible to a model: Unicode tag characters (a hidden second text) and bidi controls
# (text that displays otherwise than it reads). A quote is what a person can see on the page.
_INVISIBLE = re.compile("[\U000E0000-\U000E007F\u202A-\u202E\u2066-\u2069]")
# Hidden by the page itself, as Readability's isProbablyVisible reads it (plus font-size 0 and opacity 0): text
# the page hides is text a hostile page talks to the agent in.
_HIDDEN_STYLE = re.compile(r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?:\.0*)?"
                           r"(?:px|em|rem|pt|%)?\s*(?:;|$|!)|opacity\s*:\s*0(?:\.0*)?\s*(?:;|$|!))", re.I)
_LXML = threading.Lock()
_MAX_ATTRIBUTES = 200
_READ_ATTRIBUTES = frozenset({"id", "class", "style", "hidden", "aria-hidden", "role", "href", "src", "lang",
                              "content", "name", "property", "itemprop", "datetime", "type", "charset"})
_DEPTH_CAP = 250  # a tree this deep reached libxml2's nesting limit (255), past which it drops the markup
# A cost bound, not a tuned weight: on a tree this large trafilatura's comparison with readability is skipped. Its
# `.//p//text()` is one libxml2 call that cannot be interrupted, about 3 s on 50,000 paragraphs and quadratic, so a
# worker's CPU budget overran by that much. The largest of the 168 shared pages has 4,287 elements.
_FALLBACK_ELEMENTS = 20_000
# Sizes are counted in non-space characters: recall-minded output keeps the markup's indentation inside lines.
_MUCH_LONGER = 5  # the baseline must find this many times more than trafilatura's pick to replace it
_PARAGRAPH = 60  # a line this long (non-space characters) is prose, not a menu entry or a button
_PROSE_SHARE = 0.5  # the share of a replacing reading's text that must sit in such lines
_PAGE_TEXT = "//text()[not(ancestor::style or ancestor::script[not(@type='application/ld+json')])]"
# Reader comments: a container whose class or id names a set of comments ("comments-area", "userComments",
# "disqus_thread", "js_replies", "comment-list", "comment-respond"). A name for one comment ("comment",
# "comment-body", "timeline-comment") does not count: issue trackers and some forums name their posts that way.
_COMMENTS = frozenset({"comments", "commentlist", "commentslist", "commentarea", "replies", "disqus"})
_COMMENT_PARTS = frozenset({"list", "area", "section", "thread", "respond", "form", "wrapper", "box"})
_COMMENT_TAGS = ("div", "section", "aside", "ol", "ul", "li", "dl", "form", "details", "footer")
_NAME_PARTS = re.compile(r"[_-]+|(?<=[a-z])(?=[A-Z])")


class Extracted(BaseModel):
    """What extraction keeps of a page: its title, its text (quotes are checked against it) and its date."""

    title: str | None = None
    text: str
    published: str | None = None
    truncated: bool = False  # a PDF read only up to its page limit or its CPU budget
    truncated_reason: str | None = None  # where and why the text stops early, in one line
    pages: list[PageMark] = Field(default_factory=list)  # a PDF's page starts in `text`
    headings: list[HeadingMark] = Field(default_factory=list)  # a document's headings, when asked for (outline)
    warnings: list[str] = Field(default_factory=list)  # what was left out, one line each ("page 3 could not ...")


class ExtractionError(Exception):
    """The document cannot be turned into text; the message is one line saying why."""


class TooCostly(ExtractionError):
    """Reading the document ran past a worker's CPU or memory budget; the message names the limit ("too_slow: ...")."""


def _clean(text: str) -> str:
    text = _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    return _INVISIBLE.sub("", text).strip()


def _is_hidden(element: lxml.html.HtmlElement) -> bool:
    if element.get("hidden") is not None or _HIDDEN_STYLE.search(element.get("style") or ""):
        return not _only_math(element)
    # aria-hidden also marks an app's root while a dialog is open (server-rendered with it): that is the page.
    return (element.get("aria-hidden") == "true" and "fallback-image" not in (element.get("class") or "")
            and not element.xpath(".//h1 | .//main | .//article"))


def _only_math(element: lxml.html.HtmlElement) -> bool:
    """A hidden element holding nothing but MathML: the text form of a formula shown as an image (Wikipedia)."""
    maths = element.xpath(".//*[local-name()='math']")
    if not maths:
        return False
    inside = sum(len("".join(m.itertext()).split()) for m in maths)
    return inside == len(element.text_content().split())


def _parse(html: str) -> lxml.html.HtmlElement:
    # Parsing ourselves and handing both libraries the tree is what keeps them from fetching: htmldate
    # downloads any str that starts with "http" and has no space. trafilatura's loader (which never
    # fetches) repairs markup the way its extractor expects (F1 0.963 vs 0.957 with plain lxml).
    if not html.strip():
        raise ExtractionError("the page is empty")
    html = _CONTROL.sub("", html)
    tree = load_html(html)
    if tree is not None and _depth(tree) >= _DEPTH_CAP:  # libxml2 dropped what lies deeper: unwrap and parse again
        tree = load_html(flatten(html))
    if tree is not None:
        return _few_attributes(tree)
    try:  # a fragment or text without <html>: trafilatura's loader refuses it as "dubious", lxml wraps it
        return lxml.html.document_fromstring(html)
    except (ParserError, ValueError) as e:
        raise ExtractionError(f"the page is not parseable HTML ({e})") from None


def _few_attributes(tree: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    # trafilatura and htmldate scan every attribute of every element, some of them once per attribute: one element
    # with 100,000 attributes took 86 s. No real element has hundreds; past that, only the ones we read stay.
    for element in tree.iter():
        if len(element.attrib) > _MAX_ATTRIBUTES:
            kept = {k: v for k, v in element.attrib.items() if k in _READ_ATTRIBUTES}
            element.attrib.clear()
            element.attrib.update(kept)
    return tree


def _depth(tree: lxml.html.HtmlElement) -> int:
    depth = most = 0
    for event, _ in etree.iterwalk(tree, events=("start", "end")):
        depth += 1 if event == "start" else -1
        most = max(most, depth)
    return most


def _title_of(tree: lxml.html.HtmlElement) -> str | None:
    title = tree.findtext(".//title")
    title = " ".join(title.split()) if title else ""
    return title or None


def _date_of(tree: lxml.html.HtmlElement, url: str | None) -> str | None:
    try:
        return find_date(tree, url=url, extensive_search=True, original_date=True, outputformat="%Y-%m-%d")
    except MemoryError:  # the worker's memory limit: named by the worker, never read as "no text"
        raise
    except Exception:  # htmldate bugs on odd markup must not cost us the page
        return None


def _trafilatura(tree: lxml.html.HtmlElement, url: str | None) -> dict[str, object]:
    large = any(True for _ in itertools.islice(tree.iter(), _FALLBACK_ELEMENTS, None))
    try:
        raw = trafilatura.extract(
            tree,
            url=url,
            fast=large,
            output_format="json",
            with_metadata=True,
            include_comments=False,
            include_tables=True,  # article content: news F1 0.9617 with, 0.9572 without (docs/EXTRACTION_RULES.md)
            include_images=False,
            include_links=False,
            deduplicate=False,  # trafilatura's dedup cache is process-wide: it would drop text seen on *other* pages
        )
        return json.loads(raw) if raw else {}
    except MemoryError:  # the worker's memory limit: named by the worker, never read as "no text"
        raise
    except Exception:  # a trafilatura failure on odd markup falls back to the baseline rather than losing the page
        return {}


def _baseline(tree: lxml.html.HtmlElement) -> str:
    try:
        return _clean(trafilatura.baseline(tree)[1])
    except MemoryError:  # the worker's memory limit: named by the worker, never read as "no text"
        raise
    except Exception:
        return ""


def _is_comment_section(element: lxml.html.HtmlElement) -> bool:
    for name in f"{element.get('id') or ''} {element.get('class') or ''}".split():
        parts = [part.lower() for part in _NAME_PARTS.split(name) if part]
        if not _COMMENTS.isdisjoint(parts) or (len(parts) > 1 and parts[0] == "comment" and parts[1] in _COMMENT_PARTS):
            # A section holding the page's heading or <main> is a page wrapper flagged "has-comments", not comments.
            return element.find(".//h1") is None and element.find(".//main") is None
    return False


def _prepare(tree: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    """Drop hidden elements and reader-comment sections, in place, before any extraction."""
    # trafilatura (include_comments=False) prunes the comment sections its own patterns name, but its baseline
    # reads the whole body, comments and all, and its patterns miss names like "fb-comments" or "js_replies".
    # Removed here, a commenter's words are in no reading, so no quote from one is cited as the page's.
    for element in [e for e in tree.iter() if isinstance(e.tag, str) and _is_hidden(e)]:
        if element.getparent() is not None and element.tag not in ("html", "body"):
            element.drop_tree()
    for element in [e for e in tree.iter(*_COMMENT_TAGS) if _is_comment_section(e)]:
        if element.getparent() is not None:  # not inside a section already dropped
            element.drop_tree()  # keeps the text that follows it
    return tree


def _size(text: str) -> int:
    return len("".join(text.split()))


def _prose_share(text: str) -> float:
    sizes = [_size(line) for line in text.split("\n")]
    return sum(n for n in sizes if n >= _PARAGRAPH) / max(1, sum(sizes))


def extract_html(html: str, url: str | None = None, *, outline: bool = False) -> Extracted:
    """Main text, title and publication date of a decoded HTML page; ExtractionError when it holds no text.

    One page at a time in a process: trafilatura parses with one module-level lxml parser, and two threads
    parsing with it at once corrupted the heap ("double free", the process aborted). Fetches read pages in
    parallel across worker processes (workers.py), each single-threaded, where this lock is never contended; it
    guards callers that extract in their own process (benchmarks, tests). With `outline`, the h1-h6 headings
    that the text holds are marked.
    """
    with _LXML:
        return _extract_html(html, url, outline)


def _extract_html(html: str, url: str | None, outline: bool) -> Extracted:
    tree = _prepare(_parse(html))
    found = [(int(h.tag[1]), " ".join(h.text_content().split()))
             for h in tree.iter("h1", "h2", "h3", "h4", "h5", "h6")] if outline else []
    doc = _trafilatura(tree, url)
    text = _clean(str(doc.get("text") or ""))
    # No reading holds more than the page's text (JSON-LD included): when that is not a few times the text
    # kept so far, the baseline cannot find that much more and is skipped (it costs as much again).
    if not text or _MUCH_LONGER * _size(text) <= _size("".join(tree.xpath(_PAGE_TEXT))):
        fallback = _baseline(tree)
        # The baseline has no boilerplate filter: it must find far more, in paragraphs rather than a menu dump
        # (a paywall notice kept instead of the body), unless trafilatura found nothing at all.
        if not text or (_size(fallback) >= _MUCH_LONGER * _size(text) and _prose_share(fallback) >= _PROSE_SHARE):
            text = fallback or text
    if not text:
        raise ExtractionError("the page has no readable text (it may need JavaScript, or be an image or a form)")
    title = str(doc.get("title") or "").strip() or _title_of(tree)
    # trafilatura's metadata step already ran htmldate on this tree; run it ourselves only when that step did not.
    published = str(doc["date"]) if doc.get("date") else (None if doc else _date_of(tree, url))
    headings = headings_in(text, found) if outline else []
    return Extracted(title=title or next((t for _, t in found if t), None), text=text, published=published,
                     headings=headings)


def extract_text_plain(text: str) -> Extracted:
    """A text/plain document as it is (newlines normalised, control characters dropped)."""
    cleaned = _clean(text)
    if not cleaned:
        raise ExtractionError("the document is empty")
    return Extracted(title=None, text=cleaned, published=None)


def extract_pdf(data: bytes, *, cpu_seconds: float = 20, page_cpu_seconds: float = 5, timeout: float | None = None,
                max_pages: int = 200, max_memory_mb: int = 512) -> Extracted:
    """Text of a PDF's first `max_pages` pages read within a CPU budget, by a child process limited in memory."""
    if b"%PDF-" not in data[:1024]:
        raise ExtractionError("not a PDF (no %PDF- header)")
    # The child stops at the page where its CPU time (`cpu_seconds` in all, `page_cpu_seconds` for one page) runs
    # out and returns the pages before it, marked truncated. CPU time does not stretch when the machine is busy,
    # so load does not cut a document shorter; the wall clock (generous) only stops a stuck or starved child.
    timeout = 3 * cpu_seconds + 10 if timeout is None else timeout
    env = child_env()
    cmd = [sys.executable, "-m", "pipeline.web.pdf_worker", "--max-pages", str(max_pages),
           "--max-memory-mb", str(max_memory_mb), "--cpu-seconds", repr(float(cpu_seconds)),
           "--page-cpu-seconds", repr(float(page_cpu_seconds))]
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
    return pdf_extracted(answer)


def child_env() -> dict[str, str]:
    """The environment for a child process of this package: ours, with this checkout first on PYTHONPATH (the
    child must import the package even when it is run from a checkout rather than installed)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def pdf_extracted(answer: dict[str, object]) -> Extracted:
    """The Extracted of a PDF from pdf_worker.extract's answer: cleaned, and refused when empty or garbled."""
    if not answer.get("ok"):
        raise ExtractionError(str(answer.get("error") or "PDF extraction failed"))
    ocr_pages = {int(n) for n in answer.get("ocr_pages") or []}  # type: ignore[attr-defined]
    text, pages = _cleaned_pages(str(answer.get("text") or ""), answer.get("page_starts"), ocr_pages)
    warnings = [str(w) for w in answer.get("warnings") or []]  # type: ignore[attr-defined]
    if not text:
        if answer.get("truncated"):  # nothing read before the budget ran out: say so, not "no text"
            raise ExtractionError(f"the PDF yielded no text before extraction was cut short ({answer.get('reason')})")
        if answer.get("image_pages") and answer.get("ocr"):
            raise ExtractionError("the PDF has no text layer (its pages are scanned images), and OCR (tesseract) "
                                  "read no text in them")
        if answer.get("image_pages"):
            raise ExtractionError("the PDF has no text layer (its pages are scanned images); reading them needs OCR "
                                  "(tesseract-ocr), which this installation does not run")
        raise ExtractionError("the PDF has no extractable text (it may be scanned images)")
    share = garbled_share(text)
    if share > GARBLED_LIMIT:
        raise ExtractionError(f"the PDF's text is garbled: {share:.0%} of it is glyph names or characters with no "
                              "meaning (its fonts have no Unicode map), so nothing in it can be quoted")
    return Extracted(title=str(answer.get("title") or "") or None, text=text,
                     published=str(answer.get("published") or "") or None, truncated=bool(answer.get("truncated")),
                     truncated_reason=str(answer.get("reason") or "") or None, pages=pages, warnings=warnings)


def _cleaned_pages(raw: str, starts: object, ocr_pages: set[int] | None = None) -> tuple[str, list[PageMark]]:
    """The PDF's text cleaned page by page (so each page's start stays exact), and where each page with text begins
    (marked when OCR read it).

    `starts` is pdf_worker's [[page, offset], ...] into `raw`, whose pages are joined by PAGE_BREAK.
    """
    if not isinstance(starts, list) or not starts:
        return _clean(raw), []
    texts, pages, at = [], [], 0
    ends = [int(offset) for _, offset in starts[1:]] + [len(raw) + len(PAGE_BREAK)]
    for (page, offset), end in zip(starts, ends, strict=True):
        piece = _clean(raw[int(offset):end - len(PAGE_BREAK)])
        if piece:
            pages.append(PageMark(page=int(page), start=at, ocr=int(page) in (ocr_pages or set())))
            texts.append(piece)
            at += len(piece) + len(PAGE_BREAK)
    return PAGE_BREAK.join(texts), pages


# Text from fonts with no Unicode map comes out as glyph names ("/G21", "g0123", "(cid:12)", "/uni0041") or as
# private-use and replacement characters. Real text in any script is mostly letters inside words.
GARBLED_LIMIT = 0.3
# Linear: each piece is taken whole (possessive), and the digits-only reading is tried first, so no token can be
# read two ways; the former `(?:/?g[0-9A-F]{1,6}|/[A-Za-z]?\d+)+$` read "/g152" both ways and backtracked
# exponentially on a long token that failed at its end.
_GLYPH_TOKEN = re.compile(r"(?:/[A-Za-z]?\d++(?![0-9A-Fa-f])|/?(?:glyph|uni|g|G|u)[0-9A-Fa-f]{1,6}+|\(cid:\d++\))++")


def garbled_share(text: str) -> float:
    """The share of the text's non-space characters that belong to glyph-name tokens or are private-use,
    replacement or unassigned characters (0 for real text, towards 1 for text from unmapped fonts)."""
    chars = [c for c in text if not c.isspace()]
    if not chars:
        return 0.0
    bad = sum(len(token) for token in text.split() if _GLYPH_TOKEN.fullmatch(token))
    bad += sum(1 for c in chars if c == "\ufffd" or unicodedata.category(c) in ("Co", "Cn"))
    return min(1.0, bad / len(chars))
