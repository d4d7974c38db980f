"""The planner: the lead model turns the question into checkable sub-questions; code enforces the plan's shape.

With `plan_candidates` > 1, N drafts are written in parallel and an evaluator scores each (analysis before
score, anchored 1..5 bands); the best wins, ties going to the earliest draft. Identical drafts are scored once.
Anything malformed, empty or refused by the budget falls back to the question itself: planning never crashes.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel, Field

from pipeline.core.budget import Phase
from pipeline.core.event_types import StepEvent
from pipeline.core.ids import SUB_QUESTION
from pipeline.core.schema import Plan, Problem, RunOptions, SubQuestion
from pipeline.models.base import LLMError
from pipeline.research.context import RunContext
from pipeline.research.prompts import load
from pipeline.research.steps import tags

MAX_QUERIES = 3
PLAN_TOKENS = 3000
SCORE_TOKENS = 1500
STEP = "plan"


class DraftSubQuestion(BaseModel):
    """One sub-question as the planner writes it (ids are assigned by code)."""

    question: str = Field(description="Self-contained sub-question naming its entities, place and period.")
    success_criterion: str = Field(description="What a page must state for this sub-question to count as answered.")
    proxy: str | None = Field(description="The checkable proxy chosen for a vague term, or null when none is needed.")
    queries: list[str] = Field(description="2 or 3 distinct web-search queries, keywords only.")
    is_premise_check: bool = Field(description="True only for the sub-question that tests a doubtful premise.")


class PlanDraft(BaseModel):
    """The planner's structured output."""

    premise_analysis: str = Field(description="Whether the question presupposes something possibly false, and why.")
    sub_questions: list[DraftSubQuestion]


class PlanScore(BaseModel):
    """The plan evaluator's structured output: the analysis is written before the score."""

    analysis: str = Field(description="Criterion-by-criterion assessment, written before choosing the score.")
    score: int = Field(ge=1, le=5, description="1..5 on the anchored bands of the instructions.")


def fallback_plan(question: str) -> Plan:
    """The plan used when no usable plan came back: research the question itself."""
    return Plan(sub_questions=[SubQuestion(id=f"{SUB_QUESTION}1", question=question, queries=[question])],
                fallback=True)


def make_plan(question: str, ctx: RunContext, options: RunOptions, problems: list[Problem] | None = None) -> Plan:
    """The research plan for `question`: Q1..Qn, at most max_sub_questions, or the fallback plan.

    A planner or plan judge that failed is appended to `problems`, with its cause.
    """
    n = options.plan_candidates
    problems = problems if problems is not None else []
    ctx.events.emit(StepEvent(name=STEP, status="started", candidates=n))
    drafts, errors = _drafts(question, ctx, options.max_sub_questions, n)
    normalised = [(d.premise_analysis, normalise(d, options.max_sub_questions)) for d in drafts]
    usable = [(why, plan) for why, plan in normalised if plan is not None]
    scores: list[int | None] = []
    if not usable:
        plan = fallback_plan(question)
        cause = "; ".join(dict.fromkeys(errors)) or "no draft had a usable sub-question"
        problems.append(Problem(kind="plan_fallback", step=STEP, message=(
            f"the planner failed ({cause}), so the question was researched as a whole")))
    elif len(usable) == 1:
        plan = usable[0][1]
    else:
        # The evaluator sees each plan as it would run (cut, queries cleaned), in the planner's own format.
        shown = [as_draft(why, p) for why, p in usable]
        best, scores, judge_errors = _best(question, shown, ctx)
        plan = usable[best][1]
        if judge_errors:
            problems.append(Problem(kind="plan_judge_unavailable", step=STEP, message=(
                f"the plan judge failed ({'; '.join(dict.fromkeys(judge_errors))}), so of {len(usable)} drafts the "
                "best-scored one that could be rated (or the first) was kept")))
    ctx.events.emit(StepEvent(
        name=STEP, status="finished", fallback=plan.fallback, sub_questions=len(plan.sub_questions),
        not_researched=len(plan.not_researched), drafts=len(usable), scores=scores, errors=errors,
    ))
    return plan


def normalise(draft: PlanDraft, limit: int) -> Plan | None:
    """The draft as a Plan under the code-enforced rules, or None when it has no usable sub-question."""
    kept = [sq for sq in draft.sub_questions if _clean(sq.question)]
    # Premise checks go first, so a cut can never drop the test of a false premise.
    kept.sort(key=lambda sq: not sq.is_premise_check)
    if not kept:
        return None
    subs = []
    for i, sq in enumerate(kept[:limit], start=1):
        text = _clean(sq.question)
        subs.append(SubQuestion(
            id=f"{SUB_QUESTION}{i}", question=text, success_criterion=_clean(sq.success_criterion),
            proxy=_clean(sq.proxy or "") or None, queries=_queries(sq.queries) or [text],
            is_premise_check=sq.is_premise_check,
        ))
    return Plan(sub_questions=subs, not_researched=[_clean(sq.question) for sq in kept[limit:]])


def as_draft(premise_analysis: str, plan: Plan) -> PlanDraft:
    """A normalised plan back in the planner's format (what the evaluator reads)."""
    return PlanDraft(premise_analysis=premise_analysis, sub_questions=[
        DraftSubQuestion(**sq.model_dump(exclude={"id"})) for sq in plan.sub_questions])


def _clean(text: str) -> str:
    return " ".join(text.split())


def _queries(raw: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for q in raw:
        q = _clean(q)
        if q and q.casefold() not in seen:
            seen.add(q.casefold())
            out.append(q)
    return out[:MAX_QUERIES]


def _drafts(question: str, ctx: RunContext, limit: int, n: int) -> tuple[list[PlanDraft], list[str]]:
    """Up to `n` drafts in candidate order (failed ones left out), and the error messages of the failures."""
    user = (f"<question>{tags.text(question)}</question>\n"
            f"<max_sub_questions>{limit}</max_sub_questions>")

    def one(i: int) -> PlanDraft | LLMError:
        try:
            return ctx.llm.structured(model=ctx.lead_model, system=load("planner"), messages=user, output=PlanDraft,
                                      max_tokens=PLAN_TOKENS, phase=Phase.RESEARCH, purpose=f"planner:{i}",
                                      cache=False)
        except LLMError as e:
            return e

    if n == 1:
        results = [one(0)]
    else:
        with ThreadPoolExecutor(max_workers=min(n, 4), thread_name_prefix="planner") as pool:
            results = list(pool.map(one, range(n)))
    drafts = [r for r in results if isinstance(r, PlanDraft)]
    return drafts, [f"{r.kind}: {r.message}" for r in results if isinstance(r, LLMError)]


def _best(question: str, drafts: list[PlanDraft], ctx: RunContext) -> tuple[int, list[int | None], list[str]]:
    """The index of the highest-scored draft (ties, and an unavailable evaluator: the earliest), every score, and
    the evaluator's error messages."""
    unique: dict[str, int] = {}
    for i, d in enumerate(drafts):
        unique.setdefault(d.model_dump_json(), i)
    first_of = [unique[d.model_dump_json()] for d in drafts]
    todo = sorted(set(first_of))
    if len(todo) == 1:  # identical drafts: nothing to choose between
        return 0, [], []
    errors: list[str] = []

    def score(i: int) -> int | None:
        user = (f"<question>{tags.text(question)}</question>\n"
                f"<plan>{tags.text(drafts[i].model_dump_json(indent=2))}</plan>")
        try:
            return ctx.llm.structured(model=ctx.lead_model, system=load("plan_judge"), messages=user,
                                      output=PlanScore, max_tokens=SCORE_TOKENS, phase=Phase.RESEARCH,
                                      purpose=f"plan_judge:{i}", cache=False).score
        except LLMError as e:
            errors.append(f"{e.kind}: {e.message}")
            return None

    with ThreadPoolExecutor(max_workers=min(len(todo), 4), thread_name_prefix="plan_judge") as pool:
        by_draft = dict(zip(todo, pool.map(score, todo), strict=True))
    scores = [by_draft[first_of[i]] for i in range(len(drafts))]
    return max(range(len(drafts)), key=lambda i: (scores[i] or 0, -i)), scores, errors
