"""Run stores for the tests that run on both backends: opened from a RESEARCH_DB value (the `db_url` fixture of
tests/conftest.py: a SQLite file path or a postgresql:// URL), and everything such a database holds, as bytes, for
the tests that look for a secret in it."""
from __future__ import annotations

from pathlib import Path

from pipeline.store.base import HEARTBEAT_STALE
from pipeline.store.database import is_postgres, mask, open_database
from pipeline.store.sql import SqliteRunStore, SqlRunStore


class UrlRunStore(SqlRunStore):
    """A run store opened from a RESEARCH_DB value, which it keeps, password included, as `url` (a test's Settings
    need it; `where` has the password masked)."""

    def __init__(self, url: str, *, stale_after: float = HEARTBEAT_STALE):
        self.url = url
        super().__init__(open_database(url), stale_after=stale_after)


def open_test_store(db_url: str, *, stale_after: float = HEARTBEAT_STALE) -> UrlRunStore:
    """The run store in the database `db_url` names (created, or migrated, as the real code does)."""
    return UrlRunStore(db_url, stale_after=stale_after)


def store_url(store: SqlRunStore) -> str:
    """The RESEARCH_DB value `store` was opened from."""
    if isinstance(store, UrlRunStore):
        return store.url
    if isinstance(store, SqliteRunStore):
        return str(store.path)
    raise TypeError(f"cannot tell which RESEARCH_DB {store.where} came from; open it with open_test_store")


def stored_bytes(db_url: str) -> bytes:
    """Everything the database holds, to search for a secret in: a SQLite file's bytes with those of its WAL and
    shared-memory files; on PostgreSQL, the value of every column of every table of the public schema, each as
    text exactly as stored (not a row literal, whose quoting would hide a string holding `"` or `\\`)."""
    if not is_postgres(db_url):
        path = Path(db_url)
        return b"".join(p.read_bytes() for p in sorted(path.parent.iterdir()) if p.name.startswith(path.name))
    import psycopg

    chunks: list[str] = []
    with psycopg.connect(db_url, autocommit=True) as conn:
        columns = conn.execute("SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = "
                               "'public' ORDER BY table_name, ordinal_position").fetchall()
        assert columns, f"no tables in {mask(db_url)}"
        for table, column in columns:
            rows = conn.execute(f'SELECT "{column}"::text FROM "{table}"').fetchall()
            chunks += [value for (value,) in rows if value is not None]
    return "\n".join(chunks).encode()
