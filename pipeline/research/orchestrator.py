"""The orchestrator: one run of the steps of its mode (research/flows.py) on one budget and notebook, recorded."""
from __future__ import annotations

import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from pipeline.config import Settings
from pipeline.core.budget import Budget
from pipeline.core.event_types import (
    Event,
    FetchEvent,
    InternalErrorEvent,
    SearchEvent,
    SessionEvent,
    StepEvent,
    TapeEvent,
)
from pipeline.core.events import EventSink, FanOut, NullSink
from pipeline.core.notebook import Notebook
from pipeline.core.schema import Finding, Plan, Problem, RunOptions, RunResult, RunStatus
from pipeline.models.base import LLMError, ModelClient
from pipeline.models.factory import live_transport, model_client
from pipeline.models.none import NoModel
from pipeline.replay.checkpoint import Checkpoints
from pipeline.replay.recorded import RecordedModel, RecordedPages, RecordedProvider, RecordedSearch
from pipeline.replay.tape import Tape, TapeMode
from pipeline.research.context import CalculationLog, RunContext
from pipeline.research.flows import SoFar, extractive_flow, model_flow
from pipeline.research.prompts import version as prompt_version
from pipeline.research.steps.analyse import Analysis
from pipeline.store.base import RunRecorder, RunStore, StoreError
from pipeline.store.sql import settings_secrets
from pipeline.web.corpus import Corpus
from pipeline.web.docs_index import DocsIndex
from pipeline.web.docs_pages import NOTICE_STEP, notice_problem, refused_notice, searches_web, with_documents
from pipeline.web.fetch import Fetcher, PageLoader, WebPages
from pipeline.web.folder import folder_root
from pipeline.web.search.anthropic import AnthropicWebSearch
from pipeline.web.search.service import Searcher, SearchProvider, SearchService, make_provider

# RunOptions left unset by a caller that a new run fills in (a run recorded before a choice existed ran without it).
NEW_RUN_CHOICES: dict[str, Any] = {"first_search": "code", "batch_calls": True}


class FetchTally:
    """Counts searches and pages that failed, by reason, so a report without findings can say why."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.failed: Counter[str] = Counter()
        self.searches_failed: Counter[str] = Counter()
        self.searches_ok = 0

    def emit(self, event: Event, *, tokens: int = 0, ms: float = 0.0) -> None:
        if isinstance(event, FetchEvent) and not event.ok and not event.cached:
            reason: str = event.error_kind or "error"
            if reason == "http_status" and event.status:
                reason = f"HTTP {event.status}"
            if reason not in ("budget", "repeat_failure"):
                with self._lock:
                    self.failed[reason] += 1
        elif isinstance(event, SearchEvent):
            with self._lock:
                if event.message and not event.count and "budget" not in event.message.lower():
                    self.searches_failed[" ".join(event.message.split())[:160]] += 1
                elif event.count:
                    self.searches_ok += 1

    def search_outage(self) -> str | None:
        """One sentence when every search failed (the search service is down), else None."""
        with self._lock:
            if self.searches_ok or not self.searches_failed:
                return None
            total = sum(self.searches_failed.values())
            message = self.searches_failed.most_common(1)[0][0]
        return f"All {total} searches failed, so no page could be found ({message})."

    def note(self) -> str | None:
        """One sentence on failed searches or unreadable pages, or None when every one worked."""
        if (outage := self.search_outage()) is not None:
            return outage
        with self._lock:
            if not self.failed:
                return None
            total = sum(self.failed.values())
            reasons = ", ".join(f"{n} {r}" for r, n in self.failed.most_common())
        return (f"{total} page{'s' if total != 1 else ''} found could not be read ({reasons}), "
                "so nothing could be quoted from them.")


class RunNotRecorded(StoreError):
    """The run store failed to record an event, so the run stopped there (each later event of any thread raises too,
    so nothing more is spent unrecorded), or failed to record the finished result. `result` is what the run had:
    status "failed" when its steps were cut short, with a "store_failed" problem saying how to go on. The run's row
    is left unfinished, so once the store is writable again `resume` continues it, repeating no recorded call."""

    def __init__(self, message: str, result: RunResult):
        super().__init__(message)
        self.result = result


class _Recording:
    """The recorder as one of the run's event sinks: its first StoreError stops the run."""

    def __init__(self, recorder: RunRecorder) -> None:
        self.recorder = recorder
        self.error: StoreError | None = None
        self.closed = False  # after the steps: events still reach the other sinks, never this failed store
        self._lock = threading.Lock()

    def emit(self, event: Event, *, tokens: int = 0, ms: float = 0.0) -> None:
        if self.error is not None:
            if self.closed:
                return
            raise StoreError(str(self.error))
        try:
            self.recorder.emit(event, tokens=tokens, ms=ms)
        except StoreError as e:
            with self._lock:
                self.error = self.error or e
            raise


def _not_recorded(error: StoreError, where: str, run_id: str) -> Problem:
    return Problem(kind="store_failed", step=where, message=(
        f"the run store could not record the run ({error}), so the run stopped {_where_said(where)}; what it had "
        f"recorded is kept. Free space on the database's disk or make it writable (or set RESEARCH_DB to another "
        f"database), then resume run {run_id}: recorded calls are not repeated"))


def _where_said(where: str) -> str:
    return "after its last step, before its result was saved" if where == "result" else f"in its {where} step"


def build_context(settings: Settings, options: RunOptions, events: EventSink, *,
                  provider: SearchProvider | None = None, tape: Tape | None = None) -> RunContext:
    """A fresh RunContext on one budget; the search provider from settings unless one is given.

    With a `tape` (replay, resume), the model transport, the searcher and the page loader are wrapped so that the
    recording answers first, and source, finding and calculation ids are preset from it; an offline replay needs no
    keys and touches no network.
    """
    budget = Budget(options.limits, settings.price)
    llm: ModelClient
    if options.mode == "extractive":
        llm = NoModel()
    else:
        llm = model_client(settings, budget, events, transport=None if tape is None else RecordedModel(
            tape, budget, events, live=None if tape.model_offline else live_transport(settings, budget, events)))
    if provider is None and tape is not None and tape.web_offline:
        name = tape.provider or settings.search_provider
        provider = (AnthropicWebSearch(llm.server_web_search, errors=(LLMError,)) if name == "anthropic"
                    else RecordedProvider(name))
    def web_search() -> SearchProvider:
        return make_provider(settings, server_web_search=llm.server_web_search, model_errors=(LLMError,))

    live = not (tape is not None and tape.web_offline)
    # The frozen web: with the corpus provider, pages come only from the saved copies.
    corpus = (Corpus.open(settings.corpus_dir) if settings.search_provider == "corpus" and live
              and searches_web(settings) else None)
    pages: PageLoader = WebPages(settings, budget=budget, corpus=corpus)
    notices = tape.notices if tape is not None and not live else []
    if settings.docs_dir is not None and live:  # the user's own files, alone or beside the web
        docs = DocsIndex.open(settings.docs_dir, settings)
        docs_provider, pages = with_documents(docs, settings, budget, web_search, pages)
        provider = provider or docs_provider
        notices = refused_notice(docs)
        for notice in notices:  # recorded, so a replay reports it as the run did
            events.emit(StepEvent(name=NOTICE_STEP, status="refused", errors=[notice]))
    provider = provider or web_search()
    search: Searcher = SearchService(provider, budget, events)
    if tape is not None:
        pages = RecordedPages(tape, pages, budget)
        search = RecordedSearch(tape, search, budget, events)
    preset = tape is not None and tape.serves_model  # a live model makes its own ids
    notebook = Notebook(events=events, preset=tape.ids if preset and tape else None)
    calculations = CalculationLog(events=events, preset=tape.calculation_ids if preset and tape else None)
    return RunContext(settings=settings, llm=llm, budget=budget, notebook=notebook, search=search,
                      fetcher=Fetcher(settings, events=events, loader=pages), events=events,
                      calculations=calculations, notices=[notice_problem(n) for n in notices])


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def research(question: str, settings: Settings | None = None, *, options: RunOptions | None = None,
             events: EventSink | None = None, run_id: str | None = None,
             context: Callable[..., RunContext] | None = None, store: RunStore | None = None,
             tape: Tape | None = None, secrets: Sequence[str] = ()) -> RunResult:
    """Run every step and return the RunResult; faults become problems, a bug becomes status "failed".

    With a `store`, the run and every event are recorded (keys from settings and `secrets` are scrubbed from
    everything written), with a checkpoint after each step and each worker; when the store fails to record, the run
    stops and RunNotRecorded (a StoreError) carries what it had. A cancelled budget (ctx.budget.cancel)
    ends the run with a "cancelled" problem and status "partial" (or "failed"). With a
    `tape` (replay/tape.py) the recorded calls are served instead of repeated: replay, or resume of `run_id`.
    A custom `context` factory is called as context(settings, options, events), plus tape=... when there is one.
    """
    settings = settings or Settings()
    options = options or RunOptions()
    if tape is None:  # a new run takes today's choices; a replayed run keeps its recorded ones
        options = options.model_copy(update={k: v for k, v in NEW_RUN_CHOICES.items() if getattr(options, k) is None})
    if tape is None and settings.docs_dir is not None:
        options = options.model_copy(update={"docs": str(folder_root(settings.docs_dir))})
    tally = FetchTally()
    run_id = run_id or new_run_id()
    question = " ".join(question.split())
    if not question:
        raise ValueError("the question is empty")
    recorder = _recorder(store, run_id, question, options, settings, secrets, tape)
    recording = _Recording(recorder) if recorder is not None else None
    try:
        checkpoints = Checkpoints()
        events = FanOut(events or NullSink(), tally, *([recording] if recording else []), checkpoints)
        if tape is not None:
            events.emit(SessionEvent(tape=tape.mode.value, from_run=tape.run_id))
        make_context = context or build_context
        ctx = (make_context(settings, options, events) if tape is None
               else make_context(settings, options, events, tape=tape))
        checkpoints.bind(ctx, events)
        steps = _Steps(checkpoints)
        status = _run_flow(question, ctx, options, settings, steps, tally, events, recording)
        status, cut = _closing_problems(ctx, steps, status, recording, run_id)
        result = _result(run_id, question, options, settings, ctx, steps, status)
        if tape is not None:
            events.emit(TapeEvent(**tape.summary()))
        if cut is not None:
            raise RunNotRecorded(cut.message, result)
        if recorder is not None:
            _save(recorder, result, run_id)
    finally:
        if recorder is not None:  # a run that raised (its store went away) must not look alive
            recorder.stop()
    return result


class _Steps:
    """Runs the named steps of one run: each timed, with a checkpoint after it; holds what they produced so far."""

    def __init__(self, checkpoints: Checkpoints) -> None:
        self.checkpoints = checkpoints
        self.so_far = SoFar()
        self.at = "start"  # the step running, for a problem that stops the run
        self.timings: dict[str, float] = {"started_at": round(time.time(), 3)}  # epoch seconds, UTC

    def __call__(self, name: str, fn: Callable[[], Any]) -> Any:
        # The steps emit their own detailed "step" events; here the wall time is kept and a checkpoint saved.
        self.at = name
        started = time.monotonic()
        try:
            output = fn()
        finally:
            self.timings[name] = round(time.monotonic() - started, 3)
        so_far = self.so_far
        self.checkpoints.save(name, plan=output if isinstance(output, Plan) else so_far.plan,
                              problems=so_far.problems, output=output)
        return output


def _run_flow(question: str, ctx: RunContext, options: RunOptions, settings: Settings, steps: _Steps,
              tally: FetchTally, events: EventSink, recording: _Recording | None) -> RunStatus:
    """The mode's steps; a failed store or a bug stops them with status "failed", keeping what they gathered."""
    so_far = steps.so_far
    try:
        flow = extractive_flow if options.mode == "extractive" else model_flow
        flow(question, ctx, options, steps, so_far, tally)
        if options.mode != "extractive" and ctx.budget.used().model_calls == 0:
            so_far.problems.append(Problem(  # every model call failed: the report rests on nothing
                kind="model_unavailable", step="run",
                message="no model call succeeded, so nothing was analysed; see the problems above (check "
                        f"{settings.model_access_names()} and the network), then run again"))
            return "failed"
        return "partial" if so_far.problems else "complete"
    except StoreError:
        if recording is None or recording.error is None:
            raise  # not this run's recorder: nothing here knows it
        return "failed"  # the steps were cut short where the store failed
    except Exception as e:  # our bug: keep everything gathered so far, and say so
        try:
            events.emit(InternalErrorEvent(error=repr(e), traceback=traceback.format_exc()))
        except StoreError:  # the store failed too: said later, as store_failed
            if recording is None or recording.error is None:
                raise
        so_far.problems.append(Problem(kind="internal_error", step="run",
                                       message=f"the run stopped on an internal error ({type(e).__name__}: {e}); "
                                               "what was gathered before it is kept"))
        return "failed"


def _closing_problems(ctx: RunContext, steps: _Steps, status: RunStatus, recording: _Recording | None,
                      run_id: str) -> tuple[RunStatus, Problem | None]:
    """The status with a store that stopped the run and a cancellation said as problems; the store's problem too."""
    problems = steps.so_far.problems
    cut: Problem | None = None
    if recording is not None and recording.error is not None:
        recording.closed = True
        cut = _not_recorded(recording.error, steps.at, run_id)
        problems.append(cut)
    if ctx.budget.cancelled:  # said here, so the recorded result is the one the caller gets
        problems.append(Problem(kind="cancelled", step="run",
                                message="the run was cancelled; what was gathered before that is kept"))
        status = "failed" if status == "failed" else "partial"
    return status, cut


def _result(run_id: str, question: str, options: RunOptions, settings: Settings, ctx: RunContext, steps: _Steps,
            status: RunStatus) -> RunResult:
    so_far, timings = steps.so_far, steps.timings
    timings["total"] = round(time.time() - timings["started_at"], 3)
    return RunResult(
        run_id=run_id, question=question, mode=options.mode,
        models=run_models(settings, options.mode), status=status, plan=so_far.plan, sources=ctx.notebook.sources(),
        findings=_as_passed_on(ctx, so_far.analysis), rejected=ctx.notebook.rejected(),
        calculations=ctx.calculations.all(), report=so_far.report,
        stats=ctx.stats.snapshot(), problems=[*so_far.problems, *ctx.notices], budget=ctx.budget.state(),
        usage=ctx.budget.used(),
        timings=timings,
    )


def _save(recorder: RunRecorder, result: RunResult, run_id: str) -> None:
    """Record the finished result; a store that fails here raises RunNotRecorded with the result marked so."""
    try:
        recorder.finish(result)
    except StoreError as e:  # every call is recorded: a resume serves them all and saves the result
        status: RunStatus = "partial" if result.status == "complete" else result.status
        problem = _not_recorded(e, "result", run_id)
        raise RunNotRecorded(problem.message, result.model_copy(update={
            "status": status, "problems": [*result.problems, problem]})) from None


def _recorder(store: RunStore | None, run_id: str, question: str, options: RunOptions, settings: Settings,
              secrets: Sequence[str], tape: Tape | None) -> RunRecorder | None:
    """The run's recorder with its row started (or reopened, on resume); None without a store."""
    if store is None:
        return None
    resuming = tape is not None and tape.mode is TapeMode.RESUME and store.run(run_id) is not None
    recorder = store.recorder(run_id, secrets=[*settings_secrets(settings), *secrets], skip_replayed=resuming)
    if resuming:
        recorder.reopen()
    else:
        recorder.start(question=question, options=options, prompt_version=prompt_version(),
                       models=run_models(settings, options.mode, prompts=False),
                       replay_of=tape.run_id if tape is not None and tape.mode is not TapeMode.RESUME else None)
    return recorder


def run_models(settings: Settings, mode: str, *, prompts: bool = True) -> dict[str, str]:
    """The models a run used, as RunResult.models records them: "none" for both in extractive mode."""
    if mode == "extractive":
        return {"lead": "none", "worker": "none"}
    models = {"lead": settings.lead_model, "worker": settings.worker_model}
    if settings.model_provider != "anthropic":  # absent means anthropic, as in every run recorded before the key
        models["provider"] = settings.model_provider
    return {**models, "prompts": prompt_version()} if prompts else models


def _as_passed_on(ctx: RunContext, analysis: Analysis | None) -> list[Finding]:
    """Every finding of the notebook, each as the writer saw it (analyse may lower confidence)."""
    seen = {f.id: f for f in analysis.findings} if analysis else {}
    return [seen.get(f.id, f) for f in ctx.notebook.findings()]
