"""The run store: SQLite (WAL) holding every run and every event of it, exactly as sent and received, never a secret.

One `SqliteRunStore` per process and database file: one connection guarded by a lock, in autocommit mode, so every
event is its own committed transaction (it survives a kill of the process the moment `emit` returns). Several
processes may share the file: WAL lets readers run beside the one writer, and the busy timeout makes writers
wait for each other instead of failing with "database is locked". Schema changes are ordered migration
functions; `PRAGMA user_version` says how many have run, and opening a store applies the missing ones in place.
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr

from pipeline.config import Settings
from pipeline.core.event_types import CheckpointEvent, Event, is_replayed
from pipeline.core.events import redact
from pipeline.core.schema import BudgetLimits, RunOptions, RunResult, Usage
from pipeline.core.untrusted import without_nonces
from pipeline.store.base import (
    INTERRUPTED,
    RUNNING,
    RunListing,
    RunRow,
    StoredEvent,
    StoreError,
    process_alive,
    this_host,
)

__all__ = ["INTERRUPTED", "REEMITTED", "RUNNING", "SCHEMA_VERSION", "RunListing", "RunRow", "SqliteRunRecorder",
           "SqliteRunStore", "StoreError", "StoredEvent", "settings_secrets"]

BUSY_TIMEOUT_MS = 30_000
SHORTEST_SECRET = 4  # shorter "secrets" would scrub ordinary words and numbers out of the evidence
# Derived events, not calls: on resume the replayed part of the run emits them again, exactly as recorded.
REEMITTED = ("step", "checkpoint", "tool_call", "finding", "rejected")


def _v1(db: sqlite3.Connection) -> None:
    """The first schema: runs and their events."""
    db.execute("""CREATE TABLE runs (
        id TEXT PRIMARY KEY, question TEXT NOT NULL, mode TEXT NOT NULL, models TEXT NOT NULL,
        prompt_version TEXT NOT NULL, started TEXT NOT NULL, finished TEXT, status TEXT NOT NULL,
        limits TEXT NOT NULL, usage TEXT, cost_usd REAL NOT NULL DEFAULT 0, result TEXT)""")
    db.execute("""CREATE TABLE events (
        run_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, payload TEXT NOT NULL,
        tokens INTEGER NOT NULL DEFAULT 0, ms REAL NOT NULL DEFAULT 0, PRIMARY KEY (run_id, seq))""")


def _v2(db: sqlite3.Connection) -> None:
    """Replay and resume: the run's options, its replay origin and owning process; event times; listing indexes.

    The runs table is rebuilt rather than altered so that `result`, the one large column, stays last: listing
    reads only the columns before it, which then sit in each row's first page.
    """
    db.execute("""CREATE TABLE runs_v2 (
        id TEXT PRIMARY KEY, question TEXT NOT NULL, mode TEXT NOT NULL, models TEXT NOT NULL,
        prompt_version TEXT NOT NULL, started TEXT NOT NULL, finished TEXT, status TEXT NOT NULL,
        limits TEXT NOT NULL, options TEXT, replay_of TEXT, pid INTEGER, host TEXT, usage TEXT,
        cost_usd REAL NOT NULL DEFAULT 0, result TEXT)""")
    db.execute("""INSERT INTO runs_v2 (id, question, mode, models, prompt_version, started, finished, status, limits,
                  usage, cost_usd, result)
                  SELECT id, question, mode, models, prompt_version, started, finished, status, limits, usage,
                  cost_usd, result FROM runs""")
    db.execute("DROP TABLE runs")
    db.execute("ALTER TABLE runs_v2 RENAME TO runs")
    db.execute("CREATE INDEX runs_by_start ON runs (started DESC, id)")
    db.execute("ALTER TABLE events ADD COLUMN at REAL")
    db.execute("CREATE INDEX events_by_kind ON events (run_id, kind, seq)")


# Append only: a migration that has shipped is never edited, or old files would be upgraded differently.
MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_v1, _v2)
SCHEMA_VERSION = len(MIGRATIONS)


def settings_secrets(settings: Settings) -> list[str]:
    """The value of every SecretStr setting (the model's and each search provider's keys); recorders scrub them."""
    # By type rather than by name: a provider added later has its key scrubbed without a change here.
    keys = (getattr(settings, name) for name in type(settings).model_fields)
    return [k.get_secret_value() for k in keys if isinstance(k, SecretStr) and k.get_secret_value()]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _fingerprint(kind: str, text: str) -> str:
    return f"{kind}\n{without_nonces(text)}"


class SqliteRunStore:
    """Runs and events in one SQLite file; safe to share between threads; several processes may open the file."""

    def __init__(self, path: str | Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                       timeout=busy_timeout_ms / 1000)
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._db.execute("PRAGMA journal_mode = WAL")
            # NORMAL in WAL mode: a commit is durable once written to the OS (a killed process loses nothing);
            # only a power cut may lose the last commits, never corrupt the file.
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._migrate()
        except sqlite3.DatabaseError as e:
            raise StoreError(f"cannot use the run store {self.path} ({e}); set RESEARCH_DB to a writable "
                             "SQLite file") from None

    def _migrate(self) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")  # one process migrates; the others wait, then see it done
            try:
                version = self._db.execute("PRAGMA user_version").fetchone()[0]
                if version > SCHEMA_VERSION:
                    raise StoreError(f"{self.path} has schema version {version}, newer than this program's "
                                     f"{SCHEMA_VERSION}; upgrade the program or set RESEARCH_DB to another file")
                for number in range(version, SCHEMA_VERSION):
                    MIGRATIONS[number](self._db)
                    self._db.execute(f"PRAGMA user_version = {number + 1}")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def schema_version(self) -> int:
        with self._lock:
            return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def close(self) -> None:
        """Close the connection (the WAL is folded into the main file when this was the last one)."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> SqliteRunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, sql: str, args: Iterable[Any]) -> sqlite3.Cursor:
        with self._lock:
            return self._db.execute(sql, tuple(args))

    def _read(self, sql: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, tuple(args)).fetchall()

    # -- writing: through one recorder per run, which cleans what it hands to the methods below -----------
    def recorder(self, run_id: str, *, secrets: Iterable[str | None] = (),
                 skip_replayed: bool = False) -> SqliteRunRecorder:
        """The write handle of one run: an EventSink, plus start and finish of the run row."""
        return SqliteRunRecorder(self, run_id, secrets=secrets, skip_replayed=skip_replayed)

    def add_run(self, run_id: str, *, question: str, mode: str, models_json: str, prompt_version: str,
                limits_json: str, options_json: str, replay_of: str | None) -> None:
        """Insert the run row with status running, owned by this process; StoreError if the id is taken."""
        try:
            self._write(
                """INSERT INTO runs (id, question, mode, models, prompt_version, started, status, limits, options,
                   replay_of, pid, host, usage, cost_usd) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,0)""",
                (run_id, question, mode, models_json, prompt_version, _now(), RUNNING, limits_json, options_json,
                 replay_of, os.getpid(), this_host(), Usage().model_dump_json()))
        except sqlite3.IntegrityError:
            raise StoreError(f"run {run_id!r} already exists in {self.path}") from None

    def reopen_run(self, run_id: str) -> None:
        """Mark an existing run as running again, owned by this process."""
        self._write("UPDATE runs SET status = ?, finished = NULL, result = NULL, pid = ?, host = ? WHERE id = ?",
                    (RUNNING, os.getpid(), this_host(), run_id))

    def finish_run(self, run_id: str, *, status: str, usage_json: str, cost_usd: float, result_json: str) -> None:
        """Store the finished run's status, usage, cost and RunResult."""
        self._write("UPDATE runs SET finished = ?, status = ?, usage = ?, cost_usd = ?, result = ? WHERE id = ?",
                    (_now(), status, usage_json, cost_usd, result_json, run_id))

    def add_event(self, run_id: str, seq: int, kind: str, payload_json: str, tokens: int, ms: float) -> None:
        """Append one event (committed when this returns)."""
        self._write("INSERT INTO events (run_id, seq, kind, payload, tokens, ms, at) VALUES (?,?,?,?,?,?,?)",
                    (run_id, seq, kind, payload_json, int(tokens), float(ms), time.time()))

    def claim(self, row: RunRow) -> None:
        """Make this process the owner of the running `row` as it was read (resume); StoreError when another
        process claimed it since: compare-and-swap, so of two resumes racing for one run only one proceeds."""
        claimed = self._write("UPDATE runs SET pid = ?, host = ? WHERE id = ? AND status = ? AND pid IS ? "
                              "AND host IS ?", (os.getpid(), this_host(), row.id, RUNNING, row.pid,
                                                row.host)).rowcount
        if claimed != 1:
            raise StoreError(f"another process took over run {row.id} first (a second resume?); let it finish "
                             "(`python -m pipeline runs` shows its status)")

    def next_seq(self, run_id: str) -> int:
        """The sequence number the run's next event gets."""
        row = self._read("SELECT MAX(seq) FROM events WHERE run_id = ?", (run_id,))
        return int(row[0][0] or 0) + 1

    # -- reading -------------------------------------------------------------------------------------------
    def run(self, run_id: str) -> RunRow | None:
        """The run row, or None when there is no such run."""
        rows = self._read("""SELECT id, question, mode, models, prompt_version, started, finished, status, limits,
                             options, replay_of, pid, host, usage, cost_usd FROM runs WHERE id = ?""", (run_id,))
        if not rows:
            return None
        (id_, question, mode, models, version, started, finished, status, limits, options, replay_of, pid, host,
         usage, cost) = rows[0]
        return RunRow(id=id_, question=question, mode=mode, models=json.loads(models), prompt_version=version,
                      started=started, finished=finished, status=status,
                      limits=BudgetLimits.model_validate_json(limits),
                      options=RunOptions.model_validate_json(options) if options else None, replay_of=replay_of,
                      pid=pid, host=host, usage=Usage.model_validate_json(usage) if usage else None, cost_usd=cost)

    def require_run(self, run_id: str) -> RunRow:
        """The run row; StoreError naming the fix when there is no such run."""
        row = self.run(run_id)
        if row is None:
            raise StoreError(f"there is no run {run_id!r} in {self.path}; `python -m pipeline runs` lists them "
                             "(RESEARCH_DB chooses the file)")
        return row

    def runs(self, limit: int | None = None) -> list[RunListing]:
        """Runs, newest first: id, date, question, mode, status (interrupted when its process is gone), cost."""
        sql = "SELECT id, started, question, mode, status, cost_usd, pid, host FROM runs ORDER BY started DESC, id"
        rows = self._read(sql + (" LIMIT ?" if limit else ""), (limit,) if limit else ())
        listing = []
        for id_, started, question, mode, status, cost, pid, host in rows:
            if status == RUNNING and not process_alive(pid, host):
                status = INTERRUPTED
            listing.append(RunListing(id=id_, date=started, question=question, mode=mode, status=status,
                                      cost=cost or 0.0))
        return listing

    def result(self, run_id: str) -> RunResult | None:
        """The finished run's RunResult; None while the run has not finished."""
        rows = self._read("SELECT result FROM runs WHERE id = ?", (run_id,))
        return RunResult.model_validate_json(rows[0][0]) if rows and rows[0][0] else None

    def events(self, run_id: str, kinds: Iterable[str] | None = None) -> list[StoredEvent]:
        """The run's events in order, optionally only those of `kinds`."""
        kinds = list(kinds) if kinds is not None else None
        sql = "SELECT seq, kind, payload, tokens, ms, at FROM events WHERE run_id = ?"
        args: list[Any] = [run_id]
        if kinds is not None:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            args += kinds
        rows = self._read(sql + " ORDER BY seq", args)
        return [StoredEvent(seq=s, kind=k, payload=json.loads(p), tokens=t, ms=m, at=a) for s, k, p, t, m, a in rows]

    def checkpoint(self, run_id: str) -> CheckpointEvent | None:
        """The run's latest checkpoint, or None."""
        rows = self._read("SELECT payload FROM events WHERE run_id = ? AND kind = 'checkpoint' ORDER BY seq DESC "
                          "LIMIT 1", (run_id,))
        return CheckpointEvent.from_payload(json.loads(rows[0][0])) if rows else None


class SqliteRunRecorder:
    """Writes one run: its row at start and finish, and every event in between (an EventSink, thread-safe).

    Every string written passes `redact` (secret-named fields, key-shaped strings) and has each of `secrets`
    (the run's keys) replaced by "[redacted]"; headers are never part of an event.
    With `skip_replayed` (resume: the store has them already), events marked {"replayed": true} are not written,
    nor a REEMITTED event equal to one recorded (page nonces aside) that an earlier one has not matched yet.
    """

    def __init__(self, store: SqliteRunStore, run_id: str, *, secrets: Iterable[str | None] = (),
                 skip_replayed: bool = False):
        self.store, self.run_id = store, run_id
        self._secrets = tuple(sorted({s for s in secrets if s and len(s) >= SHORTEST_SECRET}, key=len, reverse=True))
        self._skip_replayed = skip_replayed
        recorded = store.events(run_id, REEMITTED) if skip_replayed else []
        self._recorded = Counter(_fingerprint(e.kind, _json(e.payload)) for e in recorded)
        self._seq_lock = threading.Lock()
        self._seq: int | None = None

    def clean(self, value: Any) -> Any:
        """`value` as it may be written: secrets removed."""
        return redact(value, self._secrets)

    def _text(self, model: BaseModel) -> str:
        # Scrubbed before serialising: in JSON text a secret holding " or \ is escaped, and would not be found.
        return _json(self.clean(model.model_dump(mode="json")))

    def start(self, *, question: str, options: RunOptions, models: dict[str, str], prompt_version: str,
              replay_of: str | None = None) -> None:
        """Insert the run row with status running; StoreError if the id is taken."""
        self.store.add_run(self.run_id, question=self.clean(question), mode=options.mode, models_json=_json(models),
                           prompt_version=prompt_version, limits_json=options.limits.model_dump_json(),
                           options_json=self._text(options), replay_of=replay_of)

    def reopen(self) -> None:
        """Mark an existing run as running again in this process (resume)."""
        self.store.reopen_run(self.run_id)

    def finish(self, result: RunResult) -> None:
        """Store the RunResult, its status, usage and cost."""
        self.store.finish_run(self.run_id, status=result.status, usage_json=result.usage.model_dump_json(),
                              cost_usd=result.usage.cost_usd, result_json=self._text(result))

    def emit(self, event: Event, *, tokens: int = 0, ms: float = 0.0) -> None:
        if self._skip_replayed and is_replayed(event):
            return
        kind = event.kind
        text = _json(self.clean(event.payload()))  # serialised outside the lock: threads contend only for the insert
        key = _fingerprint(kind, text) if self._recorded and kind in REEMITTED else None
        with self._seq_lock:
            if key is not None and self._recorded[key] > 0:
                self._recorded[key] -= 1
                return
            if self._seq is None:
                self._seq = self.store.next_seq(self.run_id)
            seq, self._seq = self._seq, self._seq + 1
            self.store.add_event(self.run_id, seq, kind, text, tokens, ms)
