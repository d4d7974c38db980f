"""The database schema, as ordered migrations per dialect: version N is the first N applied. SQLite counts them in
`PRAGMA user_version`, PostgreSQL in the one-row table `schema_version`. Opening a database applies the missing ones
in place, in one transaction that a second process waits on (SQLite's write lock, PostgreSQL's advisory lock), and
refuses a database whose schema is newer than this program's.

Append only: a migration that has shipped is never edited, or old databases would be upgraded differently.
"""
from __future__ import annotations

from collections.abc import Callable

from pipeline.store.base import StoreError
from pipeline.store.database import Database, Transaction

Migration = Callable[[Transaction], None]


def _v1(tx: Transaction) -> None:
    """The first schema: runs and their events."""
    tx.execute("""CREATE TABLE runs (
        id TEXT PRIMARY KEY, question TEXT NOT NULL, mode TEXT NOT NULL, models TEXT NOT NULL,
        prompt_version TEXT NOT NULL, started TEXT NOT NULL, finished TEXT, status TEXT NOT NULL,
        limits TEXT NOT NULL, usage TEXT, cost_usd REAL NOT NULL DEFAULT 0, result TEXT)""")
    tx.execute("""CREATE TABLE events (
        run_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, payload TEXT NOT NULL,
        tokens INTEGER NOT NULL DEFAULT 0, ms REAL NOT NULL DEFAULT 0, PRIMARY KEY (run_id, seq))""")


def _v2(tx: Transaction) -> None:
    """Replay and resume: the run's options, its replay origin and owning process; event times; listing indexes.

    The runs table is rebuilt rather than altered so that `result`, the one large column, stays last: listing
    reads only the columns before it, which then sit in each row's first page.
    """
    tx.execute("""CREATE TABLE runs_v2 (
        id TEXT PRIMARY KEY, question TEXT NOT NULL, mode TEXT NOT NULL, models TEXT NOT NULL,
        prompt_version TEXT NOT NULL, started TEXT NOT NULL, finished TEXT, status TEXT NOT NULL,
        limits TEXT NOT NULL, options TEXT, replay_of TEXT, pid INTEGER, host TEXT, usage TEXT,
        cost_usd REAL NOT NULL DEFAULT 0, result TEXT)""")
    tx.execute("""INSERT INTO runs_v2 (id, question, mode, models, prompt_version, started, finished, status, limits,
                  usage, cost_usd, result)
                  SELECT id, question, mode, models, prompt_version, started, finished, status, limits, usage,
                  cost_usd, result FROM runs""")
    tx.execute("DROP TABLE runs")
    tx.execute("ALTER TABLE runs_v2 RENAME TO runs")
    tx.execute("CREATE INDEX runs_by_start ON runs (started DESC, id)")
    tx.execute("ALTER TABLE events ADD COLUMN at REAL")
    tx.execute("CREATE INDEX events_by_kind ON events (run_id, kind, seq)")


def _shared_state(tx: Transaction, real: str) -> None:
    """What several app instances share: the runs' heartbeats, the spend ledger, wrong codes, live runs."""
    tx.execute(f"ALTER TABLE runs ADD COLUMN heartbeat {real}")
    tx.execute(f"""CREATE TABLE live_spend (run_id TEXT PRIMARY KEY, day TEXT NOT NULL, reserved {real} NOT NULL,
                   spent {real}, finished INTEGER NOT NULL DEFAULT 0)""")
    tx.execute("CREATE INDEX live_spend_by_day ON live_spend (day)")
    tx.execute(f"CREATE TABLE wrong_codes (visitor TEXT NOT NULL, at {real} NOT NULL)")
    tx.execute("CREATE INDEX wrong_codes_at ON wrong_codes (at)")
    tx.execute(f"""CREATE TABLE live_runs (
        run_id TEXT PRIMARY KEY, question TEXT NOT NULL, mode TEXT NOT NULL, limits TEXT NOT NULL,
        instance TEXT NOT NULL, status TEXT NOT NULL, started {real} NOT NULL, heartbeat {real} NOT NULL,
        finished {real}, progress TEXT, error TEXT, cancel INTEGER NOT NULL DEFAULT 0)""")
    tx.execute("CREATE INDEX live_runs_by_status ON live_runs (status, heartbeat)")


def _v3(tx: Transaction) -> None:
    _shared_state(tx, "REAL")


def _pg_v1(tx: Transaction) -> None:
    tx.execute("""CREATE TABLE runs (
        id TEXT PRIMARY KEY, question TEXT NOT NULL, mode TEXT NOT NULL, models TEXT NOT NULL,
        prompt_version TEXT NOT NULL, started TEXT NOT NULL, finished TEXT, status TEXT NOT NULL,
        limits TEXT NOT NULL, usage TEXT, cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0, result TEXT)""")
    tx.execute("""CREATE TABLE events (
        run_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, payload TEXT NOT NULL,
        tokens BIGINT NOT NULL DEFAULT 0, ms DOUBLE PRECISION NOT NULL DEFAULT 0, PRIMARY KEY (run_id, seq))""")


def _pg_v2(tx: Transaction) -> None:
    for column in ("options TEXT", "replay_of TEXT", "pid INTEGER", "host TEXT"):
        tx.execute(f"ALTER TABLE runs ADD COLUMN {column}")
    tx.execute("CREATE INDEX runs_by_start ON runs (started DESC, id)")
    tx.execute("ALTER TABLE events ADD COLUMN at DOUBLE PRECISION")
    tx.execute("CREATE INDEX events_by_kind ON events (run_id, kind, seq)")


def _pg_v3(tx: Transaction) -> None:
    _shared_state(tx, "DOUBLE PRECISION")


SQLITE: tuple[Migration, ...] = (_v1, _v2, _v3)
POSTGRES: tuple[Migration, ...] = (_pg_v1, _pg_v2, _pg_v3)
SCHEMA_VERSION = len(SQLITE)
assert len(POSTGRES) == SCHEMA_VERSION, "every migration has a SQLite and a PostgreSQL form"


def _version(db: Database, tx: Transaction) -> int:
    if db.kind == "sqlite":
        return int(tx.execute("PRAGMA user_version").rows[0][0])
    if tx.execute("SELECT to_regclass('schema_version')").rows[0][0] is None:
        return 0
    rows = tx.execute("SELECT version FROM schema_version").rows
    return int(rows[0][0]) if rows else 0


def _set_version(db: Database, tx: Transaction, version: int) -> None:
    if db.kind == "sqlite":
        tx.execute(f"PRAGMA user_version = {int(version)}")
    else:
        tx.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        tx.execute("DELETE FROM schema_version")
        tx.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))


def _too_new(db: Database, version: int) -> StoreError:
    return StoreError(f"the database in RESEARCH_DB ({db.where}) has schema version {version}, newer than this "
                      f"program's {SCHEMA_VERSION}; upgrade the program or point RESEARCH_DB at another database")


def schema_version(db: Database) -> int:
    """The database's schema version (0 for a new, empty one)."""
    with db.transaction("verbatim-migrations") as tx:
        return _version(db, tx)


def _has_runs_table(db: Database, tx: Transaction) -> bool:
    if db.kind == "sqlite":
        return bool(tx.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'").rows)
    return tx.execute("SELECT to_regclass('runs')").rows[0][0] is not None


def migrate(db: Database) -> tuple[int, int]:
    """Apply the missing migrations; (version before, version after). StoreError for a newer schema, or for a
    database that has a runs table but no version (not this program's)."""
    steps = SQLITE if db.kind == "sqlite" else POSTGRES
    with db.transaction("verbatim-migrations") as tx:  # a second process waits here, then finds nothing to do
        before = _version(db, tx)
        if before > SCHEMA_VERSION:
            raise _too_new(db, before)
        if before == 0 and _has_runs_table(db, tx):
            raise StoreError(f"the database in RESEARCH_DB ({db.where}) has a runs table but no schema version: it "
                             "is not one this program made. Point RESEARCH_DB at an empty database or at this "
                             "program's own")
        for number in range(before, SCHEMA_VERSION):
            steps[number](tx)
        if before != SCHEMA_VERSION:
            _set_version(db, tx, SCHEMA_VERSION)
    return before, SCHEMA_VERSION
