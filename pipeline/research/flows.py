"""The order of the steps in each mode: with models (fixed or tools researcher) and extractive (no model at all)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pipeline.core.budget import Phase
from pipeline.core.schema import Plan, Problem, Report, RunOptions
from pipeline.models.base import LLMError
from pipeline.research.context import RunContext
from pipeline.research.steps.analyse import Analysis, analyse, propose_findings
from pipeline.research.steps.checks import Evidence, check_report
from pipeline.research.steps.extractive import (
    extractive_report,
    plan_by_code,
    select_findings,
    typed_conflicts,
    weak_parts,
)
from pipeline.research.steps.plan import make_plan
from pipeline.research.steps.research import FixedResearch, research_fixed
from pipeline.research.steps.review import final_report, write_and_review
from pipeline.research.steps.support import SupportJudging
from pipeline.research.steps.worker import research_tools, warm_workers
from pipeline.research.steps.write import NOT_RESEARCHED, no_evidence_report
from pipeline.research.tools.toolbox import TOOLS


class Step(Protocol):
    """Runs one named step, timing it and saving a checkpoint after it."""

    def __call__(self, name: str, fn: Callable[[], Any]) -> Any: ...


@dataclass
class SoFar:
    """What a run has produced so far; kept by the orchestrator even when a step raises."""

    plan: Plan | None = None
    analysis: Analysis | None = None
    report: Report = field(default_factory=Report)
    problems: list[Problem] = field(default_factory=list)


def _evidence(question: str, plan: Plan, analysis: Analysis, ctx: RunContext) -> Evidence:
    gaps = analysis.gaps + [NOT_RESEARCHED + q for q in plan.not_researched]
    return Evidence(findings=analysis.findings, sources=ctx.notebook.sources(), gaps=gaps,
                    calculations=ctx.calculations.all(), proxies=[sq.proxy for sq in plan.sub_questions if sq.proxy],
                    question=question)


class Tally(Protocol):
    """What the run saw fail: every search (an outage), or pages that could not be read."""

    def search_outage(self) -> str | None: ...

    def note(self) -> str | None: ...


def _with_unread_note(markdown: str, ctx: RunContext, tally: Tally) -> str:
    """A report resting on no source says why when searches failed or pages could not be read.

    The note is a quoted block: it reports on the run, it states nothing from a source, so it is not checked as a
    claim.
    """
    if (note := tally.note()) is not None and not ctx.notebook.sources():
        return markdown.rstrip() + "\n\n> " + note + "\n"
    return markdown


def _outage_problem(tally: Tally) -> list[Problem]:
    """A problem when no search worked: the report's gaps then say nothing about the question itself."""
    outage = tally.search_outage()
    return [] if outage is None else [Problem(kind="search_failed", step="research", message=outage)]


def model_flow(question: str, ctx: RunContext, options: RunOptions, step: Step, so_far: SoFar,
               tally: Tally) -> None:
    """plan (lead model) -> fixed or tools research -> support judge -> analyse -> write and review."""
    if options.mode == "tools" and (refused := _tools_refused(ctx)) is not None:
        so_far.problems.append(refused)
        return
    ctx.offered.add_text(question)
    warming = warm_workers(ctx) if options.mode == "tools" else None  # beside the plan: no round of its own
    so_far.plan = plan = step("plan", lambda: make_plan(question, ctx, options, so_far.problems))
    if warming is not None:
        warming.join()
    # Judges as findings arrive; batched, fixed mode judges once the analyst is done (no round of its own: the analyst's
    # calls are one wave), tools mode as before (its workers' later turns would otherwise wait on a round more).
    batch = bool(options.batch_calls)
    judging = SupportJudging(ctx, {sq.id: sq.question for sq in plan.sub_questions},
                             batch=batch and options.mode == "fixed")
    try:
        if options.mode == "fixed":
            by_sq = step("research", lambda: research_fixed(plan, ctx, options))
            so_far.problems += step("analyse", lambda: propose_findings(plan, by_sq, ctx, options,
                                                                        judge=judging.submit)) or []
        else:
            so_far.problems += step("research", lambda: research_tools(plan, ctx, options,
                                                                       judge=judging.submit)) or []
    except BaseException:
        judging.abandon()
        raise
    so_far.problems += _outage_problem(tally)
    judging.submit(ctx.notebook.findings())  # any finding not handed in as it was recorded
    so_far.problems += step("judge", judging.finish) or []
    so_far.analysis = analysis = analyse(plan, ctx)
    so_far.problems += analysis.problems
    evidence = _evidence(question, plan, analysis, ctx)
    if analysis.findings:
        outcome = step("write", lambda: write_and_review(question, evidence, analysis.conflicts, ctx,
                                                         options.review_rounds, batch=batch))
        markdown = outcome.markdown
        so_far.problems += outcome.problems
    else:
        markdown = _with_unread_note(no_evidence_report(question, evidence), ctx, tally)
    so_far.report = Report(markdown=markdown, gaps=evidence.gaps, conflicts=analysis.conflicts)


def _tools_refused(ctx: RunContext) -> Problem | None:
    """Why the worker model cannot run the tools researcher, asked before anything else is spent; else None.

    Only an endpoint without tool calling stops the run here; any other failure of the check (an outage, a rate
    limit) is recorded as a model_error and left to the steps, which retry and report it in their own terms.
    """
    try:
        ctx.llm.check_tools(model=ctx.worker_model, tools=TOOLS, phase=Phase.RESEARCH)
    except LLMError as e:
        if e.kind == "unsupported":
            return Problem(kind="tools_unsupported", step="plan",
                           message=f"the tools researcher cannot start: {e.message}")
    return None


def extractive_flow(question: str, ctx: RunContext, options: RunOptions, step: Step, so_far: SoFar,
                    tally: Tally) -> None:
    """plan by code -> fixed research -> more pages for the parts whose answer is weak -> sentences selected by code
    -> analyse -> template -> checks in code."""
    so_far.plan = plan = step("plan", lambda: plan_by_code(question))
    gathering: list[FixedResearch] = []  # the researcher, kept to read more pages later (a step's output is data)
    step("research", lambda: _gathered(plan, ctx, options, gathering))
    so_far.problems += _outage_problem(tally)
    if weak := weak_parts(question, plan, ctx):  # reading costs no model call: read on where the answer is weak
        step("read_more", lambda: gathering[0].read_more(weak))
    so_far.problems += step("analyse", lambda: select_findings(question, plan, ctx))
    analysis = analyse(plan, ctx)
    sources = ctx.notebook.sources()
    so_far.analysis = analysis = analysis.model_copy(update={"conflicts": analysis.conflicts + typed_conflicts(
        question, plan, analysis.findings, sources, analysis.conflicts)})
    so_far.problems += analysis.problems
    evidence = _evidence(question, plan, analysis, ctx)
    body = step("write", lambda: extractive_report(question, plan, evidence, analysis.conflicts))
    so_far.problems += step("review", lambda: check_report(body, evidence))
    markdown = final_report(body, evidence) if analysis.findings else _with_unread_note(body, ctx, tally)
    so_far.report = Report(markdown=markdown, gaps=evidence.gaps, conflicts=analysis.conflicts)


def _gathered(plan: Plan, ctx: RunContext, options: RunOptions, keep: list[FixedResearch]) -> dict[str, list[str]]:
    """Each sub-question's top results, fetched and registered (the sources by sub-question); the researcher is
    appended to `keep`."""
    keep.append(FixedResearch(plan, ctx, options))
    keep[0].fetch(options.pages_per_sub_question)
    return keep[0].finish()
