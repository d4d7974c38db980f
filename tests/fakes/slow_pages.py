"""The slow-page corpus: documents whose size or shape costs a reader seconds to minutes of CPU, each with one true
sentence where the shape leaves room for one.

    for page in slow_pages():
        page.name, page.kind, page.body  # "100k paragraphs", "html", b"<html>..."

Every body fits the fetcher's default byte cap (5 MB). The shapes are those that stalled or defeated extraction:
deep nesting (libxml2 drops markup past 255 levels), many paragraphs, a wide table, one huge word, an attribute
flood on one element, an entity flood, glyph-name tokens (a backtracking regex), and PDFs of such tokens or of
10,000 tiny pages. Used by tests/test_workers.py and benchmarks/perf/workers_bench.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tests.test_extract import make_pdf

SENTENCE = "The committee approved the new harbour bridge budget on Tuesday after a long debate."


@dataclass(frozen=True)
class SlowPage:
    """One document: its name, kind, bytes, and whether its text must hold SENTENCE when it is read at all."""

    name: str
    kind: Literal["html", "text", "pdf"]
    body: bytes
    has_sentence: bool = True


def _html(body: str) -> bytes:
    return f"<html><head><title>Slow page</title></head><body>{body}</body></html>".encode()


def _nested(depth: int) -> bytes:
    return _html("<div>" * depth + f"<p>{SENTENCE}</p>" + "</div>" * depth)


def slow_pages() -> list[SlowPage]:
    """The corpus, largest cost first."""
    attributes = " ".join(f'data-a{i}="v{i}"' for i in range(100_000))
    glyphs = "/g152/g131/g142" * 700  # 10.5 kB of glyph names, no space
    return [
        SlowPage("100k attributes on one element", "html", _html(f"<div {attributes}><p>{SENTENCE}</p></div>")),
        SlowPage("100k paragraphs", "html",
                 _html(f"<p>{SENTENCE}</p>" + "".join(f"<p>Paragraph {i} of a very long page.</p>"
                                                      for i in range(100_000)))),
        SlowPage("2,000 x 50 table", "html", _html(f"<p>{SENTENCE}</p><table>" + "".join(
            "<tr>" + "".join(f"<td>r{r}c{c}</td>" for c in range(50)) + "</tr>" for r in range(2_000)) + "</table>")),
        SlowPage("200k nested divs", "html", _nested(200_000)),
        SlowPage("20k nested divs", "html", _nested(20_000)),
        SlowPage("4 MB single word", "html", _html(f"<p>{SENTENCE}</p><p>{'x' * 4_000_000}</p>")),
        SlowPage("1M entities", "html", _html(f"<p>{SENTENCE}</p><p>{'&lt;' * 1_000_000}</p>")),
        SlowPage("10 kB glyph-name token", "html", _html(f"<p>{SENTENCE}</p><p>{glyphs}x</p>")),
        # Lines of glyph names, every other one ending in a character that fails the glyph pattern: refused as garbled.
        SlowPage("PDF of glyph-name tokens", "pdf", make_pdf([[glyphs[:200], glyphs[:200] + "x"] * 10] * 5),
                 has_sentence=False),
        SlowPage("PDF of 10,000 tiny pages", "pdf", make_pdf([[SENTENCE]] + [["p"]] * 9_999)),
    ]
