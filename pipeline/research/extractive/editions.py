"""Numbered editions: editions_of(question) -> the numbers a question gives beside a word ("iPhone 14", "season 2",
"13-inch MacBook"), and other_edition(editions, sentence) -> whether a sentence names another edition in their place
("iPhone 13", "season 1", "16-inch MacBook") and never the one asked about.

A page about the iPhone 13 that mentions the iPhone 14 in its title does not tell the iPhone 14's price: as with a
year, a number beside the same word is what tells one edition, season, model or game from another.
"""
from __future__ import annotations

import re
from typing import Literal, NamedTuple

from .terms import STOP_WORDS, stem

# A word or number (a comma inside a number only: "10,000"), or any other mark, which parts the words either side.
_TOKEN = re.compile(r"(?:[\w'’.-]|,(?=\d))+|[^\w\s]")
_ENDING = re.compile(r"(?<=\d)(?:s|st|nd|rd|th)$")
_YEAR = re.compile(r"(?:1[5-9]\d\d|20\d\d)s?")


class Edition(NamedTuple):
    """A number (normalised) and the stemmed word it stands beside, after it ("iPhone 14") or before it ("13-inch
    MacBook")."""

    word: str
    number: str
    side: Literal["after", "before"]


def _tokens(text: str) -> list[tuple[str | None, str | None]]:
    """Each token of `text` as (stemmed word, None) or (None, normalised number); (None, None) for other tokens."""
    out: list[tuple[str | None, str | None]] = []
    for m in _TOKEN.finditer(text):
        token = m.group().strip(".-").lower()
        if token.endswith(("'s", "’s", "s'", "s’")):
            out.append((None, None))  # an owner, not a series: "Emirates' 30 jets" are not its "30" edition
        elif any(c.isdigit() for c in token):
            # "787-9s" is the 787-9, "June 9th" is June 9, "10,000" is 10000
            number = _ENDING.sub("", token.replace(",", ""))
            # A year is left to the year rule (select.py): "the 2019 final" against "the 2018 final".
            out.append((None, None if _YEAR.fullmatch(number) else number))
        elif (token := token.strip("'’")).isalpha() and len(token) > 1 and token not in STOP_WORDS:
            out.append((stem(token), None))
        else:
            out.append((None, None))
    return out


def _pairs(text: str) -> list[Edition]:
    tokens = _tokens(text)
    out = []
    for (word_a, number_a), (word_b, number_b) in zip(tokens, tokens[1:], strict=False):
        if word_a and number_b:
            out.append(Edition(word_a, number_b, "after"))
        if number_a and word_b:
            out.append(Edition(word_b, number_a, "before"))
    return out


def editions_of(question: str) -> list[Edition]:
    """The numbers `question` gives beside a word, each once, years aside."""
    return list(dict.fromkeys(_pairs(question)))


def other_edition(editions: list[Edition], sentence: str) -> bool:
    """Whether `sentence` gives a number beside one of the editions' words (on the same side) that the question gives
    there nowhere, and none that it gives: "the iPhone 13 costs $699" for "iPhone 14" ("Python 3.12" is no other
    edition for a question that names Python 3.6 and Python 3.12)."""
    if not editions:
        return False
    asked: dict[tuple[str, str], set[str]] = {}
    for e in editions:
        asked.setdefault((e.word, e.side), set()).add(e.number)
    said: dict[tuple[str, str], set[str]] = {}
    for p in _pairs(sentence):
        if (p.word, p.side) in asked:
            said.setdefault((p.word, p.side), set()).add(p.number)
    return any(numbers.isdisjoint(asked[key]) for key, numbers in said.items())
