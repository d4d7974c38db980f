"""The live runs' spend ledger: today's dollars (UTC day) in SQLite, shared by every session and process."""
from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pipeline.store.sqlite_tx import immediate, opened


def utc_day(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


class SpendLedger:
    """Today's live-run dollars (UTC day) in SQLite: a run reserves its cap before it starts, settles to real cost."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time):
        self.path = Path(path)
        self._clock = clock
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with opened(self.path) as db:
            db.execute("CREATE TABLE IF NOT EXISTS live_spend (run_id TEXT PRIMARY KEY, day TEXT NOT NULL, "
                       "reserved REAL NOT NULL, spent REAL, finished INTEGER NOT NULL DEFAULT 0)")

    @staticmethod
    def _total(db: sqlite3.Connection, day: str) -> float:
        # A run still in flight counts at its full cap (a crashed one too: the ceiling errs on the safe side).
        row = db.execute("SELECT COALESCE(SUM(CASE WHEN finished THEN spent ELSE reserved END), 0) "
                         "FROM live_spend WHERE day = ?", (day,)).fetchone()
        return float(row[0])

    def today(self) -> float:
        """Dollars spent or reserved today."""
        with opened(self.path) as db:
            return self._total(db, utc_day(self._clock()))

    def reserve(self, run_id: str, want: float, ceiling: float, minimum: float) -> float | None:
        """Reserve up to `want` dollars within today's `ceiling`: the amount granted, or None when under `minimum`."""
        with immediate(self.path) as db:
            day = utc_day(self._clock())
            grant = round(min(want, ceiling - self._total(db, day)), 6)
            if grant < minimum:
                return None
            db.execute("INSERT INTO live_spend (run_id, day, reserved) VALUES (?, ?, ?)", (run_id, day, grant))
            return grant

    def settle(self, run_id: str, spent: float) -> None:
        """Replace a run's reservation by what it really spent."""
        with opened(self.path) as db:
            db.execute("UPDATE live_spend SET spent = ?, finished = 1 WHERE run_id = ?", (spent, run_id))
