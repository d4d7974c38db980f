"""The run store's seam: the RunStore and RunRecorder protocols, and the rows they read and write.

A run store keeps every run (its row: question, options, status, usage, the RunResult when finished) and every event
of it in order, as the kind and the JSON payload the event wrote; `StoredEvent.event()` reads one back as its typed
model. The SQL store (sql.py) implements it on SQLite or PostgreSQL; `pipeline.store.open_store` picks by
RESEARCH_DB.
"""
from __future__ import annotations

import os
import platform
import time
from collections.abc import Iterable
from typing import Any, Protocol, Self

from pydantic import BaseModel

from pipeline.core.event_types import CheckpointEvent, Event, parse_event
from pipeline.core.schema import BudgetLimits, RunOptions, RunResult, Usage

RUNNING = "running"
INTERRUPTED = "interrupted"  # shown, never stored: a running row whose process is gone
# Seconds without a heartbeat after which a running run's process is taken for dead (RESEARCH_HEARTBEAT_STALE).
HEARTBEAT_STALE = 60.0


class StoreError(RuntimeError):
    """The store cannot be used as asked (unknown run, a newer schema); the message says what to do."""


class RunRow(BaseModel):
    """One row of the runs table (without the RunResult)."""

    id: str
    question: str
    mode: str
    models: dict[str, str]
    prompt_version: str
    started: str
    finished: str | None
    status: str
    limits: BudgetLimits
    options: RunOptions | None
    replay_of: str | None
    pid: int | None
    host: str | None
    usage: Usage | None
    cost_usd: float
    heartbeat: float | None = None
    stale_after: float = HEARTBEAT_STALE

    @property
    def shown_status(self) -> str:
        """The status, with a running row whose process is gone shown as "interrupted"."""
        return shown_status(self.status, self.pid, self.host, self.heartbeat, self.stale_after)

    @property
    def run_options(self) -> RunOptions:
        """The options the run was started with (older rows kept only mode and limits)."""
        return self.options or RunOptions(mode=self.mode, limits=self.limits)  # type: ignore[arg-type]


class RunListing(BaseModel):
    """One line of `python -m pipeline runs`."""

    id: str
    date: str
    question: str
    mode: str
    status: str
    cost: float


class StoredEvent(BaseModel):
    """One recorded event: its kind and JSON payload exactly as written."""

    seq: int
    kind: str
    payload: dict[str, Any]
    tokens: int = 0
    ms: float = 0.0
    at: float | None = None

    def event(self) -> Event:
        """The typed event; ValueError or ValidationError when the row is not one this program knows."""
        return parse_event(self.kind, self.payload)


def this_host() -> str:
    """Who can check a run row's process id: the machine's name and, where Linux tells it, the process-id namespace,
    since containers on one machine may share a name and number their processes alike (each has its own pid 1)."""
    try:
        return f"{platform.node()}/pidns:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return platform.node()


def shown_status(status: str, pid: int | None, host: str | None, heartbeat: float | None,
                 stale_after: float = HEARTBEAT_STALE, now: float | None = None) -> str:
    """A run's status as shown: "interrupted" for a running row whose heartbeat is stale (any host), or, for a row
    written before heartbeats, whose process is gone."""
    if status != RUNNING:
        return status
    if heartbeat is not None:
        fresh = (now if now is not None else time.time()) - heartbeat <= stale_after
        # On this host a dead process is known at once; elsewhere only its silence tells.
        alive = fresh and (host != this_host() or process_alive(pid, host))
        return RUNNING if alive else INTERRUPTED
    return RUNNING if process_alive(pid, host) else INTERRUPTED


def process_alive(pid: int | None, host: str | None) -> bool:
    """Whether the process that runs a row is alive: a row without one predates resume (its program is gone);
    another host's process cannot be checked, so the row is trusted."""
    if pid is None:
        return False
    if host != this_host():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunRecorder(Protocol):
    """Writes one run: its row at start and finish, and every event in between (an EventSink, thread-safe).

    Nothing written holds a secret: secret-named fields, key-shaped strings and the run's keys are redacted.
    """

    run_id: str

    def start(self, *, question: str, options: RunOptions, models: dict[str, str], prompt_version: str,
              replay_of: str | None = None) -> None:
        """Add the run with status running; StoreError if the id is taken."""
        ...

    def reopen(self) -> None:
        """Mark an existing run as running again in this process (resume)."""
        ...

    def stop(self) -> None:
        """Stop the run's heartbeat (finish does it; a run that ends without a result calls it)."""
        ...

    def finish(self, result: RunResult) -> None:
        """Store the RunResult, its status, usage and cost."""
        ...

    def emit(self, event: Event, *, tokens: int = 0, ms: float = 0.0) -> None:
        """Append one event to the run."""
        ...


class RunStore(Protocol):
    """Runs and their events; safe to share between threads; closed when the `with` block ends."""

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...

    def close(self) -> None: ...

    def recorder(self, run_id: str, *, secrets: Iterable[str | None] = (), skip_replayed: bool = False) -> RunRecorder:
        """The write handle of one run; with `skip_replayed` (resume) events served from its recording are not
        written again."""
        ...

    def claim(self, row: RunRow) -> None:
        """Make this process the owner of the running `row` as it was read; StoreError when another took it."""
        ...

    def run(self, run_id: str) -> RunRow | None:
        """The run row, or None when there is no such run."""
        ...

    def require_run(self, run_id: str) -> RunRow:
        """The run row; StoreError naming the fix when there is no such run."""
        ...

    def runs(self, limit: int | None = None) -> list[RunListing]:
        """Runs, newest first."""
        ...

    def result(self, run_id: str) -> RunResult | None:
        """The finished run's RunResult; None while the run has not finished."""
        ...

    def events(self, run_id: str, kinds: Iterable[str] | None = None) -> list[StoredEvent]:
        """The run's events in order, optionally only those of `kinds`."""
        ...

    def checkpoint(self, run_id: str) -> CheckpointEvent | None:
        """The run's latest checkpoint, or None."""
        ...
