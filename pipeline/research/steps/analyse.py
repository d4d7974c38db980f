"""The analyst: proposes findings from fetched pages (fixed mode), has a fresh-context judge rate each finding's
support (both modes), and hands on what survives with the gaps and conflicts found in code.

Decisions: a finding the judge could not rate (support "unknown") is passed on as evidence but flagged low
confidence, and it answers its sub-question for gap purposes (a judge outage must not turn every sub-question
into a "gap" while the report still cites its findings); the outage itself is reported as a Problem.
Gaps are the researched sub-questions without a passed-on finding; the orchestrator adds plan.not_researched.
When the analyst's reply for a page fails its schema twice (the reply and its repair), code selects that page's
sentences instead (the extractive selector), marks those findings selected_by_code, and the run names it.
"""
from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel, Field

from pipeline.core.budget import Phase
from pipeline.core.event_types import FindingEvent, RejectedEvent, StepEvent
from pipeline.core.schema import (
    Confidence,
    Conflict,
    Finding,
    Plan,
    Problem,
    RejectedFinding,
    RunOptions,
    SubQuestion,
)
from pipeline.core.untrusted import wrap
from pipeline.models.base import LLMError, OutputInvalid
from pipeline.research.context import MODEL_FANOUT, RunContext
from pipeline.research.extractive.select import PageText, select_sentences
from pipeline.research.prompts import load
from pipeline.research.steps import tags
from pipeline.research.steps.conflicts import answer_conflicts, find_conflicts
from pipeline.research.steps.support import Breaker, problems_by_cause
from pipeline.research.tools.page_view import focus_excerpt

STEP = "analyse"
MAX_FINDINGS_PER_SOURCE = 6
FALLBACK_PICKS = 2  # sentences code selects from a page the analyst failed on
ANALYST_TOKENS = 2000
BATCH_PAGES = 3  # pages per batched analyst call: the default pages_per_sub_question, so one call per sub-question


class ProposedFinding(BaseModel):
    claim: str = Field(description="One sentence stating exactly what the quote shows.")
    quote: str = Field(description="One or two consecutive sentences copied character for character from the page.")
    confidence: Confidence


class ProposedFindings(BaseModel):
    """The analyst's structured output; an empty list when the page has nothing relevant."""

    findings: list[ProposedFinding]


class SourcedFinding(ProposedFinding):
    source: str = Field(description='The id of the page the quote was copied from, as in its source="..." marker.')


class SourcedFindings(BaseModel):
    """The batched analyst's structured output: findings from any of the pages; an empty list when none helps."""

    findings: list[SourcedFinding]


class Analysis(BaseModel):
    """What the writer may use: passed-on findings, named gaps, conflicts, and the problems met on the way."""

    findings: list[Finding] = Field(default_factory=list)
    gaps: list[str] = Field(default_factory=list)
    conflicts: list[Conflict] = Field(default_factory=list)
    problems: list[Problem] = Field(default_factory=list)


def analyst_message(sq: SubQuestion, source_id: str, title: str | None, page_text: str) -> str:
    """The analyst's user message for one source: the sub-question and the relevant part of the page, wrapped."""
    focus = " ".join([sq.question, sq.success_criterion, sq.proxy or "", *sq.queries])
    excerpt, _cut = focus_excerpt(page_text, focus)
    return (f'<sub_question id="{tags.attr(sq.id)}">{tags.text(sq.question)}</sub_question>\n'
            f"<success_criterion>{tags.text(sq.success_criterion)}</success_criterion>\n"
            + wrap(excerpt, source_id=source_id, title=title))


def batch_message(sq: SubQuestion, pages: list[tuple[str, str | None, str]]) -> str:
    """The batched analyst's user message: the sub-question, then the relevant part of each (id, title, text) page."""
    focus = " ".join([sq.question, sq.success_criterion, sq.proxy or "", *sq.queries])
    return "\n".join([f'<sub_question id="{tags.attr(sq.id)}">{tags.text(sq.question)}</sub_question>',
                      f"<success_criterion>{tags.text(sq.success_criterion)}</success_criterion>",
                      *(wrap(focus_excerpt(text, focus)[0], source_id=sid, title=title) for sid, title, text in pages)])


def propose_findings(plan: Plan, sources_by_sq: dict[str, list[str]], ctx: RunContext,
                     options: RunOptions | None = None, *,
                     judge: Callable[[list[Finding]], None] | None = None) -> list[Problem]:
    """Fixed mode: one analyst call per (sub-question, source), or with `options.batch_calls` per sub-question and
    up to BATCH_PAGES of its sources; every proposal goes through notebook.add_finding.

    Returns the problems met (a source the analyst could not read). Each call's new findings are handed to
    `judge` (SupportJudging.submit) as they arrive.
    """
    per_call = BATCH_PAGES if options is not None and options.batch_calls else 1
    units = [(sq, sids[i:i + per_call]) for sq in plan.sub_questions
             for sids in [sources_by_sq.get(sq.id, [])] for i in range(0, len(sids), per_call)]
    ctx.events.emit(StepEvent(name=STEP, status="started", part="propose",
                              pairs=sum(len(sids) for _sq, sids in units)))
    counted: set[str] = set()
    lock = threading.Lock()
    breaker = Breaker()
    fallbacks: list[Problem] = []

    def keep(result: Finding | RejectedFinding) -> Finding | None:
        if isinstance(result, RejectedFinding):
            ctx.stats.bump("quotes_rejected")
            ctx.events.emit(RejectedEvent(source=result.source, reason=result.reason))
            return None
        with lock:  # the notebook returns the existing finding for a quote it already holds
            new = result.id not in counted
            counted.add(result.id)
        if new:
            ctx.stats.bump("findings_recorded")
            ctx.events.emit(FindingEvent(id=result.id, source=result.source, sub_question=result.sub_question))
        return result

    def one(unit: tuple[SubQuestion, list[str]]) -> LLMError | None:
        sq, sids = unit
        sources = [ctx.notebook.resolve_source(sid) for sid in sids]
        if any(s is None for s in sources):
            raise ValueError(f"{sids} are not all sources of this run; research_fixed returns only notebook ids")
        pages = [(s.id, s.title, ctx.notebook.text(s.id)) for s in sources if s is not None]
        if breaker.error is not None:
            return breaker.error
        try:
            proposed = _proposed(sq, pages, ctx)
        except OutputInvalid as e:
            for sid, title, _text in pages:
                kept = [f for f in (keep(r) for r in _selected_by_code(sq, sid, title, ctx)) if f]
                if judge is not None:
                    judge(kept)
                with lock:
                    fallbacks.append(_fallback_problem(sq, sid, e, kept))
            return None
        except LLMError as e:
            return breaker.trip(e)
        taken: Counter[str] = Counter()
        added = []
        for p in proposed:  # a finding naming a page outside this call is verified against the page it names
            source = p.source if isinstance(p, SourcedFinding) else pages[0][0]
            taken[source] += 1
            if taken[source] <= MAX_FINDINGS_PER_SOURCE:
                added.append(keep(ctx.notebook.add_finding(source=source, claim=p.claim, quote=p.quote,
                                                           sub_question=sq.id, confidence=p.confidence)))
        if judge is not None:
            judge([f for f in added if f is not None])
        return None

    with ThreadPoolExecutor(max_workers=max(1, min(MODEL_FANOUT, len(units))), thread_name_prefix="analyst") as pool:
        errors = list(pool.map(one, units))
    failures = [(f"{sid} for {sq.id}", e) for (sq, sids), e in zip(units, errors, strict=True) for sid in sids]
    problems = problems_by_cause("analyst_unavailable", "the analyst", failures,
                                 "these sources were not read, so they gave no findings")
    problems += sorted(fallbacks, key=lambda p: p.message)  # in a stable order, whichever thread came first
    ctx.events.emit(StepEvent(name=STEP, status="finished", part="propose", findings=len(counted),
                              problems=len(problems)))
    return problems


def _proposed(sq: SubQuestion, pages: list[tuple[str, str | None, str]],
              ctx: RunContext) -> list[ProposedFinding]:
    """The analyst's findings for `sq` from `pages`: one page with the one-page prompt, several with the batched."""
    if len(pages) == 1:
        sid, title, text = pages[0]
        return ctx.llm.structured(
            model=ctx.worker_model, system=load("analyst"), messages=analyst_message(sq, sid, title, text),
            output=ProposedFindings, max_tokens=ANALYST_TOKENS, phase=Phase.SYNTHESIS,
            purpose=f"analyst:{sq.id}:{sid}", cache=False).findings
    return list(ctx.llm.structured(
        model=ctx.worker_model, system=load("analyst_batch"), messages=batch_message(sq, pages),
        output=SourcedFindings, max_tokens=ANALYST_TOKENS * len(pages), phase=Phase.SYNTHESIS,
        purpose=f"analyst:{sq.id}:{'+'.join(sid for sid, _t, _x in pages)}", cache=False).findings)


def _selected_by_code(sq: SubQuestion, source_id: str, title: str | None,
                      ctx: RunContext) -> list[Finding | RejectedFinding]:
    """The page's best sentences for `sq`, chosen by the extractive selector and recorded as verbatim findings."""
    page = PageText(source_id=source_id, title=title, text=ctx.notebook.text(source_id))
    picks = select_sentences(sq.question, [page], k=FALLBACK_PICKS, per_page=FALLBACK_PICKS,
                             extra_terms=[*sq.queries, *([sq.proxy] if sq.proxy else [])])
    return [ctx.notebook.add_finding(source=source_id, claim=p.text, quote=p.text, sub_question=sq.id,
                                     confidence="medium", selected_by_code=True) for p in picks]


def _fallback_problem(sq: SubQuestion, source_id: str, error: LLMError, kept: list[Finding]) -> Problem:
    what = (f"code selected {len(kept)} sentence{'s' * (len(kept) != 1)} instead ({', '.join(f.id for f in kept)}, "
            "marked selected_by_code)" if kept else "code found no sentence of it that answers the sub-question")
    return Problem(kind="analyst_fallback", step=STEP, message=(
        f"the analyst's reply for {source_id} ({sq.id}) failed its format twice ({error.message.rstrip('. ')}); "
        f"{what}."))


def analyse(plan: Plan, ctx: RunContext, problems: list[Problem] | None = None) -> Analysis:
    """Passed-on findings (not "unsupported"; "unknown" flagged low confidence), gaps, conflicts; after judging.

    `problems` (from propose_findings and judge_support) are carried into Analysis.problems when given.
    """
    ctx.events.emit(StepEvent(name=STEP, status="started", part="analyse"))
    passed = [f.model_copy(update={"confidence": "low"}) if f.support == "unknown" else f
              for f in ctx.notebook.findings() if f.support != "unsupported"]
    answered = {f.sub_question for f in passed}
    gaps = [sq.question for sq in plan.sub_questions if sq.id not in answered]
    sources = ctx.notebook.sources()
    conflicts = find_conflicts(passed, sources)
    conflicts += answer_conflicts(plan, passed, sources, conflicts)
    ctx.events.emit(StepEvent(name=STEP, status="finished", part="analyse", findings=len(passed), gaps=len(gaps),
                              conflicts=len(conflicts)))
    return Analysis(findings=passed, gaps=gaps, conflicts=conflicts, problems=list(problems or []))
