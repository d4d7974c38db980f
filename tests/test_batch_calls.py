"""Batched model calls (RunOptions.batch_calls): the support judge, the sentence judge and the analyst take several
items per call, name what each verdict or finding is about, and fall back to one item per call for what a reply
leaves out; through the real SDK against the loopback fake."""
from __future__ import annotations

import json
import re
from typing import Any

import pytest

from pipeline.core.schema import Finding, Plan, RunOptions
from pipeline.research.context import RunContext
from pipeline.research.prompts import load
from pipeline.research.steps.analyse import BATCH_PAGES, propose_findings
from pipeline.research.steps.checks import Evidence
from pipeline.research.steps.review import review
from pipeline.research.steps.support import BATCH_SIZE, batches, judge_support
from tests.fakes.anthropic_api import FakeAnthropic, MessagesRequest, reply_json
from tests.fakes.context import make_context
from tests.fakes.research_brain import ResearchBrain
from tests.test_analyse import Q1, add_page

FACTS = [f"Fact number {n} says the Acme Pro plan costs {n + 40} dollars per month." for n in range(1, 9)]
PAGE = "Acme Cloud pricing.\n\n" + " ".join(FACTS)
QUESTIONS = {"Q1": Q1.question}


def purposes(ctx: RunContext, prefix: str) -> list[str]:
    """The purposes of the model requests of this run that start with `prefix`, in the order they were sent."""
    return [e.payload["purpose"] for e in ctx.events.of("model_request")  # type: ignore[attr-defined]
            if e.payload["purpose"].startswith(prefix)]


def recorded(ctx: RunContext, n: int, *, wrong: set[int] = frozenset()) -> list[Finding]:  # type: ignore[assignment]
    """`n` findings of one page for Q1; those in `wrong` claim a figure their quote does not give."""
    sid = add_page(ctx, "acme", PAGE)
    out = []
    for i in range(n):
        claim = f"The Acme Pro plan costs {999 if i in wrong else i + 41} dollars per month."
        f = ctx.notebook.add_finding(source=sid, claim=claim, quote=FACTS[i], sub_question="Q1")
        assert isinstance(f, Finding)
        out.append(f)
    return out


# -- the support judge ----------------------------------------------------------------------------------------------
def test_batched_support_judge_rates_every_finding_in_a_few_calls_cut_in_id_order() -> None:
    with FakeAnthropic(ResearchBrain()) as fake:
        ctx = make_context(fake)
        findings = recorded(ctx, 8, wrong={2, 7})
        problems = judge_support(ctx, list(reversed(findings)), QUESTIONS, batch=True)
        requests = [r for r in fake.message_requests if r.system_text == load("support_judge_batch")]
    assert problems == []
    assert sorted(purposes(ctx, "support_judge")) == ["support_judge:F1,F2,F3,F4,F5,F6", "support_judge:F7,F8"]
    assert len(fake.message_requests) == 2 and len(requests) == 2
    support = {f.id: f.support for f in ctx.notebook.findings()}
    assert support == {f"F{i}": "unsupported" if i in (3, 8) else "supported" for i in range(1, 9)}
    # The sub-question is said once per call, each finding names it and carries its own claim and quote.
    first = next(r.last_user_text for r in requests if 'id="F1"' in r.last_user_text)
    assert first.count("<sub_question") == 1 and first.count('sub_question="Q1"') == BATCH_SIZE
    assert first.count("<claim>") == first.count("<quote source=") == BATCH_SIZE


def test_a_finding_the_batch_reply_leaves_out_is_asked_about_alone() -> None:
    def partial(req: MessagesRequest) -> Any:
        said = json.loads(ResearchBrain()(req).content[0]["text"])
        said["verdicts"] = [v for v in said["verdicts"] if v["id"] != "F2"] + [
            {"id": "F99", "analysis": "not asked", "verdict": "unsupported", "answers_question": True}]
        return reply_json(said)

    with FakeAnthropic(ResearchBrain()) as fake:
        fake.fault(lambda r: "<finding id=" in r.last_user_text, kind="reply", reply=partial, times=None)
        ctx = make_context(fake)
        findings = recorded(ctx, 3, wrong={1})
        problems = judge_support(ctx, findings, QUESTIONS, batch=True)
    assert problems == []
    assert purposes(ctx, "support_judge") == ["support_judge:F1,F2,F3", "support_judge:F2"]
    assert {f.id: f.support for f in ctx.notebook.findings()} == {
        "F1": "supported", "F2": "unsupported", "F3": "supported"}


def test_a_batch_reply_that_fails_its_format_twice_is_judged_one_finding_at_a_time() -> None:
    with FakeAnthropic(ResearchBrain()) as fake:
        fake.fault(lambda r: "<finding id=" in r.user_texts[0], kind="reply", reply=reply_json({"no": 1}),
                   times=None)
        ctx = make_context(fake)
        findings = recorded(ctx, 3, wrong={0})
        problems = judge_support(ctx, findings, QUESTIONS, batch=True)
    assert problems == []
    asked = purposes(ctx, "support_judge")
    assert asked[:2] == ["support_judge:F1,F2,F3", "support_judge:F1,F2,F3:repair"]
    assert sorted(asked[2:]) == ["support_judge:F1", "support_judge:F2", "support_judge:F3"]
    assert {f.id: f.support for f in ctx.notebook.findings()} == {
        "F1": "unsupported", "F2": "supported", "F3": "supported"}


def test_an_outage_fails_the_batch_at_once_and_leaves_its_findings_unrated() -> None:
    with FakeAnthropic(ResearchBrain()) as fake:
        fake.fault(lambda r: "<finding id=" in r.last_user_text, status=500, times=None)
        ctx = make_context(fake)
        findings = recorded(ctx, 3)
        problems = judge_support(ctx, findings, QUESTIONS, batch=True)
        sent = len(fake.message_requests)
    assert sent == 2  # the call and the SDK's one retry; no finding was then asked about alone
    [problem] = problems
    assert problem.kind == "judge_unavailable" and "F1, F2, F3" in problem.message
    assert {f.support for f in ctx.notebook.findings()} == {"unknown"}


def test_batches_are_the_same_whatever_order_the_findings_arrive_in() -> None:
    def fake_finding(fid: str) -> Finding:
        return Finding(id=fid, source="S1", claim="c", quote="q", start=0, end=1)

    ids = ["F10", "F2", "F1", "F9", "F3", "F11", "F4", "F5", "F6", "F7", "F8"]
    got = [[f.id for f in b] for b in batches(fake_finding(i) for i in ids)]
    assert got == [["F1", "F2", "F3", "F4", "F5", "F6"], ["F7", "F8", "F9", "F10", "F11"]]


# -- the sentence judge ---------------------------------------------------------------------------------------------
def strict_about_cheapest(req: MessagesRequest) -> Any:
    """The batched sentence judge of ResearchBrain, which also finds "cheapest" in no quote."""
    said = json.loads(ResearchBrain()(req).content[0]["text"])
    text = dict(re.findall(r'<sentence id="([^"]+)">(.*?)</sentence>', req.last_user_text, re.S))
    for v in said["verdicts"]:
        if "cheapest" in text[v["id"]]:
            v["verdict"] = "unsupported"
    return reply_json(said)


def sentences_of(findings: list[Finding], odd: int) -> str:
    """A report body of one sentence per finding, each citing it; sentence `odd` also says what no quote says."""
    return "\n\n".join(f"The plan costs {i + 41} dollars per month{' and is the cheapest' * (i == odd)} [{f.id}]."
                        for i, f in enumerate(findings))


def test_batched_sentence_judge_rates_each_sentence_by_its_id() -> None:
    with FakeAnthropic(ResearchBrain()) as fake:
        fake.fault(lambda r: "<sentences>" in r.last_user_text, kind="reply", reply=strict_about_cheapest,
                   times=None)
        ctx = make_context(fake)
        findings = recorded(ctx, 8)
        evidence = Evidence(findings=findings, sources=ctx.notebook.sources())
        problems = review(sentences_of(findings, 3), evidence, ctx, batch=True)
        requests = [r for r in fake.message_requests if r.system_text == load("sentence_judge_batch")]
    assert [p.kind for p in problems] == ["judge_unsupported"] and "[F4]" in problems[0].sentence
    assert len(fake.message_requests) == 2 and len(requests) == 2
    first = next(r.last_user_text for r in requests if "[F1]" in r.last_user_text)
    assert first.count("<sentence id=") == BATCH_SIZE and first.count("<quote id=") == BATCH_SIZE
    assert re.findall(r'<quote id="(F\d+)">', first) == [f"F{i}" for i in range(1, BATCH_SIZE + 1)]


def test_a_sentence_the_batch_reply_leaves_out_is_judged_alone() -> None:
    def partial(req: MessagesRequest) -> Any:
        said = json.loads(strict_about_cheapest(req).content[0]["text"])
        return reply_json({"verdicts": [v for v in said["verdicts"] if v["id"] != "2"]})

    with FakeAnthropic(ResearchBrain()) as fake:
        fake.fault(lambda r: "<sentences>" in r.last_user_text, kind="reply", reply=partial, times=None)
        fake.fault(lambda r: "<sentence>" in r.last_user_text, kind="reply", times=None,
                   reply=reply_json({"analysis": "cheapest is in no quote", "verdict": "unsupported"}))
        ctx = make_context(fake)
        findings = recorded(ctx, 3)
        body = sentences_of(findings, 1)
        problems = review(body, Evidence(findings=findings, sources=ctx.notebook.sources()), ctx, batch=True)
        alone = [r.last_user_text for r in fake.message_requests if r.system_text == load("sentence_judge")]
    assert [p.kind for p in problems] == ["judge_unsupported"] and "[F2]" in problems[0].sentence
    assert len(alone) == 1 and alone[0].startswith("<sentence>The plan costs 42 dollars per month and is the")


# -- the analyst ------------------------------------------------------------------------------------------------------
def pages(ctx: RunContext, n: int) -> list[str]:
    return [add_page(ctx, f"site{i}", f"Updated in March.\n\n{FACTS[i]} Support is open on weekdays.")
            for i in range(n)]


def test_batched_analyst_reads_a_sub_questions_pages_in_one_call_and_each_finding_names_its_page() -> None:
    with FakeAnthropic(ResearchBrain()) as fake:
        ctx = make_context(fake)
        sids = pages(ctx, BATCH_PAGES + 1)
        problems = propose_findings(Plan(sub_questions=[Q1]), {"Q1": sids}, ctx, RunOptions(batch_calls=True))
    assert problems == []
    assert sorted(purposes(ctx, "analyst")) == sorted([f"analyst:Q1:{sids[-1]}", "analyst:Q1:" + "+".join(sids[:-1])])
    by_source = {f.source: f.quote for f in ctx.notebook.findings()}
    assert set(by_source) == set(sids) and all(by_source[s] == FACTS[i] for i, s in enumerate(sids))


def test_a_finding_that_names_the_wrong_page_is_verified_against_the_page_it_names() -> None:
    def misnamed(req: MessagesRequest) -> Any:
        said = json.loads(ResearchBrain()(req).content[0]["text"])
        for f in said["findings"]:
            f["source"] = "S1"  # every quote said to be from the first page
        return reply_json(said)

    with FakeAnthropic(ResearchBrain()) as fake:
        fake.fault(lambda r: r.system_text == load("analyst_batch"), kind="reply", reply=misnamed, times=None)
        ctx = make_context(fake)
        sids = pages(ctx, 3)
        propose_findings(Plan(sub_questions=[Q1]), {"Q1": sids}, ctx, RunOptions(batch_calls=True))
    assert [(f.source, f.quote) for f in ctx.notebook.findings()] == [("S1", FACTS[0])]
    assert sorted(r.quote for r in ctx.notebook.rejected()) == sorted(FACTS[1:3])


def test_a_batched_analyst_reply_that_fails_twice_falls_back_to_code_on_each_page() -> None:
    with FakeAnthropic(ResearchBrain()) as fake:
        fake.fault(lambda r: r.system_text == load("analyst_batch"), kind="reply", reply=reply_json({"x": 1}),
                   times=None)
        ctx = make_context(fake)
        sids = pages(ctx, 2)
        problems = propose_findings(Plan(sub_questions=[Q1]), {"Q1": sids}, ctx, RunOptions(batch_calls=True))
    assert [p.kind for p in problems] == ["analyst_fallback", "analyst_fallback"]
    assert {f.source for f in ctx.notebook.findings()} == set(sids)
    assert all(f.selected_by_code for f in ctx.notebook.findings())


@pytest.mark.parametrize("batch", [None, False])
def test_unbatched_runs_keep_one_call_per_page_and_per_finding(batch: bool | None) -> None:
    with FakeAnthropic(ResearchBrain()) as fake:
        ctx = make_context(fake)
        sids = pages(ctx, 3)
        propose_findings(Plan(sub_questions=[Q1]), {"Q1": sids}, ctx, RunOptions(batch_calls=batch))
        judge_support(ctx, ctx.notebook.findings(), QUESTIONS)
    assert sorted(purposes(ctx, "analyst")) == [f"analyst:Q1:{s}" for s in sids]
    assert all(re.fullmatch(r"support_judge:F\d+", p) for p in purposes(ctx, "support_judge"))
