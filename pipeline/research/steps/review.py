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
from pipeline.research.steps.support import PER_REQUEST
from pipeline.research.steps.write import (
    fallback_report,
    no_evidence_report,
    sources_section,
    usable_findings,
    write_report,
)

JUDGE_MAX_TOKENS = 800
BATCH_SIZE = 6  # sentences per batched call: few enough that each gets its own fact-by-fact look-up
# The writer cannot fix these: sending them back would spend a round on nothing.
UNFIXABLE = frozenset({"judge_unavailable", "writer_unavailable"})


class Verdict(BaseModel):
    """The sentence judge's answer: its reasoning first, then the verdict."""

    analysis: str = Field(description="Each fact of the sentence looked up in the quotes, before the verdict.")
    verdict: Literal["supported", "partial", "unsupported"]


class SentenceVerdict(Verdict):
    """One sentence's verdict in a batched reply."""

    id: str = Field(description='The id of the sentence judged, as given in <sentence id="...">.')


class SentenceVerdicts(BaseModel):
    """The batched sentence judge's structured output: one verdict per sentence of the message."""

    verdicts: list[SentenceVerdict]


class ReviewOutcome(BaseModel):
    """The final report (body + Sources), what is still wrong with it, and how many revision rounds ran."""

    markdown: str
    problems: list[Problem]
    rounds_used: int


def _quotes(ids: list[str], evidence: Evidence) -> list[str]:
    """The <quote> elements of the cited findings and calculations among `ids`, in order, once each."""
    findings = {f.id: f for f in evidence.findings}
    calcs = {c.id: c for c in evidence.calculations}
    quotes = []
    for i in dict.fromkeys(ids):
        if i in findings:
            quotes.append(f'<quote id="{i}">{tags.text(findings[i].quote)}</quote>')
        elif i in calcs:
            quotes.append(f'<quote id="{i}">{tags.text(f"{calcs[i].expression} = {calcs[i].result}")}</quote>')
    return quotes


def judge_message(sentence: str, evidence: Evidence) -> str | None:
    """The sentence judge's user message, or None when the sentence cites no finding."""
    findings = {f.id for f in evidence.findings}
    if not any(i.startswith(FINDING) and i in findings for i in cited_ids(sentence)):
        return None
    quotes = _quotes(cited_ids(sentence), evidence)
    return "\n".join([f"<sentence>{tags.text(sentence)}</sentence>", "<quotes>", *quotes, "</quotes>"])


def batch_message(sentences_: list[str], evidence: Evidence) -> str:
    """The batched judge's user message: every quote the sentences cite, once, then the numbered sentences."""
    quotes = _quotes([i for s in sentences_ for i in cited_ids(s)], evidence)
    numbered = [f'<sentence id="{n}">{tags.text(s)}</sentence>' for n, s in enumerate(sentences_, 1)]
    return "\n".join(["<quotes>", *quotes, "</quotes>", "<sentences>", *numbered, "</sentences>"])


def review(markdown: str, evidence: Evidence, ctx: RunContext, *,
           verdicts: dict[str, Verdict] | None = None, batch: bool = False) -> list[Problem]:
    """Code checks, then a judge of each sentence the code passed (with `batch`, up to BATCH_SIZE sentences per call,
    in report order); `verdicts` caches judgements across rounds."""
    problems = check_report(markdown, evidence)
    flagged = {p.sentence for p in problems}
    asks = {s: m for s in dict.fromkeys(sentences(markdown))
            if s not in flagged and (m := judge_message(s, evidence)) is not None}
    cache = verdicts if verdicts is not None else {}
    todo = [(s, m) for s, m in asks.items() if m not in cache]
    if todo:
        groups = [todo[i:i + BATCH_SIZE] for i in range(0, len(todo), BATCH_SIZE)] if batch else [[t] for t in todo]
        with ThreadPoolExecutor(max_workers=min(MODEL_FANOUT, len(groups))) as pool:
            results = [r for rs in pool.map(lambda g: _judge_group(g, evidence, ctx), groups) for r in rs]
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


def _judge_group(group: list[tuple[str, str]], evidence: Evidence, ctx: RunContext) -> list[Verdict | LLMError]:
    """Verdicts for (sentence, message) pairs: one batched call, then alone each sentence its reply did not rate (or
    all of them when the reply failed its format twice); an outage fails the group at once."""
    if len(group) == 1:
        return [_judge(group[0][1], ctx)]
    message = batch_message([s for s, _ in group], evidence)
    rated: dict[str, Verdict] = {}
    try:
        reply = ctx.llm.structured(model=ctx.worker_model, system=load("sentence_judge_batch"), messages=message,
                                   output=SentenceVerdicts, max_tokens=JUDGE_MAX_TOKENS * len(group),
                                   phase=Phase.SYNTHESIS,
                                   purpose=f"sentence_judge:{hashlib.sha256(message.encode()).hexdigest()[:12]}")
        for v in reply.verdicts:
            rated.setdefault(v.id.strip(), Verdict(analysis=v.analysis, verdict=v.verdict))
    except LLMError as e:
        if e.kind not in PER_REQUEST:
            return [e] * len(group)
    return [rated.get(str(n)) or _judge(m, ctx) for n, (_s, m) in enumerate(group, 1)]


def write_and_review(question: str, evidence: Evidence, conflicts: list[Conflict], ctx: RunContext,
                     rounds: int, *, batch: bool = False) -> ReviewOutcome:
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
                             problems=problems + review(body, evidence, ctx, verdicts=cache, batch=batch),
                             rounds_used=0)
    ctx.events.emit(StepEvent(name="write", status="finished", round=0))
    problems = _reviewed(body, evidence, ctx, cache, 0, batch)
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
        problems = _reviewed(body, evidence, ctx, cache, used, batch)
        if len(problems) <= len(best[1]):
            best = (body, problems)
    return ReviewOutcome(markdown=final_report(best[0], evidence), problems=best[1], rounds_used=used)


def _reviewed(body: str, evidence: Evidence, ctx: RunContext, cache: dict[str, Verdict],
              round_no: int, batch: bool) -> list[Problem]:
    ctx.events.emit(StepEvent(name="review", status="started", round=round_no))
    problems = review(body, evidence, ctx, verdicts=cache, batch=batch)
    ctx.events.emit(StepEvent(name="review", status="finished", round=round_no, problems=len(problems)))
    return problems


def final_report(body: str, evidence: Evidence) -> str:
    """The report body, with only fetched pages left linked (steps/defang.py), and the Sources section that code
    builds from the cited findings."""
    allowed = [u for s in evidence.sources for u in (s.url, s.final_url)]
    allowed += [u for text in (evidence.question, *evidence.gaps) for u in URL.findall(text)]
    return f"{defang(body, allowed).rstrip()}\n\n{sources_section(body, evidence)}"
