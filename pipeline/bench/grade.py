"""Grading in code: one run against its suite question (RunGrade), and a suite's runs per mode (SuiteSummary)."""
from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pipeline.bench.suite import Split, SuiteQuestion
from pipeline.core.ids import CALCULATION, CITATION, FINDING, GAP
from pipeline.core.location import cite, locate
from pipeline.core.schema import Finding, RunResult, RunStatus, Source, TextLayout
from pipeline.core.urls import url_key
from pipeline.research.steps.checks import cited_ids, numbers_in, sentences

_URL = re.compile(r"https?://[^\s)\]>\"']+", re.I)
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_FOLD = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-",
                       "\u2212": "-", "\u00a0": " ", "\u00ad": None})

PageText = Callable[[Source], str | None]
DocLayout = Callable[[Source], TextLayout | None]  # a document's page starts and headings (None: not a document)
BASELINE: Literal["baseline"] = "baseline"
BASELINE_LABEL = "baseline (BM25 top 3)"
# What a grade is of: a run of one of the modes, or the reference baseline computed by the bench (bench/baseline.py).
Graded = Literal["extractive", "fixed", "tools", "baseline"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Expectation(_Model):
    """One expectation of the question, met or not, with the evidence for the verdict."""

    name: str
    passed: bool
    detail: str = ""


class RunGrade(_Model):
    """What code can check of one run; a share is None when there was nothing to measure it on."""

    question_id: str
    mode: Graded
    run_id: str
    repeat: int = 0
    split: Split = "dev"
    status: RunStatus
    citation_precision: float | None = None
    quotes_checked: int = 0
    quote_failures: list[str] = Field(default_factory=list)
    gold_page_recall: float | None = None
    answer_recall: float | None = None
    expectations: list[Expectation] = Field(default_factory=list)
    passed: bool = False
    sentences_cited: float | None = None
    numbers_in_quotes: float | None = None
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    wall_seconds: float = 0.0

    def failed(self) -> list[str]:
        return [e.name for e in self.expectations if not e.passed]


def normalise(text: str) -> str:
    """Case, curly quotes, dashes, spaces and thousands separators folded, for comparing terms with quotes."""
    text = _THOUSANDS.sub("", text.translate(_FOLD).lower())
    return " ".join(text.split())


def contains_term(text: str, term: str) -> bool:
    """True when `term` occurs in `text` as whole words and numbers ("30" is not in "300" nor in "1.30")."""
    t = normalise(term)
    if not t:
        return False
    head = r"(?<![\w.])" if t[0].isalnum() else ""
    tail = r"(?!\w|[.,]\d)" if t[-1].isalnum() else ""
    return re.search(head + re.escape(t) + tail, normalise(text)) is not None


def check_quotes(findings: Sequence[Finding], sources: Sequence[Source], page_text: PageText) -> list[str]:
    """Why each finding's quote is not text[start:end] of its source's stored text (whose sha256 must match)."""
    by_id = {s.id: s for s in sources}
    texts: dict[str, str | None] = {}
    failures: list[str] = []
    for f in findings:
        src = by_id.get(f.source)
        if src is None:
            failures.append(f"{f.id}: its source {f.source} is not among the run's sources")
            continue
        if src.id not in texts:
            texts[src.id] = page_text(src)
        text = texts[src.id]
        if text is None:
            failures.append(f"{f.id}: no stored text for {src.id} ({src.url})")
        elif hashlib.sha256(text.encode("utf-8")).hexdigest() != src.sha256:
            failures.append(f"{f.id}: the stored text of {src.id} is not the text fetched (sha256 differs)")
        elif text[f.start:f.end] != f.quote:
            failures.append(f"{f.id}: the quote is not at [{f.start}:{f.end}] of {src.id}")
    return failures


def check_locations(findings: Sequence[Finding], sources: Sequence[Source], layout_of: DocLayout) -> list[str]:
    """Why each document finding's recorded place is not where its offsets are in the document (its page computed
    again from the document's page starts, and its heading)."""
    by_id = {s.id: s for s in sources}
    failures = []
    for f in findings:
        src = by_id.get(f.source)
        layout = layout_of(src) if src is not None and src.kind == "document" else None
        if layout is None:
            continue
        want, got = locate(layout, f.start, f.end), f.location
        if (want and want.page, want and want.heading) != (got and got.page, got and got.heading):
            failures.append(f"{f.id}: cites {cite(got) or 'no place'} but its quote is at {cite(want) or 'no place'} "
                            f"of {src.path if src else f.source}")
    return failures


def _answer_page(question: SuiteQuestion, cited: Sequence[Finding], misplaced: set[str]) -> Expectation:
    """A cited finding that quotes an answer term sits on the question's page, and records that page."""
    terms = [t for group in question.answer_terms for t in group]
    quoting = [f for f in cited if any(contains_term(f.quote, t) for t in terms)]
    right = [f.id for f in quoting if f.id not in misplaced and f.location and f.location.page == question.answer_page]
    if right:
        return Expectation(name="answer_page", passed=True, detail=f"{', '.join(right)} on p. {question.answer_page}")
    pages = sorted({f"{f.id} p. {f.location.page if f.location else '?'}" for f in quoting})
    return Expectation(name="answer_page", passed=False, detail=(
        f"expected p. {question.answer_page}; " + (f"cited: {', '.join(pages)}" if pages else
                                                   "no cited finding quotes an answer term")))


def grade_run(question: SuiteQuestion, result: RunResult, page_text: PageText, *, repeat: int = 0,
              max_sub_questions: int | None = None, mode: Graded | None = None,
              layout_of: DocLayout | None = None) -> RunGrade:
    """Grade `result` against `question`; page_text(source) is the source's stored text (run store or corpus),
    layout_of(source) a document's page starts and headings, against which each cited place is checked."""
    report_sentences = sentences(result.report.markdown)
    cited = {i for s in report_sentences for i in cited_ids(s)}
    findings = {f.id: f for f in result.findings}
    cited_findings = [findings[i] for i in sorted(cited) if i.startswith(FINDING) and i in findings]
    failures = check_quotes(cited_findings, result.sources, page_text)
    quoted = [f for f in cited_findings if not any(m.startswith(f"{f.id}:") for m in failures)]
    misplaced = check_locations(quoted, result.sources, layout_of) if layout_of is not None else []
    failures += misplaced
    cap = question.max_sub_questions if question.max_sub_questions is not None else max_sub_questions

    expectations: list[Expectation] = []
    if question.answer_terms:
        matched = [any(contains_term(f.quote, t) for f in cited_findings for t in group)
                   for group in question.answer_terms]
        answer_recall: float | None = sum(matched) / len(matched)
        missing = [" | ".join(g) for g, ok in zip(question.answer_terms, matched, strict=True) if not ok]
        expectations.append(Expectation(name="answer", passed=all(matched),
                                        detail=f"not quoted by a cited finding: {missing}" if missing else ""))
    else:
        answer_recall = None
    if question.answer_page is not None:
        expectations.append(_answer_page(question, cited_findings, {m.split(":", 1)[0] for m in misplaced}))
    if cited_findings:
        expectations.append(Expectation(name="citations_verified", passed=not failures, detail="; ".join(failures)))
    if question.expect_gap:
        expectations.append(_gap_named(question, result, report_sentences, cited))
    if question.expect_nothing_stated:
        stated = sorted(f.id for f in cited_findings)
        expectations.append(Expectation(name="nothing_stated", passed=not stated,
                                        detail=f"cites {stated}" if stated else "no finding cited"))
    if question.expect_conflict:
        expectations.append(_conflict_shown(question.expect_conflict, result))
    if question.wrong_answers:
        expectations.append(_wrong_not_silent(question, cited_findings, result))
    if question.expect_premise_check:
        checks = [q.id for q in (result.plan.sub_questions if result.plan else []) if q.is_premise_check]
        expectations.append(Expectation(name="premise_checked", passed=bool(checks),
                                        detail=f"premise checks: {checks}" if checks else "no premise-check step"))
    if question.expect_proxy:
        proxies = [q.proxy for q in (result.plan.sub_questions if result.plan else []) if q.proxy]
        expectations.append(Expectation(name="proxy_named", passed=bool(proxies),
                                        detail=f"proxies: {proxies}" if proxies else "no sub-question names a proxy"))
    if question.expect_calculation:
        calcs = {c.id for c in result.calculations}
        used = sorted(calcs & cited)
        expectations.append(Expectation(
            name="calculation_used", passed=bool(used),
            detail=f"cited: {used}" if used else f"{len(calcs)} calculation(s), none cited in the report"))
    if cap is not None:
        n = len(result.plan.sub_questions) if result.plan else 0
        expectations.append(Expectation(name="sub_questions_capped", passed=result.plan is not None and n <= cap,
                                        detail=f"{n} sub-question(s), cap {cap}" if result.plan else "no plan"))

    gold = {url_key(u) for u in question.gold_pages}
    fetched = {url_key(u) for s in result.sources for u in (s.url, s.final_url)}
    u = result.usage
    return RunGrade(
        question_id=question.id, mode=mode or result.mode, run_id=result.run_id, repeat=repeat,
        split=question.split, status=result.status,
        citation_precision=(1 - len(failures) / len(cited_findings)) if cited_findings else None,
        quotes_checked=len(cited_findings), quote_failures=failures,
        gold_page_recall=len(gold & fetched) / len(gold) if gold else None,
        answer_recall=answer_recall, expectations=expectations,
        passed=result.status != "failed" and all(e.passed for e in expectations),
        sentences_cited=(sum(1 for s in report_sentences if cited_ids(s)) / len(report_sentences)
                         if report_sentences else None),
        numbers_in_quotes=_numbers_in_quotes(result, report_sentences),
        cost_usd=u.cost_usd, input_tokens=u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens,
        output_tokens=u.output_tokens, model_calls=u.model_calls, wall_seconds=result.timings.get("total", 0.0),
    )


def _claim(sentence: str) -> str:
    return CITATION.sub(" ", _URL.sub(" ", sentence))


def _allowed_numbers(result: RunResult, ids: Sequence[str]) -> set[str]:
    """The figures a sentence citing `ids` may state: from the cited quotes, calculations, gaps and source dates."""
    findings = {f.id: f for f in result.findings}
    sources = {s.id: s for s in result.sources}
    calcs = {c.id: c for c in result.calculations}
    gaps = {f"{GAP}{n}": g for n, g in enumerate(result.report.gaps, start=1)}
    allowed: set[str] = set()
    for i in ids:
        if i in findings:
            allowed |= numbers_in(findings[i].quote)
            src = sources.get(findings[i].source)
            if src is not None and src.published:
                allowed |= numbers_in(src.published)
        elif i.startswith(CALCULATION) and i in calcs:
            allowed |= numbers_in(calcs[i].expression) | numbers_in(calcs[i].result)
        elif i in gaps:
            allowed |= numbers_in(gaps[i])
    return allowed


def _numbers_in_quotes(result: RunResult, report_sentences: list[str]) -> float | None:
    stated = found = 0
    for s in report_sentences:
        numbers = numbers_in(_claim(s))
        allowed = _allowed_numbers(result, cited_ids(s))
        stated += len(numbers)
        found += len(numbers & allowed)
    return found / stated if stated else None


def _gap_named(question: SuiteQuestion, result: RunResult, report_sentences: list[str], cited: set[str]) -> Expectation:
    """A gap is cited in the report, and no sentence states a figure beyond the question's, dates and gap texts."""
    gap_ids = {f"{GAP}{n}" for n in range(1, len(result.report.gaps) + 1)}
    named = sorted(gap_ids & cited)
    excused = numbers_in(question.question) | numbers_in(result.question)
    published = {s.id: s.published or "" for s in result.sources}
    figures: set[str] = set()
    for s in report_sentences:
        ids = cited_ids(s)
        dates = {n for f in result.findings if f.id in ids for n in numbers_in(published.get(f.source, ""))}
        gap_text = {n for i in ids if i in gap_ids for n in numbers_in(result.report.gaps[int(i[1:]) - 1])}
        figures |= numbers_in(_claim(s)) - excused - dates - gap_text
    if not named:
        return Expectation(name="gap_named", passed=False,
                           detail=f"{len(result.report.gaps)} gap(s) recorded, none cited in the report")
    if figures:
        return Expectation(name="gap_named", passed=False,
                           detail=f"gap {named} named, but the report states figures: {sorted(figures)}")
    return Expectation(name="gap_named", passed=True, detail=f"gap {named} named, no figure stated")


def _conflict_shown(values: list[str], result: RunResult) -> Expectation:
    """Some reported conflict has, for every expected value, a finding of its own whose quote carries it."""
    findings = {f.id: f for f in result.findings}
    for c in result.report.conflicts:
        quotes = [findings[i].quote for i in c.findings if i in findings]
        carriers = [{j for j, q in enumerate(quotes) if contains_term(q, v)} for v in values]
        if all(carriers) and _distinct(carriers):
            return Expectation(name="conflict_shown", passed=True, detail=f"conflict over {c.findings}")
    return Expectation(name="conflict_shown", passed=False,
                       detail=f"no reported conflict ({len(result.report.conflicts)}) shows all of {values}")


def _wrong_not_silent(question: SuiteQuestion, cited: Sequence[Finding], result: RunResult) -> Expectation:
    """A cited quote that states a wrong answer sits in a reported conflict beside a finding stating another value."""
    wrong = [t for group in question.wrong_answers for t in group]
    stating = sorted(f.id for f in cited if any(contains_term(f.quote, t) for t in wrong))
    if not stating:
        return Expectation(name="wrong_not_silent", passed=True, detail="no cited quote states a wrong answer")
    findings = {f.id: f for f in result.findings}
    for c in result.report.conflicts:
        sides = [findings[i] for i in c.findings if i in findings]
        if any(f.id in stating for f in sides) and any(f.id not in stating for f in sides):
            return Expectation(name="wrong_not_silent", passed=True, detail=f"{stating} shown in conflict {c.findings}")
    return Expectation(name="wrong_not_silent", passed=False,
                       detail=f"{stating} state a wrong answer and no reported conflict sets another value beside it")


def _distinct(carriers: list[set[int]]) -> bool:
    """Each value can be given its own finding (a matching of values to findings), so one quote is not both sides."""
    def assign(k: int, used: frozenset[int]) -> bool:
        return k == len(carriers) or any(assign(k + 1, used | {j}) for j in carriers[k] - used)
    return assign(0, frozenset())
