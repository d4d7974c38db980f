"""A document as it arrived (bytes, kind, declared charset) -> Extracted, in this process: what a worker runs.

The agent never calls read_document itself: pipeline/web/workers.py sends each Document to a worker process
(pipeline/web/extract_worker.py) that runs it under a CPU, memory and output budget.
"""
from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel

from pipeline.web import pdf_worker
from pipeline.web.charset import decode_text
from pipeline.web.extract import Extracted, ExtractionError, extract_html, extract_text_plain, pdf_extracted
from pipeline.web.markdown_reader import read_markdown

Kind = Literal["html", "text", "pdf", "markdown", "docx"]  # markdown and docx come only from a documents folder
MAX_TEXT_CHARS = 2_000_000  # the output cap: a longer text is cut at a paragraph break before it, marked truncated
PDF_MAX_PAGES = 200


class Document(BaseModel):
    """Bytes to read, with what the server said of them; `truncated`: the body was cut at the byte cap."""

    kind: Kind
    body: bytes
    url: str
    charset: str | None = None
    truncated: bool = False
    outline: bool = False  # also mark where headings begin (a file of the user's documents folder)


def read_document(doc: Document, *, pdf_cpu_seconds: float = math.inf, pdf_page_cpu_seconds: float = math.inf,
                  max_text_chars: int = MAX_TEXT_CHARS, pdf_max_pages: int = PDF_MAX_PAGES) -> Extracted:
    """Title, text and date of `doc`; ExtractionError (one line, for the model) when it has no text to quote."""
    if doc.kind == "pdf":
        if b"%PDF-" not in doc.body[:1024]:
            raise ExtractionError("not a PDF (no %PDF- header)")
        got = pdf_extracted(pdf_worker.extract(doc.body, pdf_max_pages, pdf_cpu_seconds, pdf_page_cpu_seconds))
    elif doc.kind == "docx":
        from pipeline.web.docx_reader import read_docx  # imported by the workers that read a Word file only

        got = read_docx(doc.body)
    else:
        text = decode_text(doc.body, doc.charset, html=doc.kind == "html", truncated=doc.truncated)
        if doc.kind == "html":
            got = extract_html(text, url=doc.url, outline=doc.outline)
        elif doc.kind == "markdown":
            got = read_markdown(text)
        else:
            got = extract_text_plain(text)
    return capped(got, max_text_chars)


def capped(got: Extracted, max_chars: int) -> Extracted:
    """`got` with its text cut at the last paragraph break within `max_chars` (at `max_chars` if there is none)."""
    if len(got.text) <= max_chars:
        return got
    cut = got.text.rfind("\n", 0, max_chars + 1)
    text = got.text[:cut if cut > max_chars // 2 else max_chars].rstrip()
    return got.model_copy(update={
        "text": text, "truncated": True, "pages": [p for p in got.pages if p.start < len(text)],
        "headings": [h for h in got.headings if h.start < len(text)],
        "truncated_reason": f"the text was cut at {len(text):,} of {len(got.text):,} characters (the output cap)"})
