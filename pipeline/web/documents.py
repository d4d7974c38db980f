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

Kind = Literal["html", "text", "pdf"]
MAX_TEXT_CHARS = 2_000_000  # the output cap: a longer text is cut at a paragraph break before it, marked truncated
PDF_MAX_PAGES = 200


class Document(BaseModel):
    """Bytes to read, with what the server said of them; `truncated`: the body was cut at the byte cap."""

    kind: Kind
    body: bytes
    url: str
    charset: str | None = None
    truncated: bool = False


def read_document(doc: Document, *, pdf_cpu_seconds: float = math.inf, pdf_page_cpu_seconds: float = math.inf,
                  max_text_chars: int = MAX_TEXT_CHARS) -> Extracted:
    """Title, text and date of `doc`; ExtractionError (one line, for the model) when it has no text to quote."""
    if doc.kind == "pdf":
        if b"%PDF-" not in doc.body[:1024]:
            raise ExtractionError("not a PDF (no %PDF- header)")
        got = pdf_extracted(pdf_worker.extract(doc.body, PDF_MAX_PAGES, pdf_cpu_seconds, pdf_page_cpu_seconds))
    else:
        text = decode_text(doc.body, doc.charset, html=doc.kind == "html", truncated=doc.truncated)
        got = extract_html(text, url=doc.url) if doc.kind == "html" else extract_text_plain(text)
    return capped(got, max_text_chars)


def capped(got: Extracted, max_chars: int) -> Extracted:
    """`got` with its text cut at the last paragraph break within `max_chars` (at `max_chars` if there is none)."""
    if len(got.text) <= max_chars:
        return got
    cut = got.text.rfind("\n", 0, max_chars + 1)
    text = got.text[:cut if cut > max_chars // 2 else max_chars].rstrip()
    return got.model_copy(update={
        "text": text, "truncated": True,
        "truncated_reason": f"the text was cut at {len(text):,} of {len(got.text):,} characters (the output cap)"})
