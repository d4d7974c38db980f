"""Verbatim quote matching: normalise a page once, then locate quotes in it with exact original offsets.

Page and quote are normalised alike: HTML entities decoded; NFKC and case folding (a letter with
combining marks is folded as one unit); curly quotes and primes become ' and "; dashes and minus
become '-', with spaces around a dash dropped and dash runs ("--") merged; any whitespace run
becomes one space; invisible format characters (soft hyphen, ZWSP, ZWNJ, ZWJ, BOM, word joiner,
bidi marks) are dropped; a word hyphenated across one line break is joined ("infor-\\nmation").
A quote (outer quotation marks, ellipses and spaces stripped; at least MIN_QUOTE_CHARS normalised
characters) then matches only as an exact substring of the normalised page; nothing fuzzy. A hyphen
in a quote may also match a hyphen the page broke across a line ("well-\nknown" for "well-known").

Decisions: a match must start and end on word boundaries, because a truncated word can reverse a
claim ("likely" in "unlikely", "can" in "can't", "binding" in "non-binding", "5" in "1.5"); a quote
cut mid-word is refused with a reason the model can act on. An ellipsis ("...", "…", "[...]",
"[…]") in a quote stands for omitted text: every part must be at least MIN_PIECE_CHARS long and
found in order, each starting at most MAX_GAP_CHARS normalised characters after the previous part
ends, and the omitted text must not hold a negation near a kept part ("will ... raise" must not
hide "not"). A quote whose "..." is itself in the page also matches verbatim. The first occurrence
wins; the span covers the first part to the last. An index is read-only once built (thread-safe).
"""
from __future__ import annotations

import html
import re
import unicodedata
from array import array
from dataclasses import dataclass
from functools import lru_cache

MIN_QUOTE_CHARS = 15
MIN_PIECE_CHARS = 8
MAX_GAP_CHARS = 600
_NEGATION_REACH = 60  # chars of omitted text, next to each kept part, that must not hold a negation

_SINGLE_QUOTES = "\u2018\u2019\u201a\u201b\u2032\u02bc\u00b4\uff07"
_DOUBLE_QUOTES = "\u201c\u201d\u201e\u201f\u2033\uff02"
_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2e3a\u2e3b\ufe58\ufe63\uff0d"
_FOLD = str.maketrans({**dict.fromkeys(_SINGLE_QUOTES, "'"), **dict.fromkeys(_DOUBLE_QUOTES, '"'),
                       **dict.fromkeys(_DASHES, "-"), "\u2026": "..."})
_WORD_HYPHENS = "-\u2010\u2011"

# Characters whose normal form is their lower case, one for one: taken in bulk for speed.
_STABLE = (r"!-%'-,.-~\u00c0-\u00d6\u00d8-\u00de\u00e0-\u00f6\u00f8-\u00ff\u0400-\u045f"
           r"\u3041-\u3096\u30a1-\u30fa\u4e00-\u9fff\uac00-\ud7a3")
_PLAIN = re.compile(rf"[{_STABLE}]++(?: [{_STABLE}]++)*+")
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_SPACES = re.compile(r"\s+")
_INLINE_SPACE = r"[^\S\n\r\x0b\x0c\x85\u2028\u2029]*"
_BREAK_HYPHEN = re.compile(rf"(?<=[^\W\d_])[-\u2010\u00ad]{_INLINE_SPACE}(?:\r\n|[\n\r\x0b\x0c\x85\u2028\u2029])"
                           rf"{_INLINE_SPACE}(?=[^\W\d_])")
_DOTS = r"\.(?: ?\.){2,}"
_OMISSION = rf"\[ ?{_DOTS} ?\]|\( ?{_DOTS} ?\)|{_DOTS}"
_SPLIT = re.compile(rf" ?(?:{_OMISSION}) ?")
# Spaces, quotation marks and omission marks at the ends of a quote. The trailing run is matched on the reversed
# quote: a search for a run that reaches the end would start again at each of its characters (quadratic in its
# length). An omission mark reads the same reversed, but for its brackets.
_LEADING_EDGES = re.compile(rf"(?:[ \"']|{_OMISSION})++")
_TRAILING_EDGES_REVERSED = re.compile(rf"(?:[ \"']|\] ?{_DOTS} ?\[|\) ?{_DOTS} ?\(|{_DOTS})++")
_NEGATION = re.compile(r"\b(?:not|no|never|cannot|nor|neither|none|nothing|nobody|nowhere)\b|n't\b")

_TOO_SHORT = f"quote is shorter than {MIN_QUOTE_CHARS} characters; quote a longer exact passage"
_NOT_FOUND = "not found verbatim in the source; copy the exact text"
_MID_WORD = "the quote starts or ends in the middle of a word or number in the source; quote whole words"
_OUT_OF_ORDER = ("the pieces around '...' are not in the source in this order; "
                 "quote them in source order or as separate quotes")
_TOO_FAR = (f"the pieces around '...' are more than {MAX_GAP_CHARS} characters apart in the source; "
            "quote them as separate quotes")
_HIDES_NEGATION = ("the text left out at '...' contains a negation (such as 'not' or 'never'); "
                   "include it in the quote or quote the pieces separately")


@dataclass(frozen=True)
class Span:
    """A located passage: text[start:end] of the original (not normalised) text."""

    start: int
    end: int


def find_quote(text: str, quote: str) -> Span | None:
    """The first place `quote` occurs verbatim (after normalisation) in `text`, or None."""
    return QuoteIndex(text).find(quote)


class QuoteIndex:
    """One page normalised once, answering many quote look-ups with str.find on the normal form."""

    def __init__(self, text: str) -> None:
        self._text = text
        norm = _Normaliser(text, join_broken_words=True)
        self._norm = "".join(norm.parts)
        self._starts = norm.starts  # original start offset of each normalised character
        self._wide_ends = norm.wide_ends  # original end offset where it is not start + 1
        self._breaks = norm.breaks  # normalised positions where a line-break hyphen was removed

    def find(self, quote: str) -> Span | None:
        """The span of the first verbatim occurrence of `quote`, or None if it is not in the page."""
        found = self._locate(quote, explain=False)
        return found if isinstance(found, Span) else None

    def explain_miss(self, quote: str) -> str:
        """Why `quote` is not found, written for a model to act on; "" when it is found."""
        found = self._locate(quote, explain=True)
        return "" if isinstance(found, Span) else found or _NOT_FOUND

    def _locate(self, quote: str, *, explain: bool) -> Span | str | None:
        # A broken hyphen kept in a quote is matched by _walk, so quotes are not joined: "cheese-\nor" stays.
        q = _strip_edges("".join(_Normaliser(quote, join_broken_words=False).parts))
        pieces = [p for p in (s.strip(" \"'") for s in _SPLIT.split(q)) if p]  # a piece may be quoted on its own
        if sum(map(len, pieces)) < MIN_QUOTE_CHARS:
            return _TOO_SHORT
        short = next((p for p in pieces if len(p) < MIN_PIECE_CHARS), None) if len(pieces) > 1 else None
        hit, hid_negation = (None, False) if short is not None else self._chain(pieces, MAX_GAP_CHARS)
        if hit is None and len(pieces) > 1:
            hit = self._find_piece(q, 0, len(self._norm))  # the page itself may contain the "..."
        if hit is not None:
            return self._span(*hit)
        if len(pieces) == 1:
            return self._why_missing(q) if explain else None
        if short is not None:
            return (f"each piece around '...' must be at least {MIN_PIECE_CHARS} characters; "
                    f"'{_clip(short)}' is too short")
        if not explain:
            return None
        if hid_negation:
            return _HIDES_NEGATION
        for piece in pieces:
            if self._find_piece(piece, 0, len(self._norm)) is None:
                return f"the piece '{_clip(piece)}': {self._why_missing(piece)}"
        return _TOO_FAR if self._chain(pieces, None)[0] is not None else _OUT_OF_ORDER

    def _chain(self, pieces: list[str], max_gap: int | None) -> tuple[tuple[int, int] | None, bool]:
        """Normalised (start, end) of the first in-order chain of pieces, and whether one was refused for a negation."""
        n = len(self._norm)
        lo, hid_negation = 0, False
        while (first := self._find_piece(pieces[0], lo, n)) is not None:
            end, gaps = first[1], []
            for piece in pieces[1:]:
                # Taking each next piece as early as possible is optimal for the following gap limit.
                nxt = self._find_piece(piece, end, n if max_gap is None else end + max_gap)
                if nxt is None:
                    break
                gaps.append((end, nxt[0]))
                end = nxt[1]
            else:
                if max_gap is None or not any(self._hides_negation(a, b) for a, b in gaps):
                    return (first[0], end), hid_negation
                hid_negation = True
            if max_gap is None:
                break  # without a gap limit the earliest first piece is as good as any
            lo = first[0] + 1
        return None, hid_negation

    def _hides_negation(self, start: int, end: int) -> bool:
        gap = self._norm[start:end]
        return any(m.start() < _NEGATION_REACH or m.end() > len(gap) - _NEGATION_REACH
                   for m in _NEGATION.finditer(gap))

    def _find_piece(self, piece: str, lo: int, hi: int) -> tuple[int, int] | None:
        """Normalised (start, end) of the first clean occurrence of `piece` starting in [lo, hi]."""
        t, size = self._norm, len(piece)
        stop = min(len(t), hi + size)
        at = t.find(piece, lo, stop)
        while at >= 0:
            if self._clean(at, at + size):
                return at, at + size
            at = t.find(piece, at + 1, stop)
        if self._breaks and "-" in piece:
            return self._find_through_breaks(piece, lo, hi)
        return None

    def _find_through_breaks(self, piece: str, lo: int, hi: int) -> tuple[int, int] | None:
        """Like _find_piece, letting a hyphen in the quote stand for a hyphen the page broke across lines."""
        segments = piece.split("-")
        k = max(range(len(segments)), key=lambda i: len(segments[i]))
        anchor, offset = segments[k], sum(len(s) + 1 for s in segments[:k])
        if not anchor:
            return None
        t, best = self._norm, None
        stop = min(len(t), hi + offset + len(anchor))
        at = t.find(anchor, max(0, lo + offset - k), stop)
        while at >= 0 and (best is None or at - offset < best[0]):
            for skipped in range(k + 1):  # how many of the k hyphens before the anchor were line breaks
                start = at - offset + skipped
                if lo <= start <= hi and (best is None or start < best[0]):
                    end = self._walk(piece, start)
                    if end is not None and self._clean(start, end):
                        best = (start, end)
                        break
            at = t.find(anchor, at + 1, stop)
        return best

    def _walk(self, piece: str, j: int) -> int | None:
        t, n, i = self._norm, len(self._norm), 0
        while i < len(piece):
            if j < n and t[j] == piece[i]:
                i, j = i + 1, j + 1
            elif piece[i] == "-" and i > 0 and j in self._breaks:
                i += 1
            else:
                return None
        return j

    def _clean(self, start: int, end: int) -> bool:
        """Whether a match over normalised [start, end) begins and ends on whole units and word boundaries."""
        st, n = self._starts, len(self._norm)
        if start > 0 and (st[start - 1] == st[start] or self._joined(start - 1)):
            return False
        return end >= n or not (st[end] == st[end - 1] or self._joined(end - 1))

    def _joined(self, a: int) -> bool:
        """Whether normalised characters a and a+1 belong to one word or number."""
        t = self._norm
        x, y = t[a], t[a + 1]
        before = t[a - 1] if a > 0 else " "
        after = t[a + 2] if a + 2 < len(t) else " "
        if x.isalnum() and y.isalnum():
            return True
        if (x in ".," and before.isdigit() and y.isdigit()) or (y in ".," and x.isdigit() and after.isdigit()):
            return True  # inside 1.5 or 90,000
        if (x == "'" and before.isalpha() and y.isalpha()) or (y == "'" and x.isalpha() and after.isalpha()):
            return True  # inside can't
        if x == "-" and before.isalnum() and y.isalnum():
            return self._tight_hyphen(a)  # inside non-binding, but not across an em dash
        return y == "-" and x.isalnum() and after.isalnum() and self._tight_hyphen(a + 1)

    def _tight_hyphen(self, k: int) -> bool:
        o, text = self._starts[k], self._text
        return (text[o] in _WORD_HYPHENS and k not in self._wide_ends
                and o > 0 and not text[o - 1].isspace() and o + 1 < len(text) and not text[o + 1].isspace())

    def _why_missing(self, piece: str) -> str:
        t = self._norm
        if t.find(piece) >= 0:
            return _MID_WORD
        lo, hi = 0, len(piece)  # longest prefix of the quote that the page has
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if t.find(piece[:mid]) >= 0 else (lo, mid - 1)
        if lo < MIN_QUOTE_CHARS:
            return _NOT_FOUND
        at = t.find(piece[:lo]) + lo
        source = " ".join(self._text[self._starts[at]:self._starts[at] + 60].split())[:30] if at < len(t) else ""
        return (f"{_NOT_FOUND}: it matches the source up to '{piece[max(0, lo - 30):lo].lstrip()}', "
                f"where the source continues '{source}' but the quote has '{piece[lo:lo + 30]}'")

    def _span(self, start: int, end: int) -> Span:
        return Span(self._starts[start], self._wide_ends.get(end - 1, self._starts[end - 1] + 1))


def _strip_edges(q: str) -> str:
    """A normalised quote (no line breaks) without the spaces, quotation marks and omission marks at its ends."""
    lead = _LEADING_EDGES.match(q)
    start = lead.end() if lead else 0
    trail = _TRAILING_EDGES_REVERSED.match(q[::-1], 0, len(q) - start)
    return q[start:len(q) - trail.end()] if trail else q[start:]


def _clip(s: str, limit: int = 40) -> str:
    return s if len(s) <= limit else s[:limit] + "..."


@lru_cache(maxsize=65536)
def _fold_unit(unit: str) -> str:
    """A character with its combining marks (or a decoded entity) in normal form: spaces ' ', invisibles dropped."""
    s = unicodedata.normalize("NFKC", unit.translate(_FOLD))
    s = unicodedata.normalize("NFKC", s.casefold()).translate(_FOLD)
    return "".join(" " if c.isspace() else c for c in s
                   if c.isspace() or unicodedata.category(c) not in ("Cf", "Cc"))


def _is_mark(c: str) -> bool:
    return unicodedata.category(c)[0] == "M"


class _Normaliser:
    """Builds the normal form of a text with the original start offset of every normalised character."""

    def __init__(self, text: str, *, join_broken_words: bool) -> None:
        self.parts: list[str] = []
        self.starts = array("i")
        self.wide_ends: dict[int, int] = {}
        self.breaks: set[int] = set()
        self._size = 0
        self._pending: tuple[int, int] | None = None  # whitespace seen but not yet emitted
        self._last = ""
        self._after_dash = False
        self._join = join_broken_words
        self._run(text)

    def _run(self, text: str) -> None:
        n, i = len(text), 0
        while i < n:
            m = _PLAIN.match(text, i)
            if m is not None:
                end = m.end()
                if end < n and _is_mark(text[end]):
                    end -= 1  # the last letter belongs with the marks that follow it
                if end > i:
                    self._plain(text, i, end)
                    i = end
                    continue
            c = text[i]
            if c == "&" and (m := _ENTITY.match(text, i)) and (decoded := html.unescape(m.group())) != m.group():
                self._emit(_fold_unit(decoded), i, m.end())
                i = m.end()
            elif self._join and c in "-\u2010\u00ad" and (m := _BREAK_HYPHEN.match(text, i)):
                self.breaks.add(self._size)
                self._pending, self._after_dash = None, False
                i = m.end()
            elif c.isspace():
                end = _SPACES.match(text, i).end()  # type: ignore[union-attr]
                self._space(i, end)
                i = end
            else:
                end = i + 1
                while end < n and _is_mark(text[end]):
                    end += 1
                self._emit(_fold_unit(text[i:end]), i, end)
                i = end

    def _plain(self, text: str, start: int, end: int) -> None:
        self._flush()
        chunk = text[start:end]
        self.parts.append(chunk.lower())
        self.starts.extend(range(start, end))
        self._size += end - start
        self._last, self._after_dash = chunk[-1], False

    def _emit(self, folded: str, start: int, end: int) -> None:
        for c in folded:
            if c == " ":
                self._space(start, end)
            elif c == "-":
                self._dash(start, end)
            else:
                self._flush()
                self._push(c, start, end)
                self._after_dash = False

    def _space(self, start: int, end: int) -> None:
        if self._after_dash or self._size == 0:
            return
        self._pending = (start, end) if self._pending is None else (self._pending[0], end)

    def _dash(self, start: int, end: int) -> None:
        self._pending = None
        if self._last == "-":
            self.wide_ends[self._size - 1] = end
        else:
            self._push("-", start, end)
        self._after_dash = True

    def _flush(self) -> None:
        if self._pending is not None:
            start, end = self._pending
            self._pending = None
            self._push(" ", start, end)

    def _push(self, c: str, start: int, end: int) -> None:
        self.parts.append(c)
        self.starts.append(start)
        if end != start + 1:
            self.wide_ends[self._size] = end
        self._size += 1
        self._last = c
