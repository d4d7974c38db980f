"""Checkpoints: after each step and each tools-mode worker, the state a run needs to continue, as an event.

A checkpoint holds the plan, the notebook (sources, findings, rejections; each source's text is identified by
its sha256 and kept once, in the run's fetch events), the calculations, the budget ledger, the counters, the
problems so far and the step's output. Resume itself re-runs the orchestrator over the recording (replay/tape.py),
which repeats no finished call; checkpoints show where a run stopped and let its state be rebuilt and inspected.
"""
from __future__ import annotations

import threading
from typing import Any, Protocol

from pydantic_core import to_jsonable_python

from pipeline.core.budget import Budget
from pipeline.core.event_types import CheckpointEvent, Event, StepEvent
from pipeline.core.events import EventSink, NullSink
from pipeline.core.notebook import Notebook
from pipeline.core.schema import Calculation, Plan, Problem, RunStats

Checkpoint = CheckpointEvent


class _Calculations(Protocol):
    def all(self) -> list[Calculation]: ...


class _Stats(Protocol):
    def snapshot(self) -> RunStats: ...


class RunState(Protocol):
    """What a checkpoint reads of a run (its RunContext)."""

    @property
    def notebook(self) -> Notebook: ...

    @property
    def calculations(self) -> _Calculations: ...

    @property
    def budget(self) -> Budget: ...

    @property
    def stats(self) -> _Stats: ...


class Checkpoints:
    """Emits checkpoints: `save` after each orchestrator step; as an EventSink, after each finished worker."""

    def __init__(self) -> None:
        self._ctx: RunState | None = None
        self._out: EventSink = NullSink()
        self._plan: Plan | None = None
        self._problems: list[Problem] = []
        self._lock = threading.Lock()

    def bind(self, ctx: RunState, out: EventSink) -> None:
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
            cp = CheckpointEvent(after=after, plan=self._plan, sources=ctx.notebook.sources(),
                                 findings=ctx.notebook.findings(), rejected=ctx.notebook.rejected(),
                                 calculations=ctx.calculations.all(), budget=ctx.budget.state(),
                                 stats=ctx.stats.snapshot(), problems=self._problems,
                                 output=to_jsonable_python(output))
        self._out.emit(cp)

    def emit(self, event: Event, *, tokens: int = 0, ms: float = 0.0) -> None:
        if isinstance(event, StepEvent) and event.name == "worker" and event.status == "finished":
            self.save(f"worker:{event.sub_question}", output=event.payload())
