"""The run store: every run and every event of it, exactly as sent and received, never a secret, in the database
RESEARCH_DB names (a SQLite file or PostgreSQL: pipeline/store/database.py; the schema: migrations.py).

Every event is its own committed statement, so it survives a kill of the process the moment `emit` returns. Several
processes, on one machine or several, may share the database. A running run's recorder writes a heartbeat; a
running row whose heartbeat is older than `stale_after` seconds belongs to a process that died: it is shown as
interrupted, and can be resumed.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Iterable
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
    HEARTBEAT_STALE,
    INTERRUPTED,
    RUNNING,
    RunListing,
    RunRow,
    StoredEvent,
    StoreError,
    shown_status,
    this_host,
)
from pipeline.store.database import BUSY_TIMEOUT_MS, Database, DuplicateKey, SqliteDatabase, secrets_of
from pipeline.store.migrations import SCHEMA_VERSION, migrate
from pipeline.store.migrations import schema_version as db_schema_version

__all__ = ["INTERRUPTED", "REEMITTED", "RUNNING", "SCHEMA_VERSION", "RunListing", "RunRow", "SqlRunRecorder",
           "SqlRunStore", "SqliteRunStore", "StoreError", "StoredEvent", "settings_secrets"]

SHORTEST_SECRET = 4  # shorter "secrets" would scrub ordinary words and numbers out of the evidence
# Derived events, not calls: on resume the replayed part of the run emits them again, exactly as recorded.
REEMITTED = ("step", "checkpoint", "tool_call", "finding", "rejected")


def settings_secrets(settings: Settings) -> list[str]:
    """The value of every SecretStr setting (the model's and each search provider's keys); recorders scrub them."""
    # By type rather than by name: a provider added later has its key scrubbed without a change here.
    keys = (getattr(settings, name) for name in type(settings).model_fields)
    found = [k.get_secret_value() for k in keys if isinstance(k, SecretStr) and k.get_secret_value()]
    return found + secrets_of(settings.db_path) + settings.url_secrets()  # a PostgreSQL URL's, an endpoint's


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _fingerprint(kind: str, text: str) -> str:
    return f"{kind}\n{without_nonces(text)}"


class SqlRunStore:
    """Runs and events in one database; safe to share between threads; several processes may share the database."""

    def __init__(self, db: Database, *, stale_after: float = HEARTBEAT_STALE, owns_db: bool = True):
        self.db, self.where = db, db.where
        self.stale_after, self._owns_db = stale_after, owns_db
        self._heartbeats: set[Heartbeat] = set()
        self._heartbeats_lock = threading.Lock()
        migrate(db)

    def schema_version(self) -> int:
        return db_schema_version(self.db)

    def close(self) -> None:
        """Stop the heartbeats of this store's recorders, and close the database if this store opened it."""
        with self._heartbeats_lock:
            beats, self._heartbeats = list(self._heartbeats), set()
        for beat in beats:
            beat.stop()
        for beat in beats:  # a beat already writing finishes before the database closes under it
            beat.join()
        if self._owns_db:
            self.db.close()

    def __enter__(self) -> SqlRunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, sql: str, args: Iterable[Any]) -> int:
        return self.db.execute(sql, tuple(args)).rowcount

    def _read(self, sql: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        return self.db.execute(sql, tuple(args)).rows

    def beat(self, run_id: str) -> None:
        """Record that the run's process is alive now."""
        self._write("UPDATE runs SET heartbeat = ? WHERE id = ? AND status = ?", (time.time(), run_id, RUNNING))

    def heartbeat(self, run_id: str, every: float) -> Heartbeat:
        """Start beating for `run_id` every `every` seconds until the returned Heartbeat is stopped."""
        beat = Heartbeat(self, run_id, every)
        with self._heartbeats_lock:  # stopped ones are kept until their thread ends, so close() can wait for them
            self._heartbeats = {b for b in self._heartbeats if b.alive} | {beat}
        beat.start()
        return beat

    # -- writing: through one recorder per run, which cleans what it hands to the methods below -----------
    def recorder(self, run_id: str, *, secrets: Iterable[str | None] = (),
                 skip_replayed: bool = False) -> SqlRunRecorder:
        """The write handle of one run: an EventSink, plus start and finish of the run row."""
        return SqlRunRecorder(self, run_id, secrets=secrets, skip_replayed=skip_replayed)

    def add_run(self, run_id: str, *, question: str, mode: str, models_json: str, prompt_version: str,
                limits_json: str, options_json: str, replay_of: str | None) -> None:
        """Insert the run row with status running, owned by this process; StoreError if the id is taken."""
        try:
            self._write(
                """INSERT INTO runs (id, question, mode, models, prompt_version, started, status, limits, options,
                   replay_of, pid, host, usage, cost_usd, heartbeat) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,0,?)""",
                (run_id, question, mode, models_json, prompt_version, _now(), RUNNING, limits_json, options_json,
                 replay_of, os.getpid(), this_host(), Usage().model_dump_json(), time.time()))
        except DuplicateKey:
            raise StoreError(f"run {run_id!r} already exists in {self.where}") from None

    def reopen_run(self, run_id: str) -> None:
        """Mark an existing run as running again, owned by this process."""
        self._write("UPDATE runs SET status = ?, finished = NULL, result = NULL, pid = ?, host = ?, heartbeat = ? "
                    "WHERE id = ?", (RUNNING, os.getpid(), this_host(), time.time(), run_id))

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
        claimed = self._write("UPDATE runs SET pid = ?, host = ?, heartbeat = ? WHERE id = ? AND status = ? "
                              "AND pid IS NOT DISTINCT FROM ? AND host IS NOT DISTINCT FROM ?",
                              (os.getpid(), this_host(), time.time(), row.id, RUNNING, row.pid, row.host))
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
                             options, replay_of, pid, host, usage, cost_usd, heartbeat FROM runs WHERE id = ?""",
                          (run_id,))
        if not rows:
            return None
        (id_, question, mode, models, version, started, finished, status, limits, options, replay_of, pid, host,
         usage, cost, heartbeat) = rows[0]
        return RunRow(id=id_, question=question, mode=mode, models=json.loads(models), prompt_version=version,
                      started=started, finished=finished, status=status,
                      limits=BudgetLimits.model_validate_json(limits),
                      options=RunOptions.model_validate_json(options) if options else None, replay_of=replay_of,
                      pid=pid, host=host, usage=Usage.model_validate_json(usage) if usage else None, cost_usd=cost,
                      heartbeat=heartbeat, stale_after=self.stale_after)

    def require_run(self, run_id: str) -> RunRow:
        """The run row; StoreError naming the fix when there is no such run."""
        row = self.run(run_id)
        if row is None:
            raise StoreError(f"there is no run {run_id!r} in {self.where}; `python -m pipeline runs` lists them "
                             "(RESEARCH_DB chooses the database)")
        return row

    def runs(self, limit: int | None = None) -> list[RunListing]:
        """Runs, newest first: id, date, question, mode, status (interrupted when its process is gone), cost."""
        sql = ("SELECT id, started, question, mode, status, cost_usd, pid, host, heartbeat FROM runs "
               "ORDER BY started DESC, id")
        rows = self._read(sql + (" LIMIT ?" if limit else ""), (limit,) if limit else ())
        now = time.time()
        listing = []
        for id_, started, question, mode, status, cost, pid, host, heartbeat in rows:
            listing.append(RunListing(id=id_, date=started, question=question, mode=mode,
                                      status=shown_status(status, pid, host, heartbeat, self.stale_after, now),
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
            if not kinds:
                return []
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            args += kinds
        rows = self._read(sql + " ORDER BY seq", args)
        return [StoredEvent(seq=s, kind=k, payload=json.loads(p), tokens=t, ms=m, at=a) for s, k, p, t, m, a in rows]

    def checkpoint(self, run_id: str) -> CheckpointEvent | None:
        """The run's latest checkpoint, or None."""
        rows = self._read("SELECT payload FROM events WHERE run_id = ? AND kind = 'checkpoint' ORDER BY seq DESC "
                          "LIMIT 1", (run_id,))
        return CheckpointEvent.from_payload(json.loads(rows[0][0])) if rows else None


class SqlRunRecorder:
    """Writes one run: its row at start and finish, and every event in between (an EventSink, thread-safe).

    Every string written passes `redact` (secret-named fields, key-shaped strings) and has each of `secrets`
    (the run's keys) replaced by "[redacted]"; headers are never part of an event.
    With `skip_replayed` (resume: the store has them already), events marked {"replayed": true} are not written,
    nor a REEMITTED event equal to one recorded (page nonces aside) that an earlier one has not matched yet.
    """

    def __init__(self, store: SqlRunStore, run_id: str, *, secrets: Iterable[str | None] = (),
                 skip_replayed: bool = False, beat_every: float | None = None):
        self.store, self.run_id = store, run_id
        self._secrets = tuple(sorted({s for s in secrets if s and len(s) >= SHORTEST_SECRET}, key=len, reverse=True))
        self._skip_replayed = skip_replayed
        recorded = store.events(run_id, REEMITTED) if skip_replayed else []
        self._recorded = Counter(_fingerprint(e.kind, _json(e.payload)) for e in recorded)
        self._seq_lock = threading.Lock()
        self._seq: int | None = None
        # A few beats per stale period: one missed beat (a slow database) never makes a live run look dead.
        self._beat_every = beat_every or store.stale_after / 4
        self._heartbeat: Heartbeat | None = None

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
        self._heartbeat = self.store.heartbeat(self.run_id, self._beat_every)

    def reopen(self) -> None:
        """Mark an existing run as running again in this process (resume)."""
        self.store.reopen_run(self.run_id)
        self._heartbeat = self.store.heartbeat(self.run_id, self._beat_every)

    def finish(self, result: RunResult) -> None:
        """Store the RunResult, its status, usage and cost; the heartbeat stops."""
        self.stop()
        self.store.finish_run(self.run_id, status=result.status, usage_json=result.usage.model_dump_json(),
                              cost_usd=result.usage.cost_usd, result_json=self._text(result))

    def stop(self) -> None:
        """Stop the heartbeat (finish does; a caller whose run ended without a result calls it)."""
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None

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


class Heartbeat:
    """A daemon thread that records, every `every` seconds, that a run's process is alive."""

    def __init__(self, store: SqlRunStore, run_id: str, every: float):
        self.store, self.run_id, self.every = store, run_id, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{run_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.store.beat(self.run_id)
            except StoreError:  # the database is away: the next beat tries again; readers may see the run stale
                continue

    def stop(self) -> None:
        self._stop.set()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def join(self) -> None:
        """Wait for a beat in progress (at most the database's connect timeout, when it is away)."""
        if self._thread.is_alive():
            self._thread.join(self.every + 30)


class SqliteRunStore(SqlRunStore):
    """The run store in one SQLite file (the default RESEARCH_DB)."""

    def __init__(self, path: str | Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS,
                 stale_after: float = HEARTBEAT_STALE):
        self.path = Path(path)
        super().__init__(SqliteDatabase(self.path, busy_timeout_ms=busy_timeout_ms), stale_after=stale_after)
