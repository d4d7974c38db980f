"""The live runs' spend ledger: today's dollars (UTC day) in the database, shared by every session, process and app
instance on it (RESEARCH_DB)."""
from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from pipeline.store.database import Database, Transaction

LOCK = "verbatim-spend"


def utc_day(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


class SpendLedger:
    """Today's live-run dollars (UTC day): a run reserves its cap before it starts, and settles to its real cost.

    Reservations are made in a transaction that serialises every reserver on the database (SQLite's write lock, a
    PostgreSQL advisory lock), so parallel reservations from any number of instances never pass the ceiling.
    """

    def __init__(self, db: Database, clock: Callable[[], float] = time.time):
        self.db, self._clock = db, clock

    @staticmethod
    def _total(tx: Transaction | Database, day: str) -> float:
        # A run still in flight counts at its full cap (a crashed one too, until it is released).
        rows = tx.execute("SELECT COALESCE(SUM(CASE WHEN finished = 1 THEN spent ELSE reserved END), 0) "
                          "FROM live_spend WHERE day = ?", (day,)).rows
        return float(rows[0][0])

    def today(self) -> float:
        """Dollars spent or reserved today."""
        return self._total(self.db, utc_day(self._clock()))

    def reserve(self, key: str, want: float, ceiling: float, minimum: float) -> float | None:
        """Reserve up to `want` dollars within today's `ceiling` under `key` (a run id, or a resumed run's own key):
        the amount granted, or None when under `minimum`."""
        with self.db.transaction(LOCK) as tx:
            day = utc_day(self._clock())
            grant = round(min(want, ceiling - self._total(tx, day)), 6)
            if grant < minimum:
                return None
            tx.execute("INSERT INTO live_spend (run_id, day, reserved) VALUES (?, ?, ?)", (key, day, grant))
            return grant

    def settle(self, key: str, spent: float) -> None:
        """Replace a reservation by what was really spent (a run whose process died is released the same way)."""
        self.db.execute("UPDATE live_spend SET spent = ?, finished = 1 WHERE run_id = ?", (spent, key))

    def settle_run(self, run_id: str, spent_total: float, tx: Transaction | None = None) -> None:
        """Settle every open reservation of a run (its first, and any a resume made) so that the run's dollars add
        up to `spent_total`, what it spent in all: how a run whose instance died is released."""
        if tx is None:
            with self.db.transaction(LOCK) as own:
                self.settle_run(run_id, spent_total, own)
            return
        keys = (run_id, f"{run_id}+%")
        settled = tx.execute("SELECT COALESCE(SUM(spent), 0) FROM live_spend WHERE (run_id = ? OR run_id LIKE ?) "
                             "AND finished = 1", keys).rows[0][0]
        open_keys = [r[0] for r in tx.execute("SELECT run_id FROM live_spend WHERE (run_id = ? OR run_id LIKE ?) "
                                              "AND finished = 0 ORDER BY run_id", keys).rows]
        left = max(0.0, spent_total - float(settled))
        for i, key in enumerate(open_keys):  # the remainder goes to the first; the others close at zero
            tx.execute("UPDATE live_spend SET spent = ?, finished = 1 WHERE run_id = ?", (left if i == 0 else 0.0,
                                                                                            key))
