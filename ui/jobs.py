"""Live runs for the app: a job registry that runs research in background threads (never touching Streamlit), with
progress snapshots, cancellation, resume of runs whose instance died, and limits shared by every session and app
instance on the database: concurrent runs and a daily spend ceiling in dollars. Extractive runs call no model: they
need no model key, cost nothing and reserve nothing, but count against the concurrency limit."""
from __future__ import annotations

import logging
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from pipeline.config import ConfigError, Settings
from pipeline.core.budget import Budget
from pipeline.core.events import EventSink, FanOut
from pipeline.core.schema import BudgetLimits, Mode, Problem, RunOptions, RunResult
from pipeline.research import resume as resumption
from pipeline.research.context import RunContext
from pipeline.research.orchestrator import build_context, research
from pipeline.research.preflight import require_run_access
from pipeline.store.base import RunStore, StoreError
from pipeline.store.database import Database
from pipeline.store.files import save_run_file
from pipeline.store.timeline import TimelineRecorder
from ui.ledger import LOCK as LEDGER_LOCK
from ui.ledger import SpendLedger
from ui.live_runs import INSTANCE, LiveRow, LiveRunTable, LiveStatus
from ui.progress import LiveProgress, ProgressSink
from ui.uploads import discard

log = logging.getLogger(__name__)
MAX_QUESTION_CHARS = 500
MODES: dict[Mode, str] = {
    "fixed": "fixed: code runs the planned searches, a model reads the pages and writes (cheaper, predictable)",
    "tools": "tools: a model worker per sub-question searches and reads (more thorough)",
    "extractive": "extractive: no model at all; code selects sentences from the pages and quotes them ($0)",
}
NO_MODEL_KEY = ("No model key is configured on this server, so only the extractive mode — no model, sentences "
                "selected by code — can run. The operator can set ANTHROPIC_API_KEY (or RESEARCH_MODEL_PROVIDER=openai "
                "with OPENAI_API_KEY or OPENAI_BASE_URL) to offer the fixed and tools modes too.")


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

    reason: Literal["question", "mode", "config", "concurrency", "spend", "preset", "resume"]
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



@dataclass
class Job:
    """One live run in this process and its thread; read by the page through `progress()`, never the other way
    round. Other instances see it through its row in the live_runs table."""

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
    spend_key: str | None = None  # its reservation in the spend ledger, settled to what this job spent
    spent_before: float = 0.0  # a resumed run's spending before this job: its budget counts it again
    resuming: resumption.Resumption | None = None
    lost: bool = False  # the other instances took this one for dead and released the run
    docs: Path | None = None  # the visitor's uploaded files (ui/uploads.py), removed when the run ends

    @property
    def done(self) -> bool:
        return self.finished is not None

    def progress(self, clock: Callable[[], float] = time.time) -> LiveProgress:
        used = self.budget.used() if self.budget is not None else None
        step, findings, rejected, recent = self.sink.snapshot()
        status: LiveStatus = "running" if not self.done else ("failed" if self.result is None else "finished")
        return LiveProgress(
            job_id=self.id, run_id=self.run_id, question=self.question, mode=self.mode, status=status,
            cancel_requested=self.cancel_requested, step="done" if self.done else step,
            searches=used.searches if used else 0, fetches=used.fetches if used else 0,
            model_calls=used.model_calls if used else 0, cost_usd=used.cost_usd if used else 0.0,
            limits=self.limits, findings=findings, rejected=rejected, recent=recent,
            seconds=round((self.finished or clock()) - self.started, 1), error=self.error)


ResearchFn = Callable[..., RunResult]
ContextFn = Callable[..., RunContext]
ResumeFn = Callable[..., RunResult]


class JobRegistry:
    """The live runs of this server process, and the shared view of every instance's: start() and resume() enforce
    the concurrency limit and the daily spend ceiling across all instances on the database."""

    def __init__(self, *, runs_dir: Path, db: Database, limits: LiveLimits,
                 settings: Callable[[], Settings] = Settings, store: RunStore | None = None,
                 research_fn: ResearchFn = research, context_fn: ContextFn = build_context,
                 resume_fn: ResumeFn = resumption.resume, clock: Callable[[], float] = time.time,
                 keep_finished: float = 3600.0, stale_after: float = 60.0, beat_every: float = 1.0,
                 instance: str = INSTANCE):
        self.runs_dir = Path(runs_dir)
        self.db, self.limits, self.store = db, limits, store
        self.ledger = SpendLedger(db, clock)
        self.live = LiveRunTable(db, stale_after=stale_after, clock=clock, instance=instance)
        self._settings, self._research, self._context, self._resume = settings, research_fn, context_fn, resume_fn
        self._clock, self._keep, self._beat_every = clock, keep_finished, beat_every
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}

    def running(self) -> int:
        """Live runs in progress on every instance."""
        return self.live.running()

    def get(self, job_id: str | None) -> Job | None:
        """A job of this process, by its job id or its run id (the one still running first: a run resumed here
        may have an earlier, finished job)."""
        with self._lock:
            key = job_id or ""
            if key in self._jobs:
                return self._jobs[key]
            jobs = [j for j in self._jobs.values() if j.run_id == key]
            return next((j for j in jobs if not j.done), jobs[-1] if jobs else None)

    def settings(self) -> Settings:
        """The research settings a live run starts with."""
        return self._settings()

    def check_config(self, mode: Mode = "fixed", settings: Settings | None = None) -> str | None:
        """None when a live run in `mode` can start (a model key unless extractive, the search provider's setting,
        a corpus that opens), else what the operator must set."""
        settings = settings or self._settings()
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

    def _busy(self, busy: int) -> Refused:
        return Refused("concurrency", f"{busy} live run{'s are' if busy != 1 else ' is'} already in progress on this "
                                      f"server (the limit is {self.limits.max_concurrent} at a time). Try again when "
                                      "one has finished.")

    def _spend_refused(self) -> Refused:
        return Refused("spend", f"Today's spending limit for live runs (${self.limits.daily_usd:.2f}, shared by all "
                                "visitors) is reached. It resets at midnight UTC; the extractive mode (no model, $0) "
                                "can still run, and saved reports stay open to browse.")

    def start(self, question: str, mode: Mode, preset: str, docs: Path | None = None) -> Job | Refused:
        """A started job, or why not (empty question, missing keys, too many runs, today's spend reached). With
        `docs`, a staged folder of uploaded files, the run researches them (beside the web when the server searches
        it), and the folder is removed when the run ends, whether it started or not."""
        try:
            outcome = self._start(question, mode, preset, docs)
        except BaseException:
            self._discard(docs)
            raise
        if isinstance(outcome, Refused):
            self._discard(docs)
        return outcome

    def _discard(self, docs: Path | None) -> None:
        if docs is not None:
            discard(docs, self.settings().cache_dir)

    def _start(self, question: str, mode: Mode, preset: str, docs: Path | None) -> Job | Refused:
        question = " ".join(question.split())
        if not question:
            return Refused("question", "Write a question first.")
        if len(question) > MAX_QUESTION_CHARS:
            return Refused("question", f"The question is too long: keep it under {MAX_QUESTION_CHARS} characters.")
        if mode not in MODES:
            return Refused("mode", f"Unknown researcher mode; choose one of: {', '.join(MODES)}.")
        if preset not in PRESETS:
            return Refused("preset", f"Unknown budget preset; choose one of: {', '.join(PRESETS)}.")
        settings = self._settings()
        if docs is not None:
            settings = settings.model_copy(update={"docs_dir": str(docs)})
        if (problem := self.check_config(mode, settings)) is not None:
            return Refused("config", problem)
        self.reap()
        run_id = uuid.uuid4().hex[:12]
        limits = PRESETS[preset].limits
        if mode == "extractive":  # no model: nothing to pay for, so nothing is reserved and no ceiling applies
            limits = limits.model_copy(update={"model_calls": 0, "input_tokens": 0, "output_tokens": 0,
                                               "cost_usd": 0.0})
        if (busy := self.live.add(run_id, question, mode, limits, self.limits.max_concurrent)) is not None:
            return self._busy(busy)
        if mode != "extractive":
            want = min(limits.cost_usd, self.limits.max_run_usd)
            try:
                granted = self.ledger.reserve(run_id, want, self.limits.daily_usd, self.limits.min_run_usd)
            except StoreError:
                self.live.remove(run_id)  # no row is left behind for a run that never started
                raise
            if granted is None:
                self.live.remove(run_id)
                return self._spend_refused()
            limits = limits.model_copy(update={"cost_usd": granted})
        job = Job(id=uuid.uuid4().hex, run_id=run_id, question=question, mode=mode, limits=limits,
                  started=self._clock(), spend_key=run_id if mode != "extractive" else None, docs=docs)
        return self._launch(job, settings)

    def _launch(self, job: Job, settings: Settings) -> Job:
        with self._lock:
            self._prune()
            self._jobs[job.id] = job
        job.thread = threading.Thread(target=self._run, args=(job, settings), name=f"live-{job.run_id}", daemon=True)
        job.thread.start()
        threading.Thread(target=self._beat, args=(job,), name=f"live-beat-{job.run_id}", daemon=True).start()
        return job

    def _beat(self, job: Job) -> None:
        """Every `beat_every` seconds while the job runs: its heartbeat and progress for the other instances, and a
        cancel asked for on any of them."""
        while not job.done:
            try:
                owned, cancel = self.live.beat(job.run_id, job.progress(self._clock).model_dump_json())
            except StoreError as e:  # the database is away: the run goes on; the next beat tries again
                log.warning("live run %s: heartbeat not written: %s", job.run_id, e)
                owned, cancel = True, False
            if not owned and not job.done:  # our beats stalled and the run was released: stop spending on it
                log.warning("live run %s: taken for dead by the other instances; stopping it here", job.run_id)
                job.lost = True
                self.cancel(job.id)
                return
            if cancel and not job.done:
                self.cancel(job.id)
            time.sleep(self._beat_every)

    def cancel(self, ident: str) -> bool:
        """Ask a running run to stop, by job id or run id: its budget refuses every further call, so the steps wind
        down. A run on another instance is asked through the database, and stops with that instance's next beat."""
        job = self.get(ident)
        if job is None:
            return self.live.request_cancel(ident)
        if job.done:
            return False
        job.cancel_requested = True
        if job.budget is not None:
            job.budget.cancel()
        return True

    def _run(self, job: Job, settings: Settings) -> None:
        def context(s: Settings, o: RunOptions, e: EventSink, **kw: Any) -> RunContext:
            ctx = self._context(s, o, e, **kw)
            job.budget = ctx.budget
            if job.cancel_requested:  # cancelled before the budget existed
                ctx.budget.cancel()
            return ctx

        try:
            events = FanOut(job.sink, job.timeline)
            if job.resuming is not None:
                result = self._resume(self.store, job.resuming, events=events, context=context)
            else:
                recording = {"store": self.store} if self.store is not None else {}
                result = self._research(job.question, settings, options=RunOptions(mode=job.mode, limits=job.limits),
                                        events=events, run_id=job.run_id, context=context, **recording)
            # research() marks a run whose budget it saw cancelled; a cancel after that is marked here, once
            if job.cancel_requested and not any(p.kind == "cancelled" for p in result.problems):
                result = result.model_copy(update={
                    "status": "failed" if result.status == "failed" else "partial",
                    "problems": [*result.problems, Problem(kind="cancelled", step="run", message=(
                        "the run was cancelled by the visitor; what was gathered before that is kept"))]})
            save_run_file(self.runs_dir, result, job.timeline.entries())
            job.result = result
        except StoreError as e:  # the database went away: what the run recorded before that is kept
            log.error("live run %s: the database failed: %s", job.run_id, e)
            job.error = (f"The run stopped because the database failed ({e}). What it recorded before that is kept; "
                         "it can be resumed once the database is back.")
        except Exception as e:  # our bug: the page shows a short message, the log keeps the traceback
            log.error("live run %s failed: %s", job.run_id, traceback.format_exc())
            job.error = f"The run stopped on an internal error ({type(e).__name__}); nothing was saved."
        finally:
            spent = job.budget.used().cost_usd if job.budget is not None else 0.0
            try:
                if job.spend_key is not None:  # what this job spent, even if the run was released meanwhile
                    self.ledger.settle(job.spend_key, max(0.0, spent - job.spent_before))
            except StoreError as e:  # its full reservation stays counted today: the ceiling errs on the safe side
                log.error("live run %s: its spending was not settled: %s", job.run_id, e)
            job.finished = self._clock()
            self._discard(job.docs)  # the run store keeps what the run read of them
            try:
                if not job.lost:
                    self.live.finish(job.run_id, "finished" if job.result is not None else "failed",
                                     job.progress(self._clock).model_dump_json(), job.error)
            except StoreError as e:
                log.error("live run %s: its end was not written: %s", job.run_id, e)

    # -- every instance's runs, read from the database ------------------------------------------------------------
    def progress(self, run_id: str) -> LiveProgress | None:
        """The run's progress: this process's own job, else the last snapshot its instance wrote."""
        job = self.get(run_id)
        if job is not None:
            return job.progress(self._clock)
        row = self.live.get(run_id)
        if row is None:
            return None
        if row.progress:
            snapshot = LiveProgress.model_validate_json(row.progress)
        else:
            snapshot = LiveProgress(job_id="", run_id=row.run_id, question=row.question, mode=row.mode,
                                    status="running", limits=row.limits)
        update: dict[str, Any] = {"status": row.status, "error": row.error}
        if row.status == "running":
            update["seconds"] = round(self._clock() - row.started, 1)
            update["cancel_requested"] = snapshot.cancel_requested or row.cancel
        return snapshot.model_copy(update=update)

    def result(self, run_id: str) -> RunResult | None:
        """The finished run's RunResult, from this process or the run store."""
        job = self.get(run_id)
        if job is not None and job.result is not None:
            return job.result
        return self.store.result(run_id) if self.store is not None else None

    def _spent(self, row: LiveRow) -> float:
        """What a run has spent so far: its recorded model calls, else its last progress snapshot."""
        if self.store is not None:
            calls = self.store.events(row.run_id, ["model_response"])
            return round(sum(float(e.payload.get("cost_usd") or 0.0) for e in calls), 6)
        return LiveProgress.model_validate_json(row.progress).cost_usd if row.progress else 0.0

    def reap(self) -> None:
        """Mark the runs of instances gone silent as interrupted (or as ended, when the run store has their end),
        once each, and release their spend reservations down to what they had spent, in one transaction."""
        with self._lock:
            ours = {j.run_id for j in self._jobs.values() if not j.done}
        for row in self.live.stale():
            if row.run_id in ours:  # our own run, alive: its beats were only late
                continue
            stored = self.store.run(row.run_id) if self.store is not None else None
            ended = stored is not None and stored.status != "running"
            status: LiveStatus = ("failed" if stored.status == "failed" else "finished") if ended and stored \
                else "interrupted"
            spent = stored.cost_usd if ended and stored else self._spent(row)
            with self.db.transaction(LEDGER_LOCK) as tx:
                if self.live.mark_stale(row.run_id, status, tx):
                    self.ledger.settle_run(row.run_id, spent, tx)
                    log.warning("live run %s: its instance %s stopped beating; marked %s", row.run_id,
                                row.instance, status)

    def interrupted(self) -> list[LiveRow]:
        """Runs whose instance died before they finished: a visitor with the code may resume them."""
        self.reap()
        return self.live.interrupted()

    def resume(self, run_id: str) -> Job | Refused:
        """Resume an interrupted run on this instance: no finished call repeated, the rest run anew on a fresh
        reservation of what its budget has left."""
        if self.store is None:
            return Refused("resume", "This server records no runs, so none can be resumed.")
        self.reap()
        local = self.get(run_id)
        if local is not None and not local.done:
            return Refused("resume", "That run is still running on this server.")
        row = self.live.get(run_id)
        if row is None or row.status != "interrupted":
            return Refused("resume", "That run is not interrupted: it finished, or another visitor resumed it.")
        settings = self._settings()
        try:
            ready = resumption.prepare(self.store, run_id, settings)
        except (resumption.NotResumable, ConfigError, StoreError) as e:
            return Refused("resume", f"That run cannot be resumed: {e}")
        if (busy := self.live.take_over(run_id, self.limits.max_concurrent)) is not None:
            if busy < 0:
                return Refused("resume", "Another visitor resumed that run first.")
            return self._busy(busy)
        limits = ready.row.run_options.limits
        spent_before = self._spent(row)
        # All of what the run's budget has left, or nothing: the resumed run keeps its recorded budget.
        want = round(min(max(0.0, limits.cost_usd - spent_before), self.limits.max_run_usd), 6)
        key = f"{run_id}+{uuid.uuid4().hex[:8]}" if row.mode != "extractive" and want > 0 else None
        if key is not None:
            try:
                granted = self.ledger.reserve(key, want, self.limits.daily_usd, want)
            except StoreError:
                self.live.give_back(run_id)
                raise
            if granted is None:
                self.live.give_back(run_id)
                return self._spend_refused()
        job = Job(id=uuid.uuid4().hex, run_id=run_id, question=row.question, mode=ready.row.run_options.mode,
                  limits=limits, started=self._clock(), spend_key=key, spent_before=spent_before, resuming=ready)
        return self._launch(job, ready.settings)

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
