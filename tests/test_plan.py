"""The planner through the real SDK against the loopback fake model: code-enforced plan shape, fallbacks, candidates."""
from __future__ import annotations

import html
import json
import re
import threading
from collections.abc import Callable
from typing import Any

from pipeline.core.schema import BudgetLimits, Plan, RunOptions, SubQuestion
from pipeline.research.prompts import load
from pipeline.research.steps.plan import PlanDraft, as_draft, make_plan, normalise
from tests.fakes.anthropic_api import FakeAnthropic, FakeReply, MessagesRequest, reply_json, reply_text
from tests.fakes.context import make_context

QUESTION = "Why did the most popular JavaScript framework drop TypeScript support in 2024?"


def sq(question: str, *, proxy: str | None = None, queries: list[str] | None = None, premise: bool = False,
       criterion: str = "A page states it.") -> dict[str, Any]:
    return {"question": question, "success_criterion": criterion, "proxy": proxy,
            "queries": queries if queries is not None else [question.lower()], "is_premise_check": premise}


def draft(*subs: dict[str, Any], premise: str = "No doubtful premise.") -> dict[str, Any]:
    return {"premise_analysis": premise, "sub_questions": list(subs)}


def planner_only(answer: Callable[[MessagesRequest], FakeReply]) -> Callable[[MessagesRequest], FakeReply]:
    """A brain answering planner requests with `answer`, and failing the test loudly on anything else."""

    def brain(req: MessagesRequest) -> FakeReply:
        assert "<max_sub_questions>" in req.user_texts[0], f"unexpected request: {req.user_texts[0][:200]}"
        return answer(req)

    return brain


GOOD = draft(
    sq("Which JavaScript framework has the most GitHub stars in 2024?", proxy="most GitHub stars",
       queries=["javascript framework github stars 2024", "  JavaScript  framework GitHub stars 2024 ", "",
                "most starred js framework", "react vue angular stars", "a fifth query"],
       criterion="A page states the GitHub star counts of the main frameworks with the date of the count."),
    sq("Did the framework with the most GitHub stars drop TypeScript support in 2024?", queries=["", "  "],
       premise=True),
    premise="The question assumes the framework dropped TypeScript support, which may be false.",
)


def test_plan_has_proxy_premise_check_first_and_clean_queries() -> None:
    with FakeAnthropic(planner_only(lambda r: reply_json(GOOD))) as fake:
        ctx = make_context(fake)
        plan = make_plan(QUESTION, ctx, RunOptions())
        [req] = fake.message_requests
    assert not plan.fallback and plan.not_researched == []
    premise, stars = plan.sub_questions
    # The premise check is moved first and, having no usable query, searches its own text.
    assert premise.id == "Q1" and premise.is_premise_check
    assert premise.queries == ["Did the framework with the most GitHub stars drop TypeScript support in 2024?"]
    assert stars.id == "Q2" and stars.proxy == "most GitHub stars" and not stars.is_premise_check
    # Whitespace and case duplicates and empty queries are dropped; at most three are kept.
    assert stars.queries == ["javascript framework github stars 2024", "most starred js framework",
                             "react vue angular stars"]
    assert stars.success_criterion.startswith("A page states the GitHub star counts")
    # The request: lead model, static system prompt, the fixed user format, a strict output schema.
    assert req.model == ctx.lead_model
    assert req.system_text == load("planner")
    assert req.last_user_text == (f"<question>{html.escape(QUESTION, quote=False)}</question>\n"
                                  "<max_sub_questions>4</max_sub_questions>")
    assert req.output_schema is not None and req.output_schema["additionalProperties"] is False
    steps = [e.payload for e in ctx.events.of("step")]  # type: ignore[attr-defined]
    assert [(s["name"], s["status"]) for s in steps] == [("plan", "started"), ("plan", "finished")]
    assert steps[-1]["fallback"] is False and steps[-1]["sub_questions"] == 2


def test_system_prompt_is_identical_for_every_question_and_escapes_the_question() -> None:
    with FakeAnthropic(planner_only(lambda r: reply_json(GOOD))) as fake:
        ctx = make_context(fake)
        make_plan("Is A < B & C?", ctx, RunOptions(max_sub_questions=2))
        make_plan("Something else entirely", ctx, RunOptions())
        first, second = fake.message_requests
    assert first.recorded.field_bytes("system") == second.recorded.field_bytes("system")
    assert first.last_user_text == "<question>Is A &lt; B &amp; C?</question>\n<max_sub_questions>2</max_sub_questions>"


def test_twelve_sub_questions_are_cut_to_the_maximum_and_the_rest_reported() -> None:
    twelve = draft(*(sq(f"Sub-question number {i}?") for i in range(1, 13)))
    with FakeAnthropic(planner_only(lambda r: reply_json(twelve))) as fake:
        plan = make_plan(QUESTION, make_context(fake), RunOptions(max_sub_questions=4))
    assert [s.id for s in plan.sub_questions] == ["Q1", "Q2", "Q3", "Q4"]
    assert [s.question for s in plan.sub_questions] == [f"Sub-question number {i}?" for i in range(1, 5)]
    assert plan.not_researched == [f"Sub-question number {i}?" for i in range(5, 13)]
    assert not plan.fallback


def test_a_premise_check_late_in_a_long_plan_survives_the_cut() -> None:
    subs = [sq(f"Part {i}?") for i in range(1, 7)] + [sq("Did it really happen?", premise=True)]
    with FakeAnthropic(planner_only(lambda r: reply_json(draft(*subs)))) as fake:
        plan = make_plan(QUESTION, make_context(fake), RunOptions(max_sub_questions=3))
    assert [s.question for s in plan.sub_questions] == ["Did it really happen?", "Part 1?", "Part 2?"]
    assert plan.not_researched == ["Part 3?", "Part 4?", "Part 5?", "Part 6?"]


def fallback(question: str) -> Plan:
    return Plan(sub_questions=[SubQuestion(id="Q1", question=question, queries=[question])], fallback=True)


def test_malformed_plan_twice_falls_back_to_the_question() -> None:
    with FakeAnthropic(planner_only(lambda r: reply_text('{"sub_questions": [ this is not json'))) as fake:
        ctx = make_context(fake)
        plan = make_plan(QUESTION, ctx, RunOptions())
        assert fake.count() == 2  # the first reply and the one repair attempt
    assert plan == fallback(QUESTION)
    finished = ctx.events.of("step")[-1].payload  # type: ignore[attr-defined]
    assert finished["fallback"] is True and "malformed" in finished["errors"][0]


def test_empty_or_blank_plan_falls_back() -> None:
    blank = draft(sq("   ", queries=["x"]))
    for answer in (draft(), blank):
        with FakeAnthropic(planner_only(lambda r, a=answer: reply_json(a))) as fake:
            assert make_plan(QUESTION, make_context(fake), RunOptions()) == fallback(QUESTION)


def test_budget_refusal_falls_back_without_calling_the_model() -> None:
    with FakeAnthropic(planner_only(lambda r: reply_json(GOOD))) as fake:
        # One model call with a 30% reserve leaves research none.
        ctx = make_context(fake, limits=BudgetLimits(model_calls=1))
        plan = make_plan(QUESTION, ctx, RunOptions())
        assert fake.count() == 0
    assert plan == fallback(QUESTION)
    assert "budget" in ctx.events.of("step")[-1].payload["errors"][0]  # type: ignore[attr-defined]


# -- candidates -----------------------------------------------------------------------------------
WEAK = draft(sq("What is the best JavaScript framework?"))
MEDIUM = draft(sq("Which JavaScript framework has the most GitHub stars?", proxy="most GitHub stars",
                  queries=["javascript framework github stars", "most starred javascript framework"]))
BEST = GOOD


def judge_score(plan: dict[str, Any]) -> int:
    """How the fake evaluator scores a plan: by what it contains (proxy, premise check)."""
    subs = plan["sub_questions"]
    has_proxy = any(s["proxy"] for s in subs)
    has_premise = any(s["is_premise_check"] for s in subs)
    return 5 if has_proxy and has_premise else 3 if has_proxy else 1


class CandidateBrain:
    """Hands out the given drafts in arrival order (parallel callers get different ones) and scores plans by content."""

    def __init__(self, *drafts: dict[str, Any] | None):
        self.drafts = list(drafts)
        self.served = 0
        self.judged: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, req: MessagesRequest) -> FakeReply:
        text = req.last_user_text
        if len(req.messages) > 1:  # the repair request after a malformed draft: malformed again
            return reply_text("still not JSON")
        if "<max_sub_questions>" in text:
            with self.lock:
                d = self.drafts[self.served % len(self.drafts)]
                self.served += 1
            return reply_text("a plan, but not JSON") if d is None else reply_json(d)
        m = re.fullmatch(r"<question>(.*?)</question>\n<plan>(.*)</plan>", text, re.S)
        assert m, f"unexpected request: {text[:200]}"
        plan = json.loads(html.unescape(m.group(2)))
        with self.lock:
            self.judged.append(plan)
        score = judge_score(plan)
        return reply_json({"analysis": f"Proxy and premise reviewed; band {score}.", "score": score})


def test_three_candidates_keep_the_best_scored_plan() -> None:
    brain = CandidateBrain(WEAK, BEST, MEDIUM)
    with FakeAnthropic(brain) as fake:
        ctx = make_context(fake)
        plan = make_plan(QUESTION, ctx, RunOptions(plan_candidates=3))
        judge_requests = [r for r in fake.message_requests if "<plan>" in r.last_user_text]
    assert brain.served == 3 and len(brain.judged) == 3
    assert plan == make_plan_from(BEST)
    assert plan.sub_questions[0].is_premise_check and plan.sub_questions[1].proxy == "most GitHub stars"
    assert sorted(ctx.events.of("step")[-1].payload["scores"]) == [1, 3, 5]  # type: ignore[attr-defined]
    # Each judged plan is the plan as it would run (premise check first, queries cleaned), in the draft format.
    assert sorted(json.dumps(p, sort_keys=True) for p in brain.judged) == \
        sorted(json.dumps(as_draft(d["premise_analysis"], make_plan_from(d)).model_dump(), sort_keys=True)
               for d in (WEAK, BEST, MEDIUM))
    assert {r.system_text for r in judge_requests} == {load("plan_judge")}
    assert all(r.model == ctx.lead_model for r in judge_requests)


def make_plan_from(d: dict[str, Any]) -> Plan:
    plan = normalise(PlanDraft.model_validate(d), 4)
    assert plan is not None
    return plan


def test_identical_candidates_are_not_judged() -> None:
    brain = CandidateBrain(MEDIUM)
    with FakeAnthropic(brain) as fake:
        plan = make_plan(QUESTION, make_context(fake), RunOptions(plan_candidates=3))
    assert brain.served == 3 and brain.judged == []
    assert plan == make_plan_from(MEDIUM)


def test_a_failed_candidate_is_skipped_and_the_others_compete() -> None:
    brain = CandidateBrain(None, MEDIUM, BEST)  # whichever candidate is served first gets a malformed draft
    with FakeAnthropic(brain) as fake:
        ctx = make_context(fake)
        plan = make_plan(QUESTION, ctx, RunOptions(plan_candidates=3))
    finished = ctx.events.of("step")[-1].payload  # type: ignore[attr-defined]
    assert finished["drafts"] == 2 and len(finished["errors"]) == 1 and "malformed" in finished["errors"][0]
    assert len(brain.judged) == 2
    assert plan == make_plan_from(BEST)
