"""The answers a sentence offers a question: answer_values(sentence, part) -> the names, figures, dates or titles of
the part's answer type that the question itself does not already say.

A sentence answers a typed part only if it offers at least one value (select.py); two quotes answer it differently
when each offers a value the other never mentions (answer_conflicts in research/steps/conflicts.py).
"""
from __future__ import annotations

import re
from typing import NamedTuple

from .analysis import NAMED, Part
from .figures import WINDOW, ages, answer_figures
from .terms import STOP_WORDS, YEAR, content_terms, stem, terms_of, word_list

# A capitalised run (with inner "of", "de", "and" before another capital), a quoted phrase, a figure, a date. Runs
# are taken whole (`*+`, `++`): what follows each never starts with what it takes.
_NAME = re.compile(r"[A-Z][\w'’.&-]*+(?:\s++(?:(?:of|de|la|von|van|del|der|du|and|&)\s++)?[A-Z0-9][\w'’.&-]*+)*+")
# A person's name as written: capitalised words (initials, "Jr.", "de", "van" allowed), no code or camel case.
# Each word reads one way only: "Jr", "Sr", "II" and "III" are capitalised words already, so only "Jr." and "Sr."
# are listed. (Read two ways each, a run of them that failed at its end was retried in exponentially many ways.)
_PERSON = re.compile(r"(?:(?:Mc|Mac|O'|O’)?[A-ZÀ-ÖØ-Þ][a-zß-öø-ÿ'’-]+|[A-Z]\.|[A-Z]{2,})(?:\s+(?:(?:Mc|Mac|O'|O’)?"
                     r"[A-ZÀ-ÖØ-Þ][a-zß-öø-ÿ'’-]+|"
                     r"[A-Z]\.|[A-Z]{2,}|de|van|von|der|"
                     r"da|di|la|le|Jr\.|Sr\.))*(?:'s|’s)?")
_JOINED = re.compile(r"(?<!\s)\s++(?:of|and|&)\s++")  # (?<!\s): a run of spaces is tried once
_MIXED_CASE = re.compile(r"(?<![\w@#])[a-z][a-z0-9]*[A-Z][\w]*")
_SUM = re.compile(r"[$€£¥]|\b(?:dollars?|euros?|pounds?|yen|yuan|rupees?|francs?|usd|eur|gbp|million|billion|"
                  r"trillion|bn|m)\b|e[369]$|e12$", re.I)
_CURRENCY = re.compile(r"[$€£¥%]|\b(?:dollars?|euros?|pounds?|yen|yuan|rupees?|francs?|usd|eur|gbp|percent|"
                       r"per\s++cent)\b", re.I)
_DIGITS = re.compile(r"\d++(?:\.\d++)*+")
_FIGURE_WORDS = re.compile(r"[$€£¥]?\s?\d[\d,.]*\s?(?:[a-z]+\b)?", re.I)
_QUOTED = re.compile(r"[\"“«]([^\"“”«»]{2,80})[\"”»]")
_FIGURE = re.compile(r"(?<![\w.])[$€£¥]?\d[\d,]*(?:\.\d+)?(?:\s?(?:%|percent|per cent|million|billion|trillion|"
                     r"thousand|bn|m)\b|%)?", re.I)
_ISO = re.compile(r"\b\d{4}-\d\d-\d\d\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b")
_MONTH = re.compile(r"\b(?:January|February|March|April|May|June|July|August|September|October|November|December|"
                    r"Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\.?(?:\s+\d{1,2}(?:st|nd|rd|th)?\b)?", re.I)
_WEEKDAY = re.compile(r"\b(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|yesterday|today|tonight|"
                      r"tomorrow)\b", re.I)
_NUMBER_WORDS = frozenset(word_list("""
    two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen
    nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred hundreds thousand thousands million
    millions billion billions dozen dozens half quarter
"""))
_AMOUNT_WORDS = re.compile(r"\b(?:(?:a|one|two)\s+(?:half|third|quarter|fifth|dozen)|half|(?:hundreds|thousands|"
                           r"millions|billions|dozens)(?:\s+of\s+(?:thousands|millions))?|(?:twenty|thirty|forty|fifty|"
                           r"sixty|seventy|eighty|ninety|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
                           r"(?:-\w+)?)\b", re.I)
_NUMBER_WORD = re.compile(r"\b(?:" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + r")\b", re.I)
# Capitalised words that start sentences or name days and months rather than an answer.
_NOT_NAMES = STOP_WORDS | frozenset(word_list("""
    the a an this that these those he she it they we i you his her its their our my but and or so yet if when
    while after before as in on at for from by with of to also however meanwhile still now then there here
    mr mrs ms dr monday tuesday wednesday thursday friday saturday sunday january february march april may june
    july august september october november december
"""))


class Value(NamedTuple):
    """One answer a sentence offers: its text as written, and its key for comparing answers across sentences."""

    text: str
    key: frozenset[str]


def _key(text: str) -> frozenset[str]:
    return frozenset(content_terms(text, stemmed=True)) or frozenset([text.lower()])


def names(sentence: str) -> list[str]:
    """Capitalised runs of `sentence`, without a leading sentence-start word ("The", "But") or title ("Mr")."""
    found = []
    for m in _NAME.finditer(sentence):
        words = m.group().split()
        while words and words[0].lower().rstrip(".,") in _NOT_NAMES:
            words.pop(0)
        phrase = " ".join(words).strip(" .,'’-")
        if phrase and any(ch.isalpha() for ch in phrase):
            found.append(phrase)
    found += [q.strip() for q in _QUOTED.findall(sentence)]
    found += _MIXED_CASE.findall(sentence)  # "factcheckUK", "iPhone", "eBay": names that start in lower case
    return found


def _with(pattern: re.Pattern[str], value: str, sentence: str) -> bool:
    """Whether `pattern` is found in figure `value`, or in the figure with its unit as `sentence` writes it (the same
    number: "12" is not the figure of "$120")."""
    number = _number(value.rstrip("%"))
    return bool(pattern.search(value)) or any(pattern.search(m.group()) for m in _FIGURE_WORDS.finditer(sentence)
                                              if number in map(_number, _DIGITS.findall(m.group().replace(",", ""))))


def _number(text: str) -> float | str:
    """A figure's number ("13.60" and "13.6" are one), or its text when it is none."""
    try:
        return float(text)
    except ValueError:
        return text


def figures(sentence: str, *, with_years: bool = False) -> list[str]:
    """The figures of `sentence` ("30", "$1.2 billion", "12%", "thirty"); years only `with_years`."""
    out = [m.group().strip() for m in _FIGURE.finditer(sentence) if with_years or not YEAR.fullmatch(m.group())]
    return out + [m.group() for m in _NUMBER_WORD.finditer(sentence)]


def dates(sentence: str) -> list[str]:
    """Years, ISO and numeric dates, month names (with their day) and weekdays of `sentence`."""
    return [m.group() for pattern in (_ISO, YEAR, _MONTH, _WEEKDAY) for m in pattern.finditer(sentence)]


def answer_values(sentence: str, part: Part) -> list[Value]:
    """The values of the part's answer type in `sentence` that the question does not already give; [] for an
    untyped part ("what", "why", "how") or a sentence offering none."""
    kind = part.focus.answer_type
    asked = set(part.terms) | set(part.context_terms) | {t for c in part.constraints for t in c.terms}
    if kind == "person":
        # "Senator Mitch McConnell of Kentucky", "Kevin King and Timothy Weeks": each person of a run, apart.
        raw = [p for n in names(sentence) for p in ([n] if _PERSON.fullmatch(n) else _JOINED.split(n))
               if _PERSON.fullmatch(p)]
    elif kind in NAMED:
        raw = names(sentence)
    elif part.focus.wh == "how old":  # an age as ages are written: "48-year-old", "aged 55", "Assange, 47,"
        raw = ages(sentence)
    elif kind == "number":  # a figure beside the part's words: "30 ... jets", not a day of a month or a page count
        raw = sorted(answer_figures(" ".join([part.text, *part.context_terms, *part.described]), sentence))
        wanted = {*part.terms, *part.context_terms, *part.described}
        raw += [m.group() for m in _AMOUNT_WORDS.finditer(sentence)  # "hundreds of thousands", "a third", "half"
                if wanted & set(terms_of(sentence[:m.start()])[-WINDOW:] + terms_of(sentence[m.end():])[:WINDOW])]
        if part.focus.money:  # a sum: a currency sign or word, or millions and billions, stands with the figure
            raw = [v for v in raw if _with(_SUM, v, sentence)]
        elif part.focus.wh == "how many" and not _CURRENCY.fullmatch(part.focus.head or ""):
            # a count: not a price ("$9.99 a month") nor a share ("12%"), unless dollars are what is counted
            raw = [v for v in raw if not _with(_CURRENCY, v, sentence)]
    elif kind == "date":
        raw = dates(sentence)
    else:
        return []
    out: dict[frozenset[str], Value] = {}
    for text in raw:
        key = _key(text)
        if key <= asked or all(w in STOP_WORDS for w in text.lower().split()):
            continue  # the question's own words are not an answer to it
        if kind in NAMED and part.focus.head and stem(part.focus.head) in key and len(key) == 1:
            continue  # "Which company ..." is not answered by "Company"
        out.setdefault(key, Value(text, key))
    return list(out.values())


def same_value(a: Value, b: Value) -> bool:
    """Whether two values name the same thing: one's terms include the other's ("Kentucky" and "the Kentucky
    Wildcats"; "$12,500" and "12,500")."""
    return a.key <= b.key or b.key <= a.key
