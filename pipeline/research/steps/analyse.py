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
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Literal

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
from pipeline.research.tools.page_view import focus_excerpt

STEP = "analyse"
MAX_FINDINGS_PER_SOURCE = 6
FALLBACK_PICKS = 2  # sentences code selects from a page the analyst failed on
ANALYST_TOKENS = 2000
JUDGE_TOKENS = 600
# Failures of one request only (this reply or input was bad); any other kind (server down, budget spent, auth)
# would fail every remaining call the same way, so those are skipped and reported with the same cause.
_PER_REQUEST = frozenset({"malformed", "refusal", "context_window", "bad_request"})


class ProposedFinding(BaseModel):
    claim: str = Field(description="One sentence stating exactly what the quote shows.")
    quote: str = Field(description="One or two consecutive sentences copied character for character from the page.")
    confidence: Confidence


class ProposedFindings(BaseModel):
    """The analyst's structured output; an empty list when the page has nothing relevant."""

    findings: list[ProposedFinding]


class Verdict(BaseModel):
    """A judge's structured output: the analysis is written before the verdict."""

    analysis: str = Field(description="Claim and quote compared element by element, before the verdict.")
    verdict: Literal["supported", "partial", "unsupported"]
    # Defaults to True so verdicts recorded before this field existed still replay.
    answers_question: bool = Field(True, description=(
        "False when the claim does nothing to answer the sub-question (for example it answers a question the page "
        "itself asks); true when it answers it, part of it, or gives context needed to answer it."))


class Analysis(BaseModel):
    """What the writer may use: passed-on findings, named gaps, conflicts, and the problems met on the way."""

    findings: list[Finding] = Field(default_factory=list)
    gaps: list[str] = Field(default_factory=list)
    conflicts: list[Conflict] = Field(default_factory=list)
    problems: list[Problem] = Field(default_factory=list)


class _Breaker:
    """Remembers the first failure that means the model is unreachable, so later calls fail fast with it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.error: LLMError | None = None

    def trip(self, e: LLMError) -> LLMError:
        if e.kind not in _PER_REQUEST:
            with self._lock:
                self.error = self.error or e
        return e




def analyst_message(sq: SubQuestion, source_id: str, title: str | None, page_text: str) -> str:
    """The analyst's user message for one source: the sub-question and the relevant part of the page, wrapped."""
    focus = " ".join([sq.question, sq.success_criterion, sq.proxy or "", *sq.queries])
    excerpt, _cut = focus_excerpt(page_text, focus)
    return (f'<sub_question id="{tags.attr(sq.id)}">{tags.text(sq.question)}</sub_question>\n'
            f"<success_criterion>{tags.text(sq.success_criterion)}</success_criterion>\n"
            + wrap(excerpt, source_id=source_id, title=title))


def propose_findings(plan: Plan, sources_by_sq: dict[str, list[str]], ctx: RunContext,
                     options: RunOptions | None = None, *,
                     judge: Callable[[list[Finding]], None] | None = None) -> list[Problem]:
    """Fixed mode: one analyst call per (sub-question, source); every proposal goes through notebook.add_finding.

    Returns the problems met (a source the analyst could not read). Each source's new findings are handed to
    `judge` (SupportJudging.submit) as they arrive. `options` is accepted for the uniform step signature.
    """
    pairs = [(sq, sid) for sq in plan.sub_questions for sid in sources_by_sq.get(sq.id, [])]
    ctx.events.emit(StepEvent(name=STEP, status="started", part="propose", pairs=len(pairs)))
    counted: set[str] = set()
    lock = threading.Lock()
    breaker = _Breaker()
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

    def one(pair: tuple[SubQuestion, str]) -> LLMError | None:
        sq, sid = pair
        source = ctx.notebook.resolve_source(sid)
        if source is None:
            raise ValueError(f"{sid} is not a source of this run; research_fixed returns only notebook ids")
        if breaker.error is not None:
            return breaker.error
        try:
            proposed = ctx.llm.structured(
                model=ctx.worker_model, system=load("analyst"),
                messages=analyst_message(sq, source.id, source.title, ctx.notebook.text(source.id)),
                output=ProposedFindings, max_tokens=ANALYST_TOKENS, phase=Phase.SYNTHESIS,
                purpose=f"analyst:{sq.id}:{source.id}")
        except OutputInvalid as e:
            kept = [f for f in (keep(r) for r in _selected_by_code(sq, source.id, source.title, ctx)) if f]
            if judge is not None:
                judge(kept)
            with lock:
                fallbacks.append(_fallback_problem(sq, source.id, e, kept))
            return None
        except LLMError as e:
            return breaker.trip(e)
        added = [keep(ctx.notebook.add_finding(source=source.id, claim=p.claim, quote=p.quote, sub_question=sq.id,
                                               confidence=p.confidence))
                 for p in proposed.findings[:MAX_FINDINGS_PER_SOURCE]]
        if judge is not None:
            judge([f for f in added if f is not None])
        return None

    with ThreadPoolExecutor(max_workers=max(1, min(MODEL_FANOUT, len(pairs))), thread_name_prefix="analyst") as pool:
        errors = list(pool.map(one, pairs))
    failures = [(f"{sid} for {sq.id}", e) for (sq, sid), e in zip(pairs, errors, strict=True)]
    problems = _problems("analyst_unavailable", "the analyst", failures,
                         "these sources were not read, so they gave no findings")
    problems += sorted(fallbacks, key=lambda p: p.message)  # in a stable order, whichever thread came first
    ctx.events.emit(StepEvent(name=STEP, status="finished", part="propose", findings=len(counted),
                              problems=len(problems)))
    return problems


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


def judge_message(f: Finding, sub_question: str | None) -> str:
    """The support judge's user message: the sub-question the finding was recorded for, its claim and quote."""
    asked = f"<sub_question>{tags.text(sub_question)}</sub_question>\n" if sub_question else ""
    return (f"{asked}<claim>{tags.text(f.claim)}</claim>\n"
            f'<quote source="{tags.attr(f.source)}">{tags.text(f.quote)}</quote>')


class SupportJudging:
    """A fresh-context judge rates each finding handed to `submit` (once, when its support is "unknown"), in
    parallel and as it arrives, so judging overlaps the research that records the findings; `finish` waits for
    every verdict and returns the problems. When the judge cannot rate a finding, its support stays "unknown".

    `questions` (sub-question id -> text) lets the judge also check that the claim answers what was asked: a
    verbatim quote of a page's own question-and-answer is true to the page but no evidence for the run, so a
    claim judged not to answer its sub-question is set "unsupported" and never reaches the writer.
    """

    def __init__(self, ctx: RunContext, questions: Mapping[str, str] | None = None) -> None:
        self._ctx, self._questions = ctx, dict(questions or {})
        self._pool = ThreadPoolExecutor(max_workers=MODEL_FANOUT, thread_name_prefix="judge")
        self._lock = threading.Lock()
        self._asked: dict[str, Future[LLMError | None]] = {}
        self._breaker = _Breaker()
        self._off_topic: list[str] = []
        self._started = False

    def submit(self, findings: Iterable[Finding]) -> None:
        """Queue each finding not yet asked about whose support is unknown; the first call reports the start."""
        with self._lock:
            todo = list({f.id: f for f in findings if f.support == "unknown" and f.id not in self._asked}.values())
            if not self._started:
                self._started = True
                self._ctx.events.emit(StepEvent(name=STEP, status="started", part="judge", findings=len(todo)))
            for f in todo:
                self._asked[f.id] = self._pool.submit(self._one, f)

    def finish(self) -> list[Problem]:
        """Wait for every verdict; one problem per distinct cause of the findings left unrated."""
        self.submit([])  # reports the start when nothing was handed in
        self._pool.shutdown(wait=True)
        with self._lock:
            failures = [(fid, future.result()) for fid, future in self._asked.items()]
        problems = _problems("judge_unavailable", "the support judge", failures,
                             'their support is "unknown": they are passed on flagged low confidence')
        extra = {"off_topic": sorted(self._off_topic)} if self._off_topic else {}  # the key only when it says something
        self._ctx.events.emit(StepEvent.model_validate({"name": STEP, "status": "finished", "part": "judge",
                                                        "problems": len(problems), **extra}))
        return problems

    def abandon(self) -> None:
        """The run stopped before judging finished: drop what was not started, wait for what was."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _one(self, f: Finding) -> LLMError | None:
        if self._breaker.error is not None:
            return self._breaker.error
        user = judge_message(f, self._questions.get(f.sub_question or ""))
        try:
            verdict = self._ctx.llm.structured(
                model=self._ctx.worker_model, system=load("support_judge"), messages=user, output=Verdict,
                max_tokens=JUDGE_TOKENS, phase=Phase.SYNTHESIS, purpose=f"support_judge:{f.id}")
        except LLMError as e:
            return self._breaker.trip(e)
        if not verdict.answers_question:
            with self._lock:
                self._off_topic.append(f.id)
        self._ctx.notebook.set_support(f.id, verdict.verdict if verdict.answers_question else "unsupported")
        return None


def judge_support(ctx: RunContext, findings: list[Finding],
                  questions: Mapping[str, str] | None = None) -> list[Problem]:
    """Judge every finding of unknown support at once (SupportJudging) and return the problems."""
    judging = SupportJudging(ctx, questions)
    judging.submit(findings)
    return judging.finish()


def _problems(kind: str, who: str, failures: list[tuple[str, LLMError | None]], consequence: str) -> list[Problem]:
    """One Problem per distinct cause, naming what it affected (not one per call: an outage is one problem)."""
    by_cause: dict[str, list[str]] = {}
    for what, e in failures:
        if e is not None:
            by_cause.setdefault(e.message.rstrip(". "), []).append(what)
    return [Problem(kind=kind, step=STEP, message=f"{who} failed for {', '.join(whats)} ({cause}); {consequence}.")
            for cause, whats in by_cause.items()]


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
