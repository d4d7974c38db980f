"""Persistence: the run store (protocols in base.py, SQL on SQLite or PostgreSQL in sql.py, the schema in
migrations.py) and saved run files with timelines."""
from __future__ import annotations

from pathlib import Path

from pipeline.config import Settings
from pipeline.store.base import RunStore, StoreError
from pipeline.store.database import Database, check_target, is_postgres, open_database


def migrated_database(raw: str) -> Database:
    """The database RESEARCH_DB names, with its schema brought up to date (the ledgers and live runs need it)."""
    from pipeline.store.migrations import migrate

    db = open_database(raw)
    try:
        migrate(db)
    except BaseException:
        db.close()
        raise
    return db


def store_exists(settings: Settings) -> bool:
    """Whether the run store RESEARCH_DB names has been created (a run records there first); a PostgreSQL database
    is taken to exist (opening it creates the tables). StoreError when RESEARCH_DB is empty or of another kind."""
    check_target(settings.db_path)
    return is_postgres(settings.db_path) or Path(settings.db_path).exists()


def open_store(settings: Settings, *, must_exist: bool = False, db: Database | None = None) -> RunStore:
    """The run store RESEARCH_DB names (or on `db`, which the caller keeps open), created when missing unless
    `must_exist`; StoreError naming the fix."""
    from pipeline.store.sql import SqlRunStore

    if must_exist and not store_exists(settings):
        raise StoreError(f"there is no run store at {Path(settings.db_path)}; runs are recorded there by "
                         "`python -m pipeline run` (RESEARCH_DB chooses the file)")
    if db is not None:
        return SqlRunStore(db, stale_after=settings.heartbeat_stale, owns_db=False)
    return SqlRunStore(open_database(settings.db_path), stale_after=settings.heartbeat_stale)
