"""Where a quote sits in a document: its page from the page starts of the extracted text, its heading path."""
from __future__ import annotations

from bisect import bisect_right

from pipeline.core.schema import Location, TextLayout


def locate(layout: TextLayout | None, start: int, end: int) -> Location | None:
    """The page holding text[start] (and the quote's offsets within that page) and the heading above it; None
    when the layout has neither pages nor headings."""
    if layout is None or not (layout.pages or layout.headings):
        return None
    page = page_start = page_end = None
    ocr = False
    at = bisect_right([p.start for p in layout.pages], start) - 1
    if at >= 0:
        mark = layout.pages[at]
        page, page_start, page_end, ocr = mark.page, start - mark.start, end - mark.start, mark.ocr
    under = bisect_right([h.start for h in layout.headings], start) - 1
    heading = layout.headings[under].path if under >= 0 else None
    if page is None and heading is None:
        return None
    return Location(page=page, page_start=page_start, page_end=page_end, heading=heading, ocr=ocr)


def cite(location: Location | None) -> str:
    """How a report names the place of a quote: "p. 14" ("p. 3 (OCR text)" when OCR read it), "Results > Table 2",
    both, or ""."""
    if location is None:
        return ""
    parts = ([f"p. {location.page}" + (" (OCR text)" if location.ocr else "")] if location.page is not None
             else []) + ([location.heading] if location.heading else [])
    return ", ".join(parts)
