"""Conflicts found in code, in every mode: findings on the same sub-question, from different sources, that give
different answers of the sub-question's type (a name for "who", a date for "when", a figure for "how many"), make
the same claim with different figures, or tell one sentence with another name, figure or date in one place."""
from __future__ import annotations

import re
from difflib import SequenceMatcher
from itertools import combinations

from pipeline.core.schema import Conflict, Finding, Plan, Source
from pipeline.research.extractive.analysis import Part, analyse_part
from pipeline.research.extractive.answers import Value, answer_values, dates, figures, names, same_value
from pipeline.research.extractive.figures import disagree
from pipeline.research.extractive.terms import content_terms

_FIGURE = re.compile(r"[$€£¥]\s?\d[\d,]*(?:\.\d+)?|\d[\d,]*(?:\.\d+)?\s?(?:%|percent|per ?cent)|\d[\d,]*(?:\.\d+)?")
_WORD = re.compile(r"[a-z]{3,}")
_STOP = frozenset(["the", "and", "for", "with", "that", "this", "from", "are", "was", "were", "has", "have", "its",
                   "per", "into", "than", "about", "which"])
SIMILARITY = 0.5
# Words and single marks; a word keeps its inner apostrophes, dots, commas and hyphens ("U.S.", "1,200", "O'Neil").
_TOKEN = re.compile(r"\w+(?:['’.,-]\w+)*+|\S")
# Two tellings of one sentence share nearly all their words: a difference of at most VARIANT_SPAN words on each side,
# between quotes sharing VARIANT_SIMILARITY of their tokens, is one detail told two ways. Set by reading, not tuned;
# any similarity from 0.5 to 0.9 gives the same dev figures (`python -m pipeline bench counterfactual`).
VARIANT_SIMILARITY = 0.7
VARIANT_SPAN = 8
VARIANT_TOKENS = 400  # a cost bound: the comparison is quadratic in the tokens of the two quotes


def _figures(text: str) -> frozenset[str]:
    out = set()
    for m in _FIGURE.findall(text):
        digits = re.sub(r"[^\d.]", "", m.replace(",", "")).rstrip(".")
        if "." in digits:
            digits = digits.rstrip("0").rstrip(".")
        out.add(digits)
    return frozenset(out)


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _STOP)


def _similar(a: Finding, b: Finding) -> bool:
    wa, wb = _words(a.claim), _words(b.claim)
    return bool(wa and wb) and len(wa & wb) / len(wa | wb) >= SIMILARITY


def find_conflicts(findings: list[Finding], sources: list[Source]) -> list[Conflict]:
    """One Conflict per pair of same-topic findings whose figures differ; both sides are kept, with their dates."""
    dates = {s.id: s.published or "undated" for s in sources}
    conflicts: list[Conflict] = []
    for a, b in combinations(findings, 2):
        if a.sub_question != b.sub_question or a.source == b.source or not _similar(a, b):
            continue
        fa, fb = _figures(a.claim) | _figures(a.quote), _figures(b.claim) | _figures(b.quote)
        if fa and fb and fa.isdisjoint(fb):
            conflicts.append(conflict(a, b, dates))
    return conflicts


def conflict(a: Finding, b: Finding, dates: dict[str, str]) -> Conflict:
    """The Conflict of two findings, both quotes side by side with their sources' dates."""
    return Conflict(sub_question=a.sub_question, findings=[a.id, b.id],
                    description=(f"{a.id} ({a.source}, {dates.get(a.source, 'undated')}) says \"{a.quote}\"; "
                                 f"{b.id} ({b.source}, {dates.get(b.source, 'undated')}) says \"{b.quote}\"."))


def answer_conflicts(plan: Plan, findings: list[Finding], sources: list[Source], known: list[Conflict],
                     parts: dict[str, Part] | None = None) -> list[Conflict]:
    """Conflicts between quotes of different sources that answer one sub-question differently.

    For a figure ("how many", "how much") the figures standing beside the sub-question's words differ
    (research/extractive/figures.py). For a name, a title or a date, the first answer each quote offers
    (research/extractive/answers.py) is one the other quote never mentions: "Kentucky beat Iowa" and "Louisville beat
    Iowa" disagree, while "Kentucky beat Iowa" and "Coach Mark Stoops led Kentucky" do not. `parts` gives the analysed
    parts by sub-question id (extractive runs); otherwise each sub-question's text is analysed alone. A pair already
    in `known` is not repeated.
    """
    dates = {s.id: s.published or "undated" for s in sources}
    seen = {frozenset(c.findings) for c in known}
    questions = {sq.id: sq.question for sq in plan.sub_questions}
    analysed = {sq_id: (parts or {}).get(sq_id) or analyse_part(text) for sq_id, text in questions.items()}
    found: list[Conflict] = []
    for a, b in combinations(findings, 2):
        if (a.sub_question != b.sub_question or a.source == b.source or a.sub_question not in questions
                or frozenset((a.id, b.id)) in seen):
            continue
        part = analysed[a.sub_question]
        if part.focus.answer_type in ("number", "other"):
            differ = disagree(questions[a.sub_question], a.quote, b.quote)
        else:
            differ = _first_answers_differ(a.quote, b.quote, part)
        if differ or variants(a.quote, b.quote, part):
            found.append(conflict(a, b, dates))
            seen.add(frozenset((a.id, b.id)))
    return found


def _first_answers_differ(a: str, b: str, part: Part) -> bool:
    va, vb = answer_values(a, part), answer_values(b, part)
    if not va or not vb:
        return False
    return not _mentions(b, va[0], vb) and not _mentions(a, vb[0], va)


def _mentions(quote: str, value: Value, values: list[Value]) -> bool:
    """Whether `quote` (offering `values`) mentions `value`: as one of its values, or by all of its words."""
    if any(same_value(value, v) for v in values):
        return True
    return value.key <= set(content_terms(quote, stemmed=True))


def variants(a: str, b: str, part: Part) -> bool:
    """Whether two quotes tell one sentence with a different name, figure or date in one place ("... exclusive to
    Stadia, Tequila Works' Gylt" and "... Tequila Works' Rime"): a copy of a story changed in the detail asked for.
    A difference in the question's own words, or inside parentheses (an agency's "(AP)"), is not one."""
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    if max(len(ta), len(tb)) > VARIANT_TOKENS:
        return False
    matcher = SequenceMatcher(None, ta, tb, autojunk=False)
    if matcher.ratio() < VARIANT_SIMILARITY:
        return False
    asked = {*part.terms, *part.context_terms, *(t for c in part.constraints for t in c.terms)}
    terms_a, terms_b = set(content_terms(a, stemmed=True)), set(content_terms(b, stemmed=True))
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op != "replace" or i2 - i1 > VARIANT_SPAN or j2 - j1 > VARIANT_SPAN:
            continue
        if i1 > 0 and i2 < len(ta) and ta[i1 - 1] == "(" and ta[i2] == ")":
            continue
        side_a, side_b = " ".join(ta[i1:i2]), " ".join(tb[j1:j2])
        key_a = set(content_terms(side_a, stemmed=True)) - asked
        key_b = set(content_terms(side_b, stemmed=True)) - asked
        if key_a and key_b and not key_a <= terms_b and not key_b <= terms_a and _detail(side_a) and _detail(side_b):
            return True
    return False


def _detail(text: str) -> bool:
    """Whether `text` holds a name, a figure or a date."""
    return bool(names(text) or figures(text, with_years=True) or dates(text))
