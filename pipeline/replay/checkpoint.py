"""Checkpoints: after each step and each tools-mode worker, the state a run needs to continue, as an event.

A checkpoint holds the plan, the notebook (sources, findings, rejections; each source's text is identified by
its sha256 and kept once, in the run's fetch events), the calculations, the budget ledger, the counters, the
problems so far and the step's output. Resume itself re-runs the orchestrator over the recording (pipeline/tape.py),
which repeats no finished call; checkpoints show where a run stopped and let its state be rebuilt and inspected.
"""
from __future__ import annotations

import hashlib
import threading
from typing import Any, Iterable

from pydantic import BaseModel, Field
from pydantic_core import to_jsonable_python

from pipeline.research.context import RunContext
from pipeline.core.events import EventSink, NullSink
from pipeline.core.notebook import NotebookState, StoredSource
from pipeline.core.schema import BudgetState, Calculation, Finding, Plan, Problem, RejectedFinding, RunStats, Source


class Checkpoint(BaseModel):
    """The payload of a "checkpoint" event."""

    after: str
    plan: Plan | None = None
    sources: list[Source] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    rejected: list[RejectedFinding] = Field(default_factory=list)
    calculations: list[Calculation] = Field(default_factory=list)
    budget: BudgetState = Field(default_factory=BudgetState)
    stats: RunStats = Field(default_factory=RunStats)
    problems: list[Problem] = Field(default_factory=list)
    output: Any = None

    def notebook_state(self, fetched_texts: Iterable[str]) -> NotebookState:
        """The notebook as it was, each source's text found by sha256 among `fetched_texts` (KeyError if absent)."""
        by_hash = {hashlib.sha256(t.encode("utf-8")).hexdigest(): t for t in fetched_texts}
        return NotebookState(sources=[StoredSource(source=s, text=by_hash[s.sha256]) for s in self.sources],
                             findings=self.findings, rejected=self.rejected)


class Checkpoints:
    """Emits checkpoints: `save` after each orchestrator step; as an EventSink, after each finished worker."""

    def __init__(self) -> None:
        self._ctx: RunContext | None = None
        self._out: EventSink = NullSink()
        self._plan: Plan | None = None
        self._problems: list[Problem] = []
        self._lock = threading.Lock()

    def bind(self, ctx: RunContext, out: EventSink) -> None:
        """Checkpoints read `ctx` and are emitted to `out` (the run's event fan-out)."""
        self._ctx, self._out = ctx, out

    def save(self, after: str, *, plan: Plan | None = None, problems: list[Problem] | None = None,
             output: Any = None) -> None:
        with self._lock:
            if plan is not None:
                self._plan = plan
            if problems is not None:
                self._problems = list(problems)
            ctx = self._ctx
            if ctx is None:
                return
            cp = Checkpoint(after=after, plan=self._plan, sources=ctx.notebook.sources(),
                            findings=ctx.notebook.findings(), rejected=ctx.notebook.rejected(),
                            calculations=ctx.calculations.all(), budget=ctx.budget.state(),
                            stats=ctx.stats.snapshot(), problems=self._problems, output=to_jsonable_python(output))
        self._out.emit("checkpoint", cp.model_dump(mode="json"))

    def emit(self, kind: str, payload: dict[str, Any], *, tokens: int = 0, ms: float = 0.0) -> None:
        if kind == "step" and payload.get("name") == "worker" and payload.get("status") == "finished":
            self.save(f"worker:{payload.get('sub_question')}", output=payload)
