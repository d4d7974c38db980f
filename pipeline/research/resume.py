"""Resuming an interrupted run from the store: the same run id, its recorded calls served from the store instead of
repeated, the steps after its last checkpoint run anew. The CLI's `resume` and the app's Resume button both use it."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pipeline.config import ConfigError, Settings
from pipeline.core.events import EventSink
from pipeline.core.schema import RunResult
from pipeline.replay.tape import Tape, TapeMode
from pipeline.research.context import RunContext
from pipeline.research.orchestrator import research
from pipeline.research.preflight import require_run_access
from pipeline.store.base import RUNNING, RunRow, RunStore
from pipeline.web.docs_pages import DocsSearch, provider_name


class NotResumable(RuntimeError):
    """The run cannot be resumed (finished already, or still running); the message says why and what to do."""


@dataclass(frozen=True)
class Resumption:
    """What a resume needs, checked: the run's row, its recorded calls, and settings with its own models."""

    row: RunRow
    tape: Tape
    settings: Settings


def recorded_models(settings: Settings, row: RunRow) -> Settings:
    """Settings with the run's own model ids and provider: recorded answers belong to those models, in that
    provider's format."""
    update: dict[str, str] = {f"{k}_model": row.models[k] for k in ("lead", "worker") if row.models.get(k)}
    if row.models.get("lead", "none") != "none":
        update["model_provider"] = row.models.get("provider") or "anthropic"
    return settings.model_copy(update=update)


def prepare(store: RunStore, run_id: str, settings: Settings) -> Resumption:
    """Check that `run_id` can be resumed with `settings`: NotResumable, StoreError or ConfigError saying why not."""
    row = store.require_run(run_id)
    if row.status != RUNNING:
        raise NotResumable(f"run {row.id} already finished ({row.status}); nothing to resume. Export it with: "
                           f"python -m pipeline export {row.id} PATH")
    if row.shown_status == RUNNING:
        raise NotResumable(f"run {row.id} is still running (process {row.pid} on {row.host}); stop it first, or "
                           "wait for it to finish")
    tape = Tape.from_store(store, row.id, TapeMode.RESUME)
    if row.run_options.docs is not None:  # the documents folder it researched, read again
        settings = settings.model_copy(update={"docs_dir": row.run_options.docs})
    if tape.provider and tape.provider != provider_name(settings):  # recorded searches belong to it
        web = tape.provider.removeprefix(f"{DocsSearch.name}+")
        if web == DocsSearch.name:
            raise ConfigError(f"run {row.id} searched its documents folder only; resume it with "
                              "RESEARCH_SEARCH_PROVIDER unset")
        raise ConfigError(f"run {row.id} searched with {tape.provider}; resume it with "
                          f"RESEARCH_SEARCH_PROVIDER={web} (and that provider's key or URL)")
    settings = recorded_models(settings, row)
    require_run_access(settings, row.run_options.mode)
    return Resumption(row, tape, settings)


def resume(store: RunStore, ready: Resumption, *, events: EventSink | None = None,
           context: Callable[..., RunContext] | None = None) -> RunResult:
    """Take the run over (StoreError when another process took it first) and run it to the end."""
    store.claim(ready.row)
    return research(ready.row.question, ready.settings, options=ready.row.run_options, run_id=ready.row.id,
                    store=store, tape=ready.tape, events=events, context=context)
