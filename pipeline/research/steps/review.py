"""The reviewer: code checks plus a per-sentence judge, and the write -> review -> revise loop."""
from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

from pydantic import BaseModel, Field

from pipeline.core.budget import Phase
from pipeline.core.event_types import StepEvent
from pipeline.core.ids import FINDING
from pipeline.core.schema import Conflict, Problem
from pipeline.models.base import LLMError
from pipeline.research.context import MODEL_FANOUT, RunContext
from pipeline.research.prompts import load
from pipeline.research.steps import tags
from pipeline.research.steps.checks import URL, Evidence, check_report, cited_ids, sentences
from pipeline.research.steps.defang import defang
from pipeline.research.steps.write import (
    fallback_report,
    no_evidence_report,
    sources_section,
    usable_findings,
    write_report,
)

JUDGE_MAX_TOKENS = 800
# The writer cannot fix these: sending them back would spend a round on nothing.
UNFIXABLE = frozenset({"judge_unavailable", "writer_unavailable"})


class Verdict(BaseModel):
    """The sentence judge's answer: its reasoning first, then the verdict."""

    analysis: str = Field(description="Each fact of the sentence looked up in the quotes, before the verdict.")
    verdict: Literal["supported", "partial", "unsupported"]


class ReviewOutcome(BaseModel):
    """The final report (body + Sources), what is still wrong with it, and how many revision rounds ran."""

    markdown: str
    problems: list[Problem]
    rounds_used: int


def judge_message(sentence: str, evidence: Evidence) -> str | None:
    """The sentence judge's user message, or None when the sentence cites no finding."""
    findings = {f.id: f for f in evidence.findings}
    calcs = {c.id: c for c in evidence.calculations}
    quotes = []
    for i in dict.fromkeys(cited_ids(sentence)):
        if i in findings:
            quotes.append(f'<quote id="{i}">{tags.text(findings[i].quote)}</quote>')
        elif i in calcs:
            quotes.append(f'<quote id="{i}">{tags.text(f"{calcs[i].expression} = {calcs[i].result}")}</quote>')
    if not any(i.startswith(FINDING) and i in findings for i in cited_ids(sentence)):
        return None
    return "\n".join([f"<sentence>{tags.text(sentence)}</sentence>", "<quotes>", *quotes, "</quotes>"])


def review(markdown: str, evidence: Evidence, ctx: RunContext, *,
           verdicts: dict[str, Verdict] | None = None) -> list[Problem]:
    """Code checks, then a judge per sentence the code passed; `verdicts` caches judgements across rounds."""
    problems = check_report(markdown, evidence)
    flagged = {p.sentence for p in problems}
    asks = {s: m for s in dict.fromkeys(sentences(markdown))
            if s not in flagged and (m := judge_message(s, evidence)) is not None}
    cache = verdicts if verdicts is not None else {}
    todo = [(s, m) for s, m in asks.items() if m not in cache]
    if todo:
        with ThreadPoolExecutor(max_workers=min(MODEL_FANOUT, len(todo))) as pool:
            results = list(pool.map(lambda sm: _judge(sm[1], ctx), todo))
        for (s, m), result in zip(todo, results, strict=True):
            if isinstance(result, Verdict):
                cache[m] = result
            else:
                problems.append(Problem(kind="judge_unavailable", step="review", sentence=s, message=(
                    f"This sentence could not be checked against its quotes ({result.message}); "
                    "read its sources before relying on it.")))
    for s, m in asks.items():
        v = cache.get(m)
        if v is not None and v.verdict == "unsupported":
            problems.append(Problem(kind="judge_unsupported", step="review", sentence=s, message=(
                f"The cited quotes do not support this sentence: {' '.join(v.analysis.split())[:400]} "
                "Rewrite it to say only what the quotes say, or delete it.")))
    return problems


def _judge(message: str, ctx: RunContext) -> Verdict | LLMError:
    try:
        return ctx.llm.structured(model=ctx.worker_model, system=load("sentence_judge"), messages=message,
                                  output=Verdict, max_tokens=JUDGE_MAX_TOKENS, phase=Phase.SYNTHESIS,
                                  purpose=f"sentence_judge:{hashlib.sha256(message.encode()).hexdigest()[:12]}")
    except LLMError as e:
        return e


def write_and_review(question: str, evidence: Evidence, conflicts: list[Conflict], ctx: RunContext,
                     rounds: int) -> ReviewOutcome:
    """Draft, review, and revise at most `rounds` times; the best draft is returned with what is still wrong."""
    if not usable_findings(evidence):
        ctx.events.emit(StepEvent(name="write", status="started", round=0))
        body = no_evidence_report(question, evidence)
        ctx.events.emit(StepEvent(name="write", status="finished", round=0, no_evidence=True))
        return ReviewOutcome(markdown=final_report(body, evidence), problems=check_report(body, evidence),
                             rounds_used=0)
    cache: dict[str, Verdict] = {}
    ctx.events.emit(StepEvent(name="write", status="started", round=0))
    try:
        body = write_report(question, evidence, conflicts, ctx)
    except LLMError as e:
        body = fallback_report(question, evidence)
        ctx.events.emit(StepEvent(name="write", status="finished", round=0, fallback=True))
        problems = [Problem(kind="writer_unavailable", step="write", message=(
            f"The writer model failed ({e.message}); this report only lists the verified findings and gaps."))]
        return ReviewOutcome(markdown=final_report(body, evidence),
                             problems=problems + review(body, evidence, ctx, verdicts=cache), rounds_used=0)
    ctx.events.emit(StepEvent(name="write", status="finished", round=0))
    problems = _reviewed(body, evidence, ctx, cache, 0)
    best = (body, problems)
    used = 0
    while used < rounds and (fixable := [p for p in problems if p.kind not in UNFIXABLE]):
        used += 1
        ctx.stats.bump("review_rounds")
        ctx.events.emit(StepEvent(name="write", status="started", round=used))
        try:
            body = write_report(question, evidence, conflicts, ctx, draft=body, problems=fixable)
        except LLMError as e:
            ctx.events.emit(StepEvent(name="write", status="finished", round=used, failed=True))
            best = (best[0], [*best[1], Problem(kind="writer_unavailable", step="write", message=(
                f"The revision could not be written ({e.message}); the problems above remain in the report."))])
            break
        ctx.events.emit(StepEvent(name="write", status="finished", round=used))
        problems = _reviewed(body, evidence, ctx, cache, used)
        if len(problems) <= len(best[1]):
            best = (body, problems)
    return ReviewOutcome(markdown=final_report(best[0], evidence), problems=best[1], rounds_used=used)


def _reviewed(body: str, evidence: Evidence, ctx: RunContext, cache: dict[str, Verdict],
              round_no: int) -> list[Problem]:
    ctx.events.emit(StepEvent(name="review", status="started", round=round_no))
    problems = review(body, evidence, ctx, verdicts=cache)
    ctx.events.emit(StepEvent(name="review", status="finished", round=round_no, problems=len(problems)))
    return problems


def final_report(body: str, evidence: Evidence) -> str:
    """The report body, with only fetched pages left linked (steps/defang.py), and the Sources section that code
    builds from the cited findings."""
    allowed = [u for s in evidence.sources for u in (s.url, s.final_url)]
    allowed += [u for text in (evidence.question, *evidence.gaps) for u in URL.findall(text)]
    return f"{defang(body, allowed).rstrip()}\n\n{sources_section(body, evidence)}"
