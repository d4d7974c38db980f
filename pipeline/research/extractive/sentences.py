"""Split text into sentences with exact offsets: split_sentences(text) -> [Span(start, end, text[start:end])]."""
from __future__ import annotations

import re
from typing import NamedTuple

from .terms import ABBREVIATIONS, word_list

MAX_SENTENCE_CHARS = 400  # longer sentences are cut at clause boundaries (then words) to at most this
MIN_PIECE_CHARS = 60  # a cut is not made closer than this to the start of the piece, when avoidable

_LINE = re.compile(r"[^\n]+")
# A sentence end: terminal punctuation, closing quotes/brackets, then space (or end of block); CJK enders need no space.
# Matched from the first mark of a run only ((?<![.!?…])), and whole (`++`, `*+`): a search would otherwise start
# again at each mark of a long run of them and read on to its end.
_END = re.compile(r"(?<![.!?…])[.!?…]++[\"'”’»)\]]*+(?=\s|$)|[。！？]+[」』”’)]*")
# The word before a full stop: matched on the reversed window before it, so the match starts where the word ends
# (`[...]*$` searched forwards starts again at each character of the word).
_WORD_REVERSED = re.compile(r"[\w.'’-]*+")
_NEXT = re.compile(r"\s*(\S?)(\S*)")
_OPENERS = "\"'“‘«([¿¡"
# After a dotted acronym ("U.S.", "p.m."), these words start a new sentence.
STARTERS = frozenset(word_list("""
    the a an he she it they we i but and in on at this that these those there his her its their our for
    after when while if as so yet however meanwhile
"""))
_TRIM = " \t\r\n\f\v\u00a0\u2022\u00b7\u25aa\u25ba\u2023\u2043*"  # whitespace and bullet marks
_CUTS = (re.compile(r"[;:](?=\s)"), re.compile(r"\s[\u2014\u2013-]\s|[\u2014\u2013]"), re.compile(r",(?=\s)"),
         re.compile(r"\s"))


class Span(NamedTuple):
    """A sentence: text == page_text[start:end], without surrounding whitespace."""

    start: int
    end: int
    text: str


# Words a sentence cannot end on: a hard-wrapped line ending with one runs on even before a capital ("Contributed by
# Pablo Galindo, Tim Peters and\nLarry Hastings").
_RUN_ON = frozenset(word_list("""
    and or nor but of by the a an to in on at for from with as than that whose which who via per into onto
"""))


def _blocks(text: str) -> list[tuple[int, int]]:
    """Paragraphs: each line, except that a line not ending a sentence, followed by one newline and a
    lowercase letter (not indented), runs on (hard-wrapped text); so does a line ending with a word of _RUN_ON, followed
    by one newline and a letter (not indented)."""
    blocks: list[tuple[int, int]] = []
    last = ""  # the last character (not a space) of the last block: of its last line, which is never blank
    for m in _LINE.finditer(text):
        line = m.group()
        if not line.strip():
            continue
        if blocks:
            prev_start, prev_end = blocks[-1]
            between = text[prev_end:m.start()]
            end = prev_end
            while end > prev_start and text[end - 1].isspace():
                end -= 1  # each line's trailing spaces are stepped over once: linear
            line_before = text[max(prev_start, end - 12):end]  # 12: longer than any word of _RUN_ON
            first = line[:1]  # an indented line (code, a quoted block) never runs on
            if between.count("\n") == 1 and (first.islower() and last not in ".!?:;\"”’)]"
                                              or first.isalpha() and _last_word(line_before) in _RUN_ON):
                blocks[-1] = (prev_start, m.end())
                last = line.rstrip()[-1]
                continue
        blocks.append((m.start(), m.end()))
        last = line.rstrip()[-1]
    return blocks


def _last_word(text: str) -> str:
    words = text.split()
    return words[-1] if words else ""  # as written: "Plan A" does not end on the article "a"


def _is_boundary(block: str, m: re.Match[str]) -> bool:
    """Whether the punctuation matched at `m` ends a sentence, judged by the word before and after it."""
    punct = m.group()
    if punct[0] in "。！？":
        return True
    nxt = _NEXT.match(block, m.end())  # always matches (every part is optional)
    first, rest = (nxt.group(1), nxt.group(2)) if nxt else ("", "")
    if not first:
        return True  # end of the block
    if first in _OPENERS:
        first = rest[:1] or first
    if first.islower():
        return False  # "e.g. this", "said. he" (lowercase after a stop is not a new sentence)
    if punct[0] != ".":
        return True
    window = block[max(0, m.start() - 40):m.start()].removesuffix("\n")
    last = _WORD_REVERSED.match(window[::-1])  # always matches, maybe empty
    word = last.group()[::-1].lower() if last else ""
    if not word:
        return True
    if len(word) == 1 and word.isalpha():
        return False  # an initial: "J. K. Rowling"
    if word in ABBREVIATIONS or "." in word and re.fullmatch(r"(?:\w\.)+\w", word):
        # "Mr. Smith" never ends; a dotted acronym ("U.S.", "p.m.") ends when a typical sentence start follows
        return "." in word and (first + rest).strip(_OPENERS + ",").lower() in STARTERS
    return True


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start] in _TRIM:
        start += 1
    while end > start and text[end - 1] in " \t\r\n\f\v\u00a0":
        end -= 1
    return start, end


def _cap(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """[start, end) cut into pieces of at most MAX_SENTENCE_CHARS, at the last clause boundary (";", ":",
    dash, ",", then any space) before the limit; a single word longer than the limit is cut hard."""
    out = []
    while end - start > MAX_SENTENCE_CHARS:
        window = text[start: start + MAX_SENTENCE_CHARS + 1]
        cut = -1
        for pattern in _CUTS:
            ends = [m.end() if pattern is not _CUTS[-1] else m.start() for m in pattern.finditer(window)]
            ends = [e for e in ends if MIN_PIECE_CHARS <= e <= MAX_SENTENCE_CHARS]
            if ends:
                cut = ends[-1]
                break
        if cut <= 0:
            cut = MAX_SENTENCE_CHARS
        out.append((start, start + cut))
        start = start + cut
        while start < end and text[start].isspace():
            start += 1
    out.append((start, end))
    return out


def split_sentences(text: str) -> list[Span]:
    """Sentences of `text` with exact offsets: lines are paragraph boundaries; ". " before a capital ends a
    sentence unless the word is an abbreviation ("Mr.", "Inc.", "No.") or an initial; "U.S." ends one only
    before a typical sentence start ("U.S. The ..."); decimals ("3.5") never; closing quotes stay with their
    sentence; sentences over MAX_SENTENCE_CHARS are cut at clause boundaries. Leading bullets are trimmed."""
    spans: list[Span] = []
    for b_start, b_end in _blocks(text):
        block = text[b_start:b_end]
        pieces, begin = [], 0
        for m in _END.finditer(block):
            if _is_boundary(block, m):
                pieces.append((begin, m.end()))
                begin = m.end()
        pieces.append((begin, len(block)))
        for p_start, p_end in pieces:
            s, e = _trimmed(text, b_start + p_start, b_start + p_end)
            if e <= s:
                continue
            for c_start, c_end in _cap(text, s, e):
                c_start, c_end = _trimmed(text, c_start, c_end)
                if c_end > c_start:
                    spans.append(Span(c_start, c_end, text[c_start:c_end]))
    return spans
