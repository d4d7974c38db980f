"""Conflicts found in code: findings on the same sub-question, from different sources, making the same claim with
different figures."""
from __future__ import annotations

import re
from itertools import combinations

from pipeline.core.schema import Conflict, Finding, Source

_FIGURE = re.compile(r"[$€£¥]\s?\d[\d,]*(?:\.\d+)?|\d[\d,]*(?:\.\d+)?\s?(?:%|percent|per ?cent)|\d[\d,]*(?:\.\d+)?")
_WORD = re.compile(r"[a-z]{3,}")
_STOP = frozenset(["the", "and", "for", "with", "that", "this", "from", "are", "was", "were", "has", "have", "its",
                   "per", "into", "than", "about", "which"])
SIMILARITY = 0.5


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
