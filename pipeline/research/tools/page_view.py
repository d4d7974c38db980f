"""What a model may see of a stored page: the paragraphs most relevant to a focus, or the paragraph around a needle."""
from __future__ import annotations

import math
import re
from collections import Counter

from pipeline.core.quotes import QuoteIndex

EXCERPT_CHARS = 6_000
_TOKEN = re.compile(r"\w+", re.UNICODE)
_SPLIT = re.compile(r"\n\s*\n|\n")


def paragraphs(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the non-blank paragraphs of `text`."""
    spans, pos = [], 0
    for m in _SPLIT.finditer(text):
        if text[pos:m.start()].strip():
            spans.append((pos, m.start()))
        pos = m.end()
    if text[pos:].strip():
        spans.append((pos, len(text)))
    return spans


def _tokens(s: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(s) if len(t) > 1]


def focus_excerpt(text: str, focus: str, limit: int = EXCERPT_CHARS) -> tuple[str, bool]:
    """The most focus-relevant paragraphs, in page order, within `limit` chars; and whether anything was left out."""
    if len(text) <= limit:
        return text, False
    spans = paragraphs(text)
    query = set(_tokens(focus))
    docs = [Counter(_tokens(text[a:b])) for a, b in spans]
    df = Counter(t for d in docs for t in set(d) if t in query)
    n = len(docs)

    def score(i: int) -> float:
        d = docs[i]
        length = sum(d.values()) or 1
        s = sum(math.log(1 + n / (1 + df[t])) * d[t] / (d[t] + 1.2 * (0.25 + 0.75 * length / 60)) for t in query)
        return s - i * 1e-6  # ties: earlier paragraphs first

    chosen: list[int] = []
    used = 0
    for i in sorted(range(n), key=score, reverse=True):
        size = spans[i][1] - spans[i][0] + 2
        if used + size <= limit:
            chosen.append(i)
            used += size
    if not chosen:  # one huge paragraph: show its start
        a = spans[max(range(n), key=score)][0]
        return text[a:a + limit], True
    parts, previous = [], -1
    for i in sorted(chosen):
        a, b = spans[i]
        parts.append(("[…]\n" if i > previous + 1 else "") + text[a:b])  # mark only where paragraphs were left out
        previous = i
    return "\n\n".join(parts), True


def find_in_page(text: str, needle: str, index: QuoteIndex | None = None, context: int = 1) -> str | None:
    """The paragraph containing `needle` (matched as quotes are) with `context` paragraphs each side, or None."""
    if not needle.strip():
        return None
    span = (index or QuoteIndex(text)).find(needle)
    if span is None:
        lowered = text.lower().find(" ".join(needle.lower().split()))
        if lowered < 0:
            return None
        span_start, span_end = lowered, lowered + len(needle)
    else:
        span_start, span_end = span.start, span.end
    spans = paragraphs(text)
    hit = next((i for i, (a, b) in enumerate(spans) if a <= span_start < b or (a <= span_end <= b)), 0)
    lo, hi = max(0, hit - context), min(len(spans), hit + context + 1)
    return text[spans[lo][0]:spans[hi - 1][1]][: EXCERPT_CHARS]
