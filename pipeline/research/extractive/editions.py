"""Numbered editions: editions_of(question) -> the numbers a question gives beside a name or a series word ("iPhone
14", "season 2", "13-inch MacBook", "the 94th Academy Awards", "Super Bowl LVI"), and other_edition(editions, sentence)
-> whether a sentence names another edition in their place ("iPhone 13", "season 1", "16-inch MacBook", "the 93rd
Academy Awards", "Super Bowl LV") and never the one asked about.

A page about the iPhone 13 that mentions the iPhone 14 in its title does not tell the iPhone 14's price: as with a
year, a number beside the same name is what tells one edition, season, model or game from another. A count ("scored
30 points"), a date ("November 18") or a measure ("5 miles") is no edition, and neither is an edition a sentence
compares with ("$100 more than the iPhone 13").
"""
from __future__ import annotations

import re
from typing import Literal, NamedTuple

from .analysis import DATE_WORDS
from .terms import POSSESSIVE_ENDS, STOP_WORDS, stem, word_list

# A word or number (a comma inside a number only: "10,000"), or any other mark, which parts the words either side.
_TOKEN = re.compile(r"(?:[\w'’.-]|,(?=\d))+|[^\w\s]")
_ENDING = re.compile(r"(?<=\d)(?:s|st|nd|rd|th)$")
_YEAR = re.compile(r"(?:1[5-9]\d\d|20\d\d)s?")
_LETTERS = re.compile(r"[a-z]+")
_ORDINAL = re.compile(r"\d+(?:st|nd|rd|th)")
# A Roman numeral of two letters or more, up to 89 ("LVI", "II"); C, D and M are left out, since "DC", "CD" and "MD"
# are more often abbreviations than numbers.
_ROMAN = re.compile(r"(?:XL|L?X{0,3})(?:IX|IV|V?I{0,3})")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50}
# A question that asks what came before or after an edition asks about another one ("Who succeeded Louis XIV?").
_RELATIONS = frozenset(stem(w) for w in word_list("""
    succeed successor predecessor precede replace replacement follow next previous father son daughter heir"""))
# Lower-case words a number after them numbers: "season 2", "game 7", "phase 1".
_SERIES = frozenset(stem(w) for w in word_list("""
    season series episode phase part game chapter version model volume round category flight stage level generation
    edition issue"""))
_MONTHS = frozenset(stem(w) for w in DATE_WORDS)
# An edition said after these words (up to _COMPARED tokens on) is what the sentence compares with.
_COMPARISONS = frozenset(word_list("than since after from last previous prior predecessor before earlier"))
_COMPARED = 3


class Edition(NamedTuple):
    """A number (normalised) beside a stemmed word: after it ("iPhone 14") or before it ("13-inch MacBook")."""

    word: str
    number: str
    side: Literal["after", "before"]


class _Token(NamedTuple):
    word: str | None = None  # stemmed, for a name or a series word that may take a number after it
    number: str | None = None  # normalised, for a number that is no year
    hyphened: bool = False  # a number joined to a unit ("13-inch"): it may number the word after it
    ordinal: bool = False  # "94th": it may number the name after it ("the 94th Academy Awards")
    noun: str | None = None  # stemmed, for any content word (a hyphened number numbers it)
    compares: bool = False


def _tokens(text: str) -> list[_Token]:
    """Each token of `text` as a _Token; an owner ("Emirates'"), a mark or a stop word is an empty one."""
    out: list[_Token] = []
    token = ""
    for m in _TOKEN.finditer(text):
        # An ordinal numbers an edition only after "the" ("the 94th Academy Awards"), not after a month ("May 7th")
        # or an owner ("his 1st Academy Award" counts).
        previous = token
        raw = m.group().strip(".-")
        token = raw.lower()
        if token.endswith(POSSESSIVE_ENDS):
            out.append(_Token())  # an owner, not a series: "Emirates' 30 jets" are not its "30" edition
        elif any(c.isdigit() for c in token):
            number = _ENDING.sub("", token.replace(",", ""))  # "787-9s" is the 787-9, "10,000" is 10000
            # A year is left to the year rule (select.py): "the 2019 final" against "the 2018 final".
            out.append(_Token(number=None if _YEAR.fullmatch(number) else number,
                              hyphened="-" in number and number[-1:].isalpha(),
                              ordinal=bool(_ORDINAL.fullmatch(token)) and previous in ("", "the")))
        elif len(raw) > 1 and _ROMAN.fullmatch(raw):
            out.append(_Token(number=str(_roman(raw))))  # "Super Bowl LVI" is Super Bowl 56
        elif token in _COMPARISONS:
            out.append(_Token(compares=True))
        elif (token := token.strip("'’")).isalpha() and len(token) > 1 and token not in STOP_WORDS:
            word = stem(token)
            named = any(c.isupper() for c in raw) and word not in _MONTHS
            out.append(_Token(word=word if named or word in _SERIES else None, noun=word))
        else:
            out.append(_Token())
    return out


def _pairs(text: str, *, compared: bool = True) -> list[Edition]:
    """The editions `text` gives; without those it compares with when not `compared`."""
    tokens = _tokens(text)
    out = []
    since = -_COMPARED - 1  # the index of the last comparison word
    for i, (a, b) in enumerate(zip(tokens, tokens[1:], strict=False)):
        if a.compares:
            since = i
        if not compared and i - since <= _COMPARED:
            continue
        if a.word and b.number:
            out.append(Edition(a.word, b.number, "after"))
        if a.number and a.hyphened and b.noun:
            out.append(Edition(b.noun, a.number, "before"))
        if a.number and a.ordinal and b.word:
            out.append(Edition(b.word, a.number, "before"))
    return out


def _roman(numeral: str) -> int:
    """The value of a valid Roman numeral ("LVI" -> 56)."""
    values = [_ROMAN_VALUES[c] for c in numeral]
    return sum(-v if v < after else v for v, after in zip(values, [*values[1:], 0], strict=True))


def editions_of(question: str) -> list[Edition]:
    """The editions `question` gives, each once; none when it asks what came before or after one."""
    if any(stem(w) in _RELATIONS for w in _LETTERS.findall(question.lower())):
        return []
    return list(dict.fromkeys(_pairs(question)))


def other_edition(editions: list[Edition], sentence: str) -> bool:
    """Whether `sentence`, beside an edition's word and side, gives only numbers the question never gives there."""
    if not editions:
        return False
    asked: dict[tuple[str, str], set[str]] = {}
    for e in editions:
        asked.setdefault((e.word, e.side), set()).add(e.number)
    said: dict[tuple[str, str], set[str]] = {}
    for p in _pairs(sentence, compared=False):
        if (p.word, p.side) in asked:
            said.setdefault((p.word, p.side), set()).add(p.number)
    return any(numbers.isdisjoint(asked[key]) for key, numbers in said.items())
