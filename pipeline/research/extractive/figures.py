"""The figures of a sentence that answer a question: ages for "how old", numbers next to the question's own words.

Two quotes selected for one sub-question from different pages conflict when both carry answer figures and no figure
is shared ("12,000 employees" against "12,500 employees"); figures about something else in the same sentences
("$8 billion" valuation next to a head count) do not count, because no question word stands beside them.
"""
from __future__ import annotations

import re

from pipeline.research.extractive.terms import content_terms, kin, terms_of

# What a question asks for, by its wording: "number", "date", "age" or "name".
_KINDS = (
    ("age", re.compile(r"\bhow old\b|\b(?:what|which) age\b|\bage of\b|\b(?:his|her|their|its) age\b", re.I)),
    ("number", re.compile(r"\bhow (?:many|much|long|far|big|large|tall|high|often|fast|heavy)\b|\bpercent|"
                          r"\bper ?cent\b|\bnumber of\b|\bwhat (?:share|proportion|fraction|amount|price|rate|"
                          r"percentage|age|score)\b|\bcost\b|\bprice\b|\bwhat (?:was|is|were|are) (?:the|its|their) "
                          r"(?:\w+ )?(?:cost|price|total|amount|figure|value|rate|score|population|budget|speed|range|"
                          r"size|weight|height|length|capacity|age|revenue|profit|salary|distance|share|valuation)\b",
                          re.I)),
    ("date", re.compile(r"\bwhen\b|\bwhat (?:year|date|day|month|time)\b|\bwhich (?:year|date|day|month)\b|"
                        r"\bsince when\b|\bhow long ago\b|\bin what year\b|\bdate\b", re.I)),
    ("name", re.compile(r"\bwho(?:m|se)?\b|\bwhich (?:company|companies|person|people|team|country|firm|city|state|"
                        r"player|brand|group|organi[sz]ation|agency|version|model|product)\b|\bwhere\b|\bwhat "
                        r"(?:company|country|city|team|brand|name|firm|version)\b|\bnamed?\b", re.I)),
)
# "48-year-old", "aged 55"; and "Patrick W. Carlineo Jr., 55," (an age after a name), found by ages()
_AGE_WORDS = re.compile(r"\b\d{1,3}[- ]years?[- ]old\b|\baged? \d{1,3}\b")
_AGE_AFTER_WORD = re.compile(r", \d{1,3},")
_WORD_MARKS = "_.'’-"  # with letters and digits, what the word before an age may hold


# ages() finds what `\b\d{1,3}[- ]years?[- ]old\b|\baged? \d{1,3}\b|[A-Z][\w.'’-]+, \d{1,3},` found, in code for the
# last form: a search for it started again at each capital of a long word and read on to the word's end.
def ages(sentence: str) -> list[str]:
    """The ages of `sentence` as written, in order: "48-year-old", "aged 55", "Assange, 47,"."""
    found: list[str] = []
    words, named = _AGE_WORDS.search(sentence), _age_after_word(sentence, 0)
    while True:
        span = words.span() if words is not None else None
        if span is None or named is not None and named[0] < span[0]:
            span = named  # at one position the first forms win, as in the alternation
        if span is None:
            return found
        found.append(sentence[span[0]:span[1]])
        if words is not None and words.start() < span[1]:
            words = _AGE_WORDS.search(sentence, span[1])
        if named is not None and named[0] < span[1]:
            named = _age_after_word(sentence, span[1])


def _age_after_word(text: str, pos: int) -> tuple[int, int] | None:
    """The span of the first "Word, 55," starting at or after `pos`: the word's first capital (with one character or
    more of the word after it) to the comma after the age."""
    at = pos
    while (m := _AGE_AFTER_WORD.search(text, at)) is not None:
        first, i = None, m.start()
        while i > pos and (text[i - 1].isalnum() or text[i - 1] in _WORD_MARKS):
            i -= 1
            if "A" <= text[i] <= "Z" and i < m.start() - 1:
                first = i
        if first is not None:
            return first, m.end()
        at = m.start() + 1
    return None


def answer_kinds(question: str) -> set[str]:
    """What the question asks for: "number" (how many, how much, percent...), "date" (when, what year...),
    "age" (how old), "name" (who, which company, where...); empty when none of these."""
    return {kind for kind, pattern in _KINDS if pattern.search(question)}


WINDOW = 3  # content words either side of a figure that tie it to the question
_FIGURE = re.compile(r"(?<![\w.])[$€£]?\d[\d,]*(?:\.\d+)?(?:\s?(?:%|percent|per cent|million|billion|trillion|"
                     r"thousand|bn|m)\b|%)?", re.I)
_MONTH = re.compile(r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?\s+$")
_ORDINALS = {"first": "1", "second": "2", "third": "3", "fourth": "4", "1st": "1", "2nd": "2", "3rd": "3",
             "4th": "4"}
_PERIOD = re.compile(r"\b(?:(?P<ord>first|second|third|fourth|[1-4](?:st|nd|rd|th))[- ](?P<unit>quarter|half)|"
                     r"(?P<short>[QH][1-4]))\b", re.I)
_MAGNITUDE = {"thousand": "e3", "million": "e6", "m": "e6", "billion": "e9", "bn": "e9", "trillion": "e12"}


def _normal(figure: str) -> str:
    """'$12,500' -> '12500', '8 billion' -> '8e9', '51 %' -> '51%': one spelling per value."""
    m = re.match(r"[$€£]?([\d,]*\d(?:\.\d+)?)\s?(.*)$", figure.strip())
    if m is None:
        return figure
    digits, unit = m.group(1).replace(",", ""), m.group(2).lower()
    if "." in digits:
        digits = digits.rstrip("0").rstrip(".")
    if unit in ("%", "percent", "per cent"):
        return digits + "%"
    return digits + _MAGNITUDE.get(unit, "")


def answer_figures(question: str, sentence: str) -> frozenset[str]:
    """The normalised figures of `sentence` that answer `question`; empty when it carries none."""
    kinds = answer_kinds(question)
    found: set[str] = set()
    if "age" in kinds:
        found |= {_normal(n) for age in ages(sentence) for n in re.findall(r"\d{1,3}", age)}
    # A word of the question's family ties a figure too: "How much did X pay?" is told by "a purchase of $2 billion".
    wanted = {k for w in content_terms(question, stemmed=True) for k in {w, *kin(w)}}
    if not wanted:
        return frozenset(found)
    for m in _FIGURE.finditer(sentence):
        if "date" not in kinds and (re.fullmatch(r"(?:19|20)\d\d", m.group()) or _MONTH.search(sentence[:m.start()])):
            continue  # a year or a day of a month beside a figure is when, not how many
        before = terms_of(sentence[: m.start()], stemmed=True)[-WINDOW:]
        after = terms_of(sentence[m.end():], stemmed=True)[:WINDOW]
        if wanted & set(before + after):
            found.add(_normal(m.group()))
    return frozenset(found)


def _periods(sentence: str) -> frozenset[str]:
    """The parts of a year a sentence is about: "first quarter", "Q2", "second half" -> {"q1"}, {"q2"}, {"h2"}."""
    found = set()
    for m in _PERIOD.finditer(sentence):
        ordinal, unit = (m.group("ord") or m.group("short") or "").lower(), (m.group("unit") or "").lower()
        n = _ORDINALS.get(ordinal, ordinal[-1:])
        found.add(("h" if unit.startswith("half") or ordinal.startswith("h") else "q") + n)
    return frozenset(found)


def disagree(question: str, a: str, b: str) -> bool:
    """Whether sentences `a` and `b` both answer `question` with figures, other than those it gives, and share none.

    Figures of different quarters or halves of a year ("first quarter" against "second quarter") are two
    periods, not two accounts of one.
    """
    given = {_normal(m.group()) for m in _FIGURE.finditer(question)}  # "787-9" in "How many 787-9 jets" answers nothing
    fa, fb = answer_figures(question, a) - given, answer_figures(question, b) - given
    pa, pb = _periods(a), _periods(b)
    return bool(fa and fb) and fa.isdisjoint(fb) and not (pa and pb and pa.isdisjoint(pb))


