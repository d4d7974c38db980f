"""Live runs as every app instance sees them: one row per run in the database (RESEARCH_DB), written by the instance
that runs it (a heartbeat and a progress snapshot every second or so) and read by all of them. A running row whose
heartbeat is older than `stale_after` seconds belongs to an instance that died: it is shown as interrupted, its
spend reservation is released once, and a visitor with the access code can resume it on another instance."""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel

from pipeline.core.schema import BudgetLimits
from pipeline.store.base import this_host
from pipeline.store.database import Database, Transaction

LOCK = "verbatim-live-runs"
# This process, as the owner written in the rows it runs: host and a random part (pids repeat across containers).
INSTANCE = f"{this_host()}-{uuid.uuid4().hex[:8]}"
LiveStatus = Literal["running", "finished", "failed", "interrupted"]


class LiveRow(BaseModel):
    """One live run as stored: who runs it, its last heartbeat and progress snapshot (LiveProgress JSON)."""

    run_id: str
    question: str
    mode: str
    limits: BudgetLimits
    instance: str
    status: LiveStatus
    started: float
    heartbeat: float
    finished: float | None = None
    progress: str | None = None
    error: str | None = None
    cancel: bool = False


_COLUMNS = "run_id, question, mode, limits, instance, status, started, heartbeat, finished, progress, error, cancel"


def _row(values: tuple[object, ...]) -> LiveRow:
    data = dict(zip(_COLUMNS.split(", "), values, strict=True))
    data["limits"] = BudgetLimits.model_validate_json(str(data["limits"]))
    data["cancel"] = bool(data["cancel"])
    return LiveRow.model_validate(data)


class LiveRunTable:
    """The live_runs table; every method is one statement or one serialised transaction."""

    def __init__(self, db: Database, *, stale_after: float = 60.0, clock: Callable[[], float] = time.time,
                 instance: str = INSTANCE):
        self.db, self.stale_after, self._clock, self.instance = db, stale_after, clock, instance

    def _fresh_running(self, tx: Transaction | Database) -> int:
        rows = tx.execute("SELECT COUNT(*) FROM live_runs WHERE status = 'running' AND heartbeat > ?",
                          (self._clock() - self.stale_after,)).rows
        return int(rows[0][0])

    def running(self) -> int:
        """Live runs in progress on every instance (a silent instance's runs no longer count)."""
        return self._fresh_running(self.db)

    def add(self, run_id: str, question: str, mode: str, limits: BudgetLimits, max_concurrent: int) -> int | None:
        """Add a running row owned by this instance unless `max_concurrent` runs are in progress; None when added,
        else how many are."""
        with self.db.transaction(LOCK) as tx:
            busy = self._fresh_running(tx)
            if busy >= max_concurrent:
                return busy
            now = self._clock()
            tx.execute(f"INSERT INTO live_runs ({_COLUMNS}) VALUES (?,?,?,?,?,'running',?,?,NULL,NULL,NULL,0)",
                       (run_id, question, mode, limits.model_dump_json(), self.instance, now, now))
            return None

    def remove(self, run_id: str) -> None:
        """Forget a row that never ran (its spend reservation was refused)."""
        self.db.execute("DELETE FROM live_runs WHERE run_id = ? AND instance = ?", (run_id, self.instance))

    def beat(self, run_id: str, progress_json: str) -> tuple[bool, bool]:
        """Record the heartbeat and progress of a run this instance owns: (still ours, cancel asked). Not ours any
        more means the other instances took this one for dead (its beats stalled) and may resume the run."""
        owned = self.db.execute("UPDATE live_runs SET heartbeat = ?, progress = ? WHERE run_id = ? AND instance = ? "
                                "AND status = 'running'", (self._clock(), progress_json, run_id,
                                                           self.instance)).rowcount == 1
        rows = self.db.execute("SELECT cancel FROM live_runs WHERE run_id = ?", (run_id,)).rows
        return owned, bool(rows and rows[0][0])

    def finish(self, run_id: str, status: LiveStatus, progress_json: str, error: str | None) -> None:
        """The end of a run this instance still owns (one taken over by another instance is left to it)."""
        now = self._clock()
        self.db.execute("UPDATE live_runs SET status = ?, finished = ?, heartbeat = ?, progress = ?, error = ? "
                        "WHERE run_id = ? AND instance = ? AND status = 'running'",
                        (status, now, now, progress_json, error, run_id, self.instance))

    def request_cancel(self, run_id: str) -> bool:
        """Ask the instance running `run_id` to cancel it (it reads the flag with its next heartbeat)."""
        return self.db.execute("UPDATE live_runs SET cancel = 1 WHERE run_id = ? AND status = 'running'",
                               (run_id,)).rowcount == 1

    def get(self, run_id: str) -> LiveRow | None:
        """The row, with a running one whose heartbeat is stale shown as interrupted."""
        rows = self.db.execute(f"SELECT {_COLUMNS} FROM live_runs WHERE run_id = ?", (run_id,)).rows
        return self._shown(_row(rows[0])) if rows else None

    def _shown(self, row: LiveRow) -> LiveRow:
        if row.status == "running" and row.heartbeat <= self._clock() - self.stale_after:
            return row.model_copy(update={"status": "interrupted"})
        return row

    def stale(self) -> list[LiveRow]:
        """Rows still marked running whose instance has gone silent."""
        rows = self.db.execute(f"SELECT {_COLUMNS} FROM live_runs WHERE status = 'running' AND heartbeat <= ?",
                               (self._clock() - self.stale_after,)).rows
        return [_row(r) for r in rows]

    def mark_stale(self, run_id: str, status: LiveStatus = "interrupted", tx: Transaction | None = None) -> bool:
        """Mark a stale running row `status` (interrupted; or finished/failed when the run store shows it ended);
        True for exactly one caller, who then releases its spend."""
        return (tx or self.db).execute("UPDATE live_runs SET status = ? WHERE run_id = ? AND "
                                       "status = 'running' AND heartbeat <= ?",
                                       (status, run_id, self._clock() - self.stale_after)).rowcount == 1

    def interrupted(self) -> list[LiveRow]:
        rows = self.db.execute(f"SELECT {_COLUMNS} FROM live_runs WHERE status = 'interrupted' ORDER BY started DESC"
                               ).rows
        return [_row(r) for r in rows]

    def take_over(self, run_id: str, max_concurrent: int) -> int | None:
        """Make this instance the owner of an interrupted run, unless `max_concurrent` runs are in progress; None
        when taken, else how many are (or -1 when it is not interrupted: another visitor resumed it first)."""
        with self.db.transaction(LOCK) as tx:
            busy = self._fresh_running(tx)
            if busy >= max_concurrent:
                return busy
            now = self._clock()
            taken = tx.execute("UPDATE live_runs SET status = 'running', instance = ?, heartbeat = ?, cancel = 0, "
                               "finished = NULL, error = NULL WHERE run_id = ? AND status = 'interrupted'",
                               (self.instance, now, run_id)).rowcount
            return None if taken == 1 else -1

    def give_back(self, run_id: str) -> None:
        """Undo take_over when the resumed run could not start (its spend was refused)."""
        self.db.execute("UPDATE live_runs SET status = 'interrupted' WHERE run_id = ? AND instance = ?",
                        (run_id, self.instance))
