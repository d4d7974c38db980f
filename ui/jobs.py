"""Live runs for the app: a job registry that runs research in background threads (never touching Streamlit), with
progress snapshots, cancellation, and server-wide limits shared by all sessions: concurrent runs and a daily spend
ceiling in dollars, persisted in SQLite so reloads and sessions see the same ledger. Extractive runs call no model:
they need no model key, cost nothing and reserve nothing, but count against the concurrency limit."""
from __future__ import annotations

import logging
import threading
import time
import traceback
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from pipeline.config import ConfigError, Settings
from pipeline.core.budget import Budget
from pipeline.core.event_types import (
    AssignedEvent,
    Event,
    FetchEvent,
    FindingEvent,
    ModelErrorEvent,
    ModelResponseEvent,
    RejectedEvent,
    SearchEvent,
    StepEvent,
)
from pipeline.core.events import EventSink, FanOut
from pipeline.core.schema import BudgetLimits, Mode, Problem, RunOptions, RunResult
from pipeline.research.context import RunContext
from pipeline.research.orchestrator import build_context, research
from pipeline.research.preflight import require_run_access
from pipeline.store.base import RunStore
from pipeline.store.files import save_run_file
from pipeline.store.timeline import TimelineRecorder
from ui.ledger import SpendLedger

log = logging.getLogger(__name__)
MAX_QUESTION_CHARS = 500
MODES: dict[Mode, str] = {
    "fixed": "fixed: code runs the planned searches, a model reads the pages and writes (cheaper, predictable)",
    "tools": "tools: a model worker per sub-question searches and reads (more thorough)",
    "extractive": "extractive: no model at all; code selects sentences from the pages and quotes them ($0)",
}
NO_MODEL_KEY = ("No model key is configured on this server, so only the extractive mode — no model, sentences "
                "selected by code — can run. The operator can set ANTHROPIC_API_KEY to offer the fixed and tools "
                "modes too.")


class Preset(BaseModel):
    """A budget a visitor may pick; the server caps its dollars further (per run and by what is left today)."""

    label: str
    limits: BudgetLimits


PRESETS: dict[str, Preset] = {
    "quick": Preset(label="Quick (up to $0.25)", limits=BudgetLimits(
        searches=8, fetches=10, model_calls=30, input_tokens=400_000, output_tokens=40_000, cost_usd=0.25)),
    "standard": Preset(label="Standard (up to $0.75)", limits=BudgetLimits(
        searches=16, fetches=20, model_calls=50, input_tokens=900_000, output_tokens=90_000, cost_usd=0.75)),
    "thorough": Preset(label="Thorough (up to $2.00)", limits=BudgetLimits()),
}


class LiveLimits(BaseModel):
    """Server-wide limits on live runs."""

    max_concurrent: int = 2
    daily_usd: float = 5.0
    max_run_usd: float = 2.0
    min_run_usd: float = 0.05  # below this a run could not finish a report, so it is not started


@dataclass(frozen=True)
class Refused:
    """A live run was not started; `message` tells the visitor why and what to do."""

    reason: Literal["question", "mode", "config", "concurrency", "spend", "preset"]
    message: str


@dataclass(frozen=True)
class Offer:
    """The modes this server can run now; `note` says why some are missing, `problem` why none can run."""

    modes: tuple[Mode, ...]
    note: str | None = None
    problem: str | None = None


def preset_label(key: str, mode: Mode) -> str:
    """A budget preset as the form shows it: its dollar cap, or for extractive runs (which cost nothing) its
    searches and fetches."""
    preset = PRESETS[key]
    if mode != "extractive":
        return preset.label
    lim = preset.limits
    return f"{preset.label.split(' (')[0]} ({lim.searches} searches, {lim.fetches} fetches, $0)"


def _no_model_key(settings: Settings) -> bool:
    key = settings.anthropic_api_key
    return key is None or not key.get_secret_value().strip()


def _run_problem(settings: Settings, mode: Mode) -> str | None:
    """What stops a run in `mode` from starting (require_run_access's message), or None."""
    try:
        require_run_access(settings, mode)
    except (ConfigError, ValueError) as e:
        return str(e)
    return None


JobStatus = Literal["running", "finished", "failed"]


class LiveProgress(BaseModel):
    """What the page shows while a run works: the step, budget use against its limits, findings so far."""

    job_id: str
    run_id: str
    question: str
    mode: str
    status: JobStatus
    cancel_requested: bool = False
    step: str = "starting"
    searches: int = 0
    fetches: int = 0
    model_calls: int = 0
    cost_usd: float = 0.0
    limits: BudgetLimits
    findings: int = 0
    rejected: int = 0
    recent: list[str] = []
    seconds: float = 0.0
    error: str | None = None


class ProgressSink:
    """An event sink for one live run: the current step, findings and rejections, and a short activity log."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.step = "starting"
        self.finding_ids: set[str] = set()
        self.rejected = 0
        self.recent: deque[str] = deque(maxlen=8)

    def emit(self, event: Event, *, tokens: int = 0, ms: float = 0.0) -> None:
        with self._lock:
            if isinstance(event, StepEvent) and event.status == "started":
                self.step = f"{event.name} ({event.part})" if event.part else event.name
            elif isinstance(event, FindingEvent) or (isinstance(event, AssignedEvent) and event.what == "finding"):
                # the notebook assigns every kept finding an id; the model steps also announce theirs: count each once
                self.finding_ids.add(event.id)
            elif isinstance(event, RejectedEvent):
                self.rejected += 1
            line = _activity(event, tokens)
            if line:
                self.recent.append(line)

    def snapshot(self) -> tuple[str, int, int, list[str]]:
        """(step, findings, rejected, recent activity lines)."""
        with self._lock:
            return self.step, len(self.finding_ids), self.rejected, list(self.recent)


def _activity(event: Event, tokens: int) -> str | None:
    match event:
        case SearchEvent():
            return f"search: {event.query[:80]} ({event.count} results)"
        case FetchEvent(cached=False):
            return f"fetch: {event.url[:90]} ({'ok' if event.ok else event.error_kind or 'failed'})"
        case ModelResponseEvent():
            return f"model: {event.purpose} ({tokens:,} tokens, ${event.cost_usd:.4f})"
        case ModelErrorEvent():
            return f"model: {event.purpose} failed ({event.error_kind})"
    return None


@dataclass
class Job:
    """One live run and its thread; read by the page through `progress()`, never the other way round."""

    id: str
    run_id: str
    question: str
    mode: Mode
    limits: BudgetLimits
    started: float
    sink: ProgressSink = field(default_factory=ProgressSink)
    timeline: TimelineRecorder = field(default_factory=TimelineRecorder)
    budget: Budget | None = None
    result: RunResult | None = None
    error: str | None = None
    finished: float | None = None
    cancel_requested: bool = False
    thread: threading.Thread | None = None
    reserved: bool = False  # dollars held in the spend ledger until the run settles

    @property
    def done(self) -> bool:
        return self.finished is not None

    def progress(self, clock: Callable[[], float] = time.time) -> LiveProgress:
        used = self.budget.used() if self.budget is not None else None
        step, findings, rejected, recent = self.sink.snapshot()
        status: JobStatus = "running" if not self.done else ("failed" if self.result is None else "finished")
        return LiveProgress(
            job_id=self.id, run_id=self.run_id, question=self.question, mode=self.mode, status=status,
            cancel_requested=self.cancel_requested, step="done" if self.done else step,
            searches=used.searches if used else 0, fetches=used.fetches if used else 0,
            model_calls=used.model_calls if used else 0, cost_usd=used.cost_usd if used else 0.0,
            limits=self.limits, findings=findings, rejected=rejected, recent=recent,
            seconds=round((self.finished or clock()) - self.started, 1), error=self.error)


ResearchFn = Callable[..., RunResult]
ContextFn = Callable[[Settings, RunOptions, EventSink], RunContext]


class JobRegistry:
    """All live runs of this server process; start() enforces the concurrency limit and the daily spend ceiling."""

    def __init__(self, *, runs_dir: Path, ledger: SpendLedger, limits: LiveLimits,
                 settings: Callable[[], Settings] = Settings, store: RunStore | None = None,
                 research_fn: ResearchFn = research, context_fn: ContextFn = build_context,
                 clock: Callable[[], float] = time.time, keep_finished: float = 3600.0):
        self.runs_dir = Path(runs_dir)
        self.ledger, self.limits, self.store = ledger, limits, store
        self._settings, self._research, self._context, self._clock = settings, research_fn, context_fn, clock
        self._keep = keep_finished
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}

    def running(self) -> int:
        with self._lock:
            return sum(1 for j in self._jobs.values() if not j.done)

    def get(self, job_id: str | None) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id or "")

    def check_config(self, mode: Mode = "fixed") -> str | None:
        """None when a live run in `mode` can start (a model key unless extractive, the search provider's setting,
        a corpus that opens), else what the operator must set."""
        settings = self._settings()
        if (problem := _run_problem(settings, mode)) is None:
            return None
        if mode != "extractive" and _no_model_key(settings) and _run_problem(settings, "extractive") is None:
            return NO_MODEL_KEY
        return f"Live runs cannot start on this server: {_run_problem(settings, 'extractive') or problem}"

    def offer(self) -> Offer:
        """The modes a visitor may pick: all three, only extractive (no model key), or none (and why)."""
        settings = self._settings()
        if (model_problem := _run_problem(settings, "fixed")) is None:  # includes every check extractive needs
            return Offer(tuple(MODES))
        if (problem := _run_problem(settings, "extractive")) is not None:
            return Offer((), problem=f"Live runs cannot start on this server: {problem}")
        return Offer(("extractive",), note=NO_MODEL_KEY if _no_model_key(settings) else
                     f"Only the extractive mode can run on this server: {model_problem}")

    def start(self, question: str, mode: Mode, preset: str) -> Job | Refused:
        """A started job, or why not (empty question, missing keys, too many runs, today's spend reached)."""
        question = " ".join(question.split())
        if not question:
            return Refused("question", "Write a question first.")
        if len(question) > MAX_QUESTION_CHARS:
            return Refused("question", f"The question is too long: keep it under {MAX_QUESTION_CHARS} characters.")
        if mode not in MODES:
            return Refused("mode", f"Unknown researcher mode; choose one of: {', '.join(MODES)}.")
        if preset not in PRESETS:
            return Refused("preset", f"Unknown budget preset; choose one of: {', '.join(PRESETS)}.")
        if (problem := self.check_config(mode)) is not None:
            return Refused("config", problem)
        settings = self._settings()
        with self._lock:
            self._prune()
            busy = sum(1 for j in self._jobs.values() if not j.done)
            if busy >= self.limits.max_concurrent:
                return Refused("concurrency", f"{busy} live run{'s are' if busy != 1 else ' is'} already in progress "
                                              f"on this server (the limit is {self.limits.max_concurrent} at a time). "
                                              "Try again when one has finished.")
            run_id = uuid.uuid4().hex[:12]
            if mode == "extractive":  # no model: nothing to pay for, so nothing is reserved and no ceiling applies
                limits = PRESETS[preset].limits.model_copy(update={
                    "model_calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0})
            else:
                want = min(PRESETS[preset].limits.cost_usd, self.limits.max_run_usd)
                granted = self.ledger.reserve(run_id, want, self.limits.daily_usd, self.limits.min_run_usd)
                if granted is None:
                    return Refused("spend", f"Today's spending limit for live runs (${self.limits.daily_usd:.2f}, "
                                            "shared by all visitors) is reached. It resets at midnight UTC; the "
                                            "extractive mode (no model, $0) can still run, and saved reports stay "
                                            "open to browse.")
                limits = PRESETS[preset].limits.model_copy(update={"cost_usd": granted})
            job = Job(id=uuid.uuid4().hex, run_id=run_id, question=question, mode=mode, limits=limits,
                      started=self._clock(), reserved=mode != "extractive")
            self._jobs[job.id] = job
        job.thread = threading.Thread(target=self._run, args=(job, settings), name=f"live-{run_id}", daemon=True)
        job.thread.start()
        return job

    def cancel(self, job_id: str) -> bool:
        """Ask a running job to stop: its budget refuses every further call, so the steps wind down."""
        job = self.get(job_id)
        if job is None or job.done:
            return False
        job.cancel_requested = True
        if job.budget is not None:
            job.budget.cancel()
        return True

    def _run(self, job: Job, settings: Settings) -> None:
        def context(s: Settings, o: RunOptions, e: EventSink) -> RunContext:
            ctx = self._context(s, o, e)
            job.budget = ctx.budget
            if job.cancel_requested:  # cancelled before the budget existed
                ctx.budget.cancel()
            return ctx

        try:
            recording = {"store": self.store} if self.store is not None else {}
            result = self._research(job.question, settings, options=RunOptions(mode=job.mode, limits=job.limits),
                                    events=FanOut(job.sink, job.timeline), run_id=job.run_id, context=context,
                                    **recording)
            # research() marks a run whose budget it saw cancelled; a cancel after that is marked here, once
            if job.cancel_requested and not any(p.kind == "cancelled" for p in result.problems):
                result = result.model_copy(update={
                    "status": "failed" if result.status == "failed" else "partial",
                    "problems": [*result.problems, Problem(kind="cancelled", step="run", message=(
                        "the run was cancelled by the visitor; what was gathered before that is kept"))]})
            save_run_file(self.runs_dir, result, job.timeline.entries())
            job.result = result
        except Exception as e:  # our bug: the page shows a short message, the log keeps the traceback
            log.error("live run %s failed: %s", job.run_id, traceback.format_exc())
            job.error = f"The run stopped on an internal error ({type(e).__name__}); nothing was saved."
        finally:
            spent = job.budget.used().cost_usd if job.budget is not None else 0.0
            try:
                if job.reserved:
                    self.ledger.settle(job.run_id, spent)
            finally:
                job.finished = self._clock()

    def _prune(self) -> None:
        now = self._clock()
        for jid in [j.id for j in self._jobs.values() if j.finished and now - j.finished > self._keep]:
            del self._jobs[jid]

    def wait(self, job_id: str, timeout: float | None = None) -> bool:
        """Blocks until the job's thread ends (tests, shutdown); True when it has."""
        job = self.get(job_id)
        if job is None or job.thread is None:
            return job is not None and job.done
        job.thread.join(timeout)
        return job.done
