"""The one database behind every server-side table: a SQLite file (RESEARCH_DB is a path: the default) or a
PostgreSQL server (RESEARCH_DB is a postgresql:// URL; Cloud SQL by its socket: `postgresql://USER:PASS@/DB?host=
/cloudsql/PROJECT:REGION:INSTANCE`). The few differences between the two live here: connecting, the parameter style,
transactions that serialise writers, and errors that name RESEARCH_DB with its password masked.

Callers write SQL with `?` placeholders in the subset both dialects share. Every statement outside a transaction
commits on its own, so an event is durable the moment `execute` returns.
"""
from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol
from urllib.parse import quote, unquote

from pipeline.store.base import StoreError

BUSY_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT = 10.0
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


class DuplicateKey(StoreError):
    """An insert hit a primary key or unique constraint that is taken."""


class Rows(NamedTuple):
    """What a statement returned: its rows (empty for writes) and how many rows it changed."""

    rows: list[tuple[Any, ...]]
    rowcount: int


class Transaction(Protocol):
    def execute(self, sql: str, args: Sequence[Any] = ()) -> Rows: ...


class Database(Protocol):
    """A SQLite file or a PostgreSQL server; safe to share between threads."""

    kind: Literal["sqlite", "postgresql"]
    where: str  # for messages: the file, or the URL with its password masked

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Rows:
        """Run one statement, committed when it returns; DuplicateKey on a taken key, StoreError when the database
        cannot be used."""
        ...

    def transaction(self, lock: str | None = None) -> Any:
        """A context manager giving a Transaction: committed at the end, rolled back on an exception. Writers are
        serialised: the whole SQLite file, or on PostgreSQL everyone who names the same `lock`."""
        ...

    def close(self) -> None: ...


def is_postgres(raw: str) -> bool:
    return raw.strip().lower().startswith(POSTGRES_SCHEMES)


def is_url(raw: str) -> bool:
    return bool(re.match(r"^[a-z][a-z0-9+.-]*://", raw.strip(), flags=re.I))


def _password_forms(raw: str) -> list[str]:
    """Every way the URL's password may be written: in the user part (up to the last or the first `@`, as a
    parser may split it), as a `password=` parameter, as libpq reads it, each also percent-decoded and -encoded."""
    raw = raw.strip()
    forms: set[str] = set()
    for pattern in (r"^[a-z][a-z0-9+.-]*://[^:/@?#]*:(.+)@", r"^[a-z][a-z0-9+.-]*://[^:/@?#]*:(.+?)@"):
        if m := re.match(pattern, raw, flags=re.I | re.S):
            forms.add(m.group(1))
    forms.update(m.group(1) for m in re.finditer(r"[?&]password=([^&#]*)", raw, flags=re.I))
    if is_postgres(raw):
        try:
            from psycopg.conninfo import conninfo_to_dict

            forms.add(str(conninfo_to_dict(raw).get("password") or ""))
        except Exception:  # not a URL libpq can read: the forms above still cover it
            pass
    forms |= {unquote(f) for f in forms} | {quote(f, safe="") for f in forms}
    return sorted((f for f in forms if f), key=len, reverse=True)


# A password this short would also match ordinary letters of a message ("p" in "port"): it is masked where it
# stands in the URL, not searched for elsewhere (as the recorders skip secrets under 4 characters).
SHORTEST_SCRUBBED = 4


def mask(raw: str) -> str:
    """RESEARCH_DB as it may be shown: a URL with its password replaced by *** where it stands (the user part, a
    `password=` parameter) and wherever else a form of it appears."""
    raw = raw.strip()
    if not is_url(raw):
        return raw
    masked = re.sub(r"^([a-z][a-z0-9+.-]*://[^:/@?#]*:).+@(?=[^@]*$)", r"\1***@", raw, flags=re.I | re.S)
    masked = re.sub(r"([?&]password=)[^&#]*", r"\1***", masked, flags=re.I)
    return _scrub(masked, raw)


def secrets_of(raw: str) -> list[str]:
    """The password in RESEARCH_DB, in every form it may be written: recorders scrub it like any key."""
    return _password_forms(raw) if is_postgres(raw) else []


def _scrub(text: str, raw: str) -> str:
    for secret in _password_forms(raw):
        if len(secret) >= SHORTEST_SCRUBBED:
            text = text.replace(secret, "***")
    return text


def check_target(raw: str) -> None:
    """StoreError unless RESEARCH_DB is a file path or a postgresql:// URL."""
    if not raw.strip():
        raise StoreError("RESEARCH_DB is set but empty; set it to a SQLite file path (the default is "
                         "runs/research.sqlite) or a postgresql:// URL, or unset it")
    if is_url(raw) and not is_postgres(raw):
        raise StoreError(f"RESEARCH_DB must be a SQLite file path or a postgresql:// URL, not {mask(raw.strip())!r}")


def open_database(raw: str, *, pool_size: int = 8) -> Database:
    """The database RESEARCH_DB names: a postgresql:// URL, else a SQLite file (created with its folder)."""
    raw = raw.strip()
    check_target(raw)
    if is_postgres(raw):
        return PostgresDatabase(raw, max_size=pool_size)
    return SqliteDatabase(Path(raw))


class SqliteDatabase:
    """One SQLite file (WAL): one connection per process guarded by a lock; other processes wait for each other's
    writes (busy timeout) instead of failing."""

    kind: Literal["sqlite", "postgresql"] = "sqlite"

    def __init__(self, path: Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS):
        self.path = Path(path)
        self.where = str(self.path)
        self._lock = threading.RLock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                       timeout=busy_timeout_ms / 1000)
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._db.execute("PRAGMA journal_mode = WAL")
            # NORMAL in WAL mode: a commit is durable once written to the OS (a killed process loses nothing);
            # only a power cut may lose the last commits, never corrupt the file.
            self._db.execute("PRAGMA synchronous = NORMAL")
        except (sqlite3.Error, OSError) as e:
            raise StoreError(f"cannot use the database {self.path} ({e}); set RESEARCH_DB to a writable SQLite "
                             "file or a postgresql:// URL") from None

    def _run(self, sql: str, args: Sequence[Any]) -> Rows:
        try:
            cur = self._db.execute(sql, tuple(args))
            return Rows(cur.fetchall(), cur.rowcount)
        except sqlite3.IntegrityError as e:
            if "UNIQUE" in str(e) or "PRIMARY KEY" in str(e):
                raise DuplicateKey(str(e)) from None
            raise
        except sqlite3.OperationalError as e:
            raise StoreError(f"the database {self.path} failed: {e} (RESEARCH_DB)") from None

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Rows:
        with self._lock:
            return self._run(sql, args)

    @contextmanager
    def transaction(self, lock: str | None = None) -> Iterator[Transaction]:
        # BEGIN IMMEDIATE takes the file's write lock up front: parallel writers queue instead of racing.
        with self._lock:
            self._run("BEGIN IMMEDIATE", ())
            try:
                yield _SqliteTx(self)
                self._run("COMMIT", ())
            except BaseException:
                if self._db.in_transaction:  # SQLite may have rolled back already (a failed COMMIT, a full disk)
                    self._db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        with self._lock:
            self._db.close()


class _SqliteTx:
    def __init__(self, db: SqliteDatabase):
        self._db = db

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Rows:
        return self._db._run(sql, args)


@lru_cache(maxsize=512)
def _pg_sql(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresDatabase:
    """A PostgreSQL server through a small pool of autocommit connections (psycopg 3); a connection that died is
    replaced before use, so a restarted server costs the calls in flight, not the process."""

    kind: Literal["sqlite", "postgresql"] = "postgresql"

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 8, timeout: float = CONNECT_TIMEOUT):
        import psycopg
        from psycopg_pool import ConnectionPool

        self._url, self.where, self._timeout = url, mask(url), timeout
        try:  # one plain connection first: the pool would only say "timed out", not why
            psycopg.connect(url, connect_timeout=max(1, int(timeout))).close()
        except psycopg.Error as e:
            raise self._error("cannot connect to", e) from None
        self._pool = ConnectionPool(url, min_size=min_size, max_size=max_size, timeout=timeout, open=False,
                                    kwargs={"autocommit": True}, check=ConnectionPool.check_connection,
                                    name="verbatim")
        self._pool.open(wait=True, timeout=timeout)

    def _error(self, what: str, e: BaseException) -> StoreError:
        reason = " ".join(_scrub(str(e), self._url).split()).rstrip(".") or type(e).__name__
        return StoreError(f"{what} the database in RESEARCH_DB ({self.where}): {reason} (check the URL, the password "
                          "and that the server is running)")

    def _run(self, conn: Any, sql: str, args: Sequence[Any]) -> Rows:
        import psycopg

        try:
            cur = conn.execute(_pg_sql(sql), tuple(args))
            return Rows(cur.fetchall() if cur.description else [], cur.rowcount)
        except psycopg.errors.UniqueViolation as e:
            raise DuplicateKey(_scrub(str(e), self._url)) from None
        except psycopg.OperationalError as e:
            raise self._error("lost", e) from None

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Rows:
        with self._connection() as conn:
            return self._run(conn, sql, args)

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        from psycopg_pool import PoolTimeout

        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as e:
            raise self._error("cannot reach", e) from None

    @contextmanager
    def transaction(self, lock: str | None = None) -> Iterator[Transaction]:
        import psycopg

        try:
            with self._connection() as conn, conn.transaction():
                if lock is not None:  # held until commit: everyone naming this lock takes turns
                    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (lock,))
                yield _PgTx(self, conn)
        except (psycopg.OperationalError, psycopg.InterfaceError) as e:  # BEGIN, the lock or COMMIT lost the server
            raise self._error("lost", e) from None

    def close(self) -> None:
        self._pool.close()


class _PgTx:
    def __init__(self, db: PostgresDatabase, conn: Any):
        self._db, self._conn = db, conn

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Rows:
        return self._db._run(self._conn, sql, args)
