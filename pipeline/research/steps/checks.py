"""The reviewer's checks in code: every sentence cites, citations exist and are verified, numbers come from quotes."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipeline.core.ids import CALCULATION, CITATION, CITED_ID, GAP, gap_id
from pipeline.core.instructions import instruction_reason
from pipeline.core.schema import Calculation, Finding, Problem, Source
from pipeline.core.urls import url_key
from pipeline.research.extractive.terms import ABBREVIATIONS

_NUMBER = re.compile(r"(?<![\w.])[-−]?\d[\d,]*(?:\.\d+)?")
URL = re.compile(r"https?://[^\s)\]>\"']+", re.I)  # a URL in text, as the checks and the last pass see it
# The same abbreviations the extractive sentence splitter keeps whole, so a quote it picked is one sentence here.
_ABBREV = re.compile(r"\b(?:" + "|".join(sorted((re.escape(a) for a in ABBREVIATIONS), key=len, reverse=True))
                     + r")\.$", re.I)
_INITIAL = re.compile(r"(?:^|[\s(\"“])[A-Z]\.$")  # "Kevin D. Smith": an initial does not end the sentence
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
SOURCES_HEADING = re.compile(r"^#{1,6}\s*Sources\s*$", re.I | re.M)


@dataclass
class Evidence:
    """What the report may rest on: verified findings, their sources, named gaps and calculations."""

    findings: list[Finding]
    sources: list[Source]
    gaps: list[str] = field(default_factory=list)
    calculations: list[Calculation] = field(default_factory=list)
    proxies: list[str] = field(default_factory=list)  # "most popular -> most GitHub stars", shown in the label
    question: str = ""  # restating the question (or a gap) is not a claim, so its URLs are not "unfetched"

    def gap_ids(self) -> list[str]:
        return [gap_id(i) for i in range(1, len(self.gaps) + 1)]


def body_of(markdown: str) -> str:
    """The report without the code-appended Sources section."""
    m = SOURCES_HEADING.search(markdown)
    return markdown[: m.start()] if m else markdown


def sentences(markdown: str) -> list[str]:
    """Checkable sentences of the report body: headings, labels, rules and table borders are skipped."""
    out: list[str] = []
    for raw in body_of(markdown).splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ">", "---", "***", "___", "|-", "| -")) or is_label(line):
            continue
        line = _BULLET.sub("", line).strip("|").strip()
        out.extend(_split(line))
    return [s for s in out if re.search(r"[A-Za-z0-9]", CITATION.sub("", s))]


def is_label(line: str) -> bool:
    """Whether `line` is the machine-assisted label a report carries under its title (not a claim)."""
    plain = line.strip("*_ ").lower()
    return plain.startswith(("machine-assisted", "this report was machine-assisted", "machine assisted"))


def _split(line: str) -> list[str]:
    parts: list[str] = []
    buf = ""
    for piece in re.split(r"(?<=[.!?])\s+", line):
        lead = re.match(r"(?:\[[^\]]*\]\s*)+\.?", piece)
        if lead and parts and not buf:  # "Claim. [F1] Next claim" - the ids belong to the claim before
            parts[-1] = f"{parts[-1]} {lead.group(0).strip()}"
            piece = piece[lead.end():].strip()
            if not piece:
                continue
        buf = f"{buf} {piece}".strip() if buf else piece
        if _ABBREV.search(buf) or _INITIAL.search(buf):
            continue
        parts.append(buf)
        buf = ""
    if buf:
        parts.append(buf)
    return parts


def cited_ids(sentence: str) -> list[str]:
    return [i for group in CITATION.findall(sentence) for i in CITED_ID.findall(group)]


def numbers_in(text: str) -> set[str]:
    """The figures in `text`, normalised (no thousands separators, sign or trailing zeros) for comparison."""
    found = set()
    for n in _NUMBER.findall(text):
        n = n.replace(",", "").replace("−", "-").lstrip("-")
        if "." in n:
            n = n.rstrip("0").rstrip(".")
        found.add(n)
    return found


def check_report(markdown: str, evidence: Evidence) -> list[Problem]:
    """Every problem the code can prove, one Problem per fault, each naming the sentence."""
    findings = {f.id: f for f in evidence.findings}
    sources = {s.id: s for s in evidence.sources}
    calcs = {c.id: c for c in evidence.calculations}
    gaps = dict(zip(evidence.gap_ids(), evidence.gaps, strict=True))
    gap_ids = set(gaps)
    problems: list[Problem] = []
    mentioned_gaps: set[str] = set()

    def problem(kind: str, message: str, sentence: str) -> None:
        problems.append(Problem(kind=kind, message=message, step="review", sentence=sentence))

    for sentence in sentences(markdown):
        ids = cited_ids(sentence)
        if not ids:
            problem("uncited", "This sentence cites no finding; cite its [F#] or remove it.", sentence)
            continue
        allowed: set[str] = set()
        for i in ids:
            if i.startswith(GAP):
                if i in gap_ids:
                    mentioned_gaps.add(i)
                    allowed |= numbers_in(gaps[i])  # restating the unanswered question is not a claim
                else:
                    problem("unknown_citation", f"[{i}] is not a named gap.", sentence)
            elif i.startswith(CALCULATION):
                if i not in calcs:
                    problem("unknown_citation", f"[{i}] is not a recorded calculation.", sentence)
                else:
                    allowed |= numbers_in(calcs[i].result) | numbers_in(calcs[i].expression)
            elif i not in findings:
                problem("unknown_citation", f"[{i}] does not exist; cite only the findings you were given.", sentence)
            else:
                f = findings[i]
                if f.support == "unsupported":
                    problem("unverified_citation", f"[{i}] was judged unsupported by its quote; do not use it.",
                            sentence)
                allowed |= numbers_in(f.quote)
                src = sources.get(f.source)
                if src and src.published:
                    allowed |= numbers_in(src.published)
        claim_text = CITATION.sub(" ", URL.sub(" ", sentence))
        if not all(i.startswith(GAP) for i in ids) and (why := instruction_reason(claim_text.strip())) is not None:
            problem("instruction_in_report", f"This sentence reads as an instruction, not a finding ({why}); "
                                             "state only what the cited quotes show.", sentence)
        missing = sorted(numbers_in(claim_text) - allowed, key=lambda n: (len(n), n))
        if missing:
            problem("number_not_in_quote",
                    f"The number(s) {', '.join(missing)} appear in no quote this sentence cites; "
                    "use only figures from the quotes (or a cited calculation).", sentence)
    fetched = {url_key(u) for s in evidence.sources for u in (s.url, s.final_url)}
    asked = {url_key(u.rstrip(".,;:?")) for text in (evidence.question, *evidence.gaps) for u in URL.findall(text)}
    for url in URL.findall(body_of(markdown)):
        if url_key(url.rstrip(".,;:")) not in fetched | asked:
            problem("unfetched_url", f"{url} was not fetched in this run; remove it.", url)
    for gid, gap in zip(evidence.gap_ids(), evidence.gaps, strict=True):
        if gid not in mentioned_gaps:
            problem("gap_not_mentioned", f"Gap [{gid}] is not mentioned: say that no source answered: {gap}", gap)
    return problems
