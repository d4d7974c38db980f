"""SQLite for the app's small server-side tables: a WAL connection per use, closed after, writes in one transaction."""
from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=10, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    return db


@contextmanager
def opened(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection in autocommit mode, closed on exit."""
    db = connect(path)
    try:
        yield db
    finally:
        db.close()


@contextmanager
def immediate(path: Path) -> Iterator[sqlite3.Connection]:
    """One write transaction taken up front (BEGIN IMMEDIATE): parallel callers queue instead of racing."""
    with opened(path) as db:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
