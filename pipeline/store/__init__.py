"""Persistence: the run store (protocols in base.py, SQLite in sqlite.py) and saved run files with timelines."""
from __future__ import annotations

from pathlib import Path

from pipeline.config import Settings
from pipeline.store.base import RunStore, StoreError


def store_exists(settings: Settings) -> bool:
    """Whether the run store RESEARCH_DB names has been created (a run records there first)."""
    return Path(settings.db_path).exists()


def open_store(settings: Settings, *, must_exist: bool = False) -> RunStore:
    """The run store RESEARCH_DB names, created when missing unless `must_exist`; StoreError naming the fix."""
    from pipeline.store.sqlite import SqliteRunStore  # the one backend today: a SQLite file

    if must_exist and not store_exists(settings):
        raise StoreError(f"there is no run store at {Path(settings.db_path)}; runs are recorded there by "
                         "`python -m pipeline run` (RESEARCH_DB chooses the file)")
    return SqliteRunStore(Path(settings.db_path))
