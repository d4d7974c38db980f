"""The support judge: a fresh-context model rates whether each finding's quote supports its claim, one finding per
call as findings arrive, or several findings per call (`batch`) once they are all recorded.

A batch is cut from the findings in id order, so the same run makes the same calls whichever thread recorded first,
and a replay finds each recorded call under the same purpose ("support_judge:F1,F2,F3"). A finding the batch reply
does not rate is asked about alone (purpose "support_judge:F2"), as is every finding of a batch whose reply failed its
format twice; an outage fails the whole batch at once.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Literal

from pydantic import BaseModel, Field

from pipeline.core.budget import Phase
from pipeline.core.event_types import StepEvent
from pipeline.core.schema import Finding, Problem
from pipeline.models.base import LLMError
from pipeline.research.context import MODEL_FANOUT, RunContext
from pipeline.research.prompts import load
from pipeline.research.steps import tags

STEP = "analyse"
JUDGE_TOKENS = 600
BATCH_SIZE = 6  # findings per batched call: few enough that each gets its own element-by-element comparison
# Failures of one request only (this reply or input was bad); any other kind (server down, budget spent, auth)
# would fail every remaining call the same way, so those are skipped and reported with the same cause.
PER_REQUEST = frozenset({"malformed", "refusal", "context_window", "bad_request"})
_ID_NUMBER = re.compile(r"\d+")


class Verdict(BaseModel):
    """A judge's structured output: the analysis is written before the verdict."""

    analysis: str = Field(description="Claim and quote compared element by element, before the verdict.")
    verdict: Literal["supported", "partial", "unsupported"]
    # Defaults to True so verdicts recorded before this field existed still replay.
    answers_question: bool = Field(True, description=(
        "False when the claim does nothing to answer the sub-question (for example it answers a question the page "
        "itself asks); true when it answers it, part of it, or gives context needed to answer it."))


class FindingVerdict(Verdict):
    """One finding's verdict in a batched reply."""

    id: str = Field(description='The id of the finding judged, as given in <finding id="...">.')


class BatchVerdicts(BaseModel):
    """The batched support judge's structured output: one verdict per finding of the message."""

    verdicts: list[FindingVerdict]


class Breaker:
    """Remembers the first failure that means the model is unreachable, so later calls fail fast with it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.error: LLMError | None = None

    def trip(self, e: LLMError) -> LLMError:
        if e.kind not in PER_REQUEST:
            with self._lock:
                self.error = self.error or e
        return e


def judge_message(f: Finding, sub_question: str | None) -> str:
    """The support judge's user message: the sub-question the finding was recorded for, its claim and quote."""
    asked = f"<sub_question>{tags.text(sub_question)}</sub_question>\n" if sub_question else ""
    return (f"{asked}<claim>{tags.text(f.claim)}</claim>\n"
            f'<quote source="{tags.attr(f.source)}">{tags.text(f.quote)}</quote>')


def batch_message(findings: list[Finding], questions: Mapping[str, str]) -> str:
    """The batched judge's user message: each sub-question once, then each finding with its claim and quote."""
    asked = dict.fromkeys(f.sub_question for f in findings if f.sub_question in questions)
    parts = [f'<sub_question id="{tags.attr(q or "")}">{tags.text(questions[q or ""])}</sub_question>' for q in asked]
    for f in findings:
        about = f' sub_question="{tags.attr(f.sub_question)}"' if f.sub_question and f.sub_question in asked else ""
        parts.append(f'<finding id="{tags.attr(f.id)}"{about}>\n<claim>{tags.text(f.claim)}</claim>\n'
                     f'<quote source="{tags.attr(f.source)}">{tags.text(f.quote)}</quote>\n</finding>')
    return "\n".join(parts)


def batches(findings: Iterable[Finding], size: int = BATCH_SIZE) -> list[list[Finding]]:
    """`findings` in id order, cut into batches of at most `size`: the same findings give the same calls."""
    ordered = sorted(findings, key=lambda f: (len(f.id), int(m.group()) if (m := _ID_NUMBER.search(f.id)) else 0,
                                              f.id))
    return [ordered[i:i + size] for i in range(0, len(ordered), size)]


class SupportJudging:
    """A fresh-context judge rates each finding handed to `submit` (once, when its support is "unknown"), in
    parallel and as it arrives, so judging overlaps the research that records the findings; `finish` waits for
    every verdict and returns the problems. When the judge cannot rate a finding, its support stays "unknown".

    With `batch`, findings are held until `finish` and rated several per call (module docstring).
    `questions` (sub-question id -> text) lets the judge also check that the claim answers what was asked: a
    verbatim quote of a page's own question-and-answer is true to the page but no evidence for the run, so a
    claim judged not to answer its sub-question is set "unsupported" and never reaches the writer.
    """

    def __init__(self, ctx: RunContext, questions: Mapping[str, str] | None = None, *, batch: bool = False) -> None:
        self._ctx, self._questions, self._batch = ctx, dict(questions or {}), batch
        self._pool = ThreadPoolExecutor(max_workers=MODEL_FANOUT, thread_name_prefix="judge")
        self._lock = threading.Lock()
        self._asked: dict[str, Future[dict[str, LLMError | None]]] = {}
        self._held: dict[str, Finding] = {}
        self._breaker = Breaker()
        self._off_topic: list[str] = []
        self._started = False

    def submit(self, findings: Iterable[Finding]) -> None:
        """Queue each finding not yet asked about whose support is unknown; the first call reports the start."""
        with self._lock:
            todo = [f for f in {f.id: f for f in findings}.values()
                    if f.support == "unknown" and f.id not in self._asked and f.id not in self._held]
            if not self._started:
                self._started = True
                self._ctx.events.emit(StepEvent(name=STEP, status="started", part="judge", findings=len(todo)))
            for f in todo:
                if self._batch:
                    self._held[f.id] = f
                else:
                    self._asked[f.id] = self._pool.submit(self._several, [f])

    def finish(self) -> list[Problem]:
        """Wait for every verdict; one problem per distinct cause of the findings left unrated."""
        self.submit([])  # reports the start when nothing was handed in
        with self._lock:
            for group in batches(self._held.values()):
                future = self._pool.submit(self._several, group)
                self._asked.update((f.id, future) for f in group)
            self._held.clear()
        self._pool.shutdown(wait=True)
        with self._lock:
            failures = [(fid, future.result()[fid]) for fid, future in self._asked.items()]
        problems = problems_by_cause("judge_unavailable", "the support judge", failures,
                                     'their support is "unknown": they are passed on flagged low confidence')
        extra = {"off_topic": sorted(self._off_topic)} if self._off_topic else {}  # the key only when it says something
        self._ctx.events.emit(StepEvent.model_validate({"name": STEP, "status": "finished", "part": "judge",
                                                        "problems": len(problems), **extra}))
        return problems

    def abandon(self) -> None:
        """The run stopped before judging finished: drop what was not started, wait for what was."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _several(self, group: list[Finding]) -> dict[str, LLMError | None]:
        if len(group) == 1 or self._breaker.error is not None:
            return {f.id: self._one(f) for f in group}
        rated: dict[str, FindingVerdict] = {}
        try:
            reply = self._ctx.llm.structured(
                model=self._ctx.worker_model, system=load("support_judge_batch"),
                messages=batch_message(group, self._questions), output=BatchVerdicts,
                max_tokens=JUDGE_TOKENS * len(group), phase=Phase.SYNTHESIS,
                purpose="support_judge:" + ",".join(f.id for f in group), cache=False)
            asked = {f.id for f in group}
            for v in reply.verdicts:
                if v.id in asked:
                    rated.setdefault(v.id, v)
        except LLMError as e:
            if e.kind not in PER_REQUEST:
                return {f.id: self._breaker.trip(e) for f in group}
        return {f.id: self._apply(f, rated[f.id]) if f.id in rated else self._one(f) for f in group}

    def _one(self, f: Finding) -> LLMError | None:
        if self._breaker.error is not None:
            return self._breaker.error
        user = judge_message(f, self._questions.get(f.sub_question or ""))
        try:
            verdict = self._ctx.llm.structured(
                model=self._ctx.worker_model, system=load("support_judge"), messages=user, output=Verdict,
                max_tokens=JUDGE_TOKENS, phase=Phase.SYNTHESIS, purpose=f"support_judge:{f.id}", cache=False)
        except LLMError as e:
            return self._breaker.trip(e)
        return self._apply(f, verdict)

    def _apply(self, f: Finding, verdict: Verdict) -> LLMError | None:
        """Record the verdict (a claim off its sub-question is "unsupported"); None: nothing failed."""
        if not verdict.answers_question:
            with self._lock:
                self._off_topic.append(f.id)
        self._ctx.notebook.set_support(f.id, verdict.verdict if verdict.answers_question else "unsupported")
        return None


def judge_support(ctx: RunContext, findings: list[Finding], questions: Mapping[str, str] | None = None, *,
                  batch: bool = False) -> list[Problem]:
    """Judge every finding of unknown support at once (SupportJudging) and return the problems."""
    judging = SupportJudging(ctx, questions, batch=batch)
    judging.submit(findings)
    return judging.finish()


def problems_by_cause(kind: str, who: str, failures: list[tuple[str, LLMError | None]],
                      consequence: str) -> list[Problem]:
    """One Problem per distinct cause, naming what it affected (not one per call: an outage is one problem)."""
    by_cause: dict[str, list[str]] = {}
    for what, e in failures:
        if e is not None:
            by_cause.setdefault(e.message.rstrip(". "), []).append(what)
    return [Problem(kind=kind, step=STEP, message=f"{who} failed for {', '.join(whats)} ({cause}); {consequence}.")
            for cause, whats in by_cause.items()]
