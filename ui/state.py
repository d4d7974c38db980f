"""Server-wide objects shared by every session: the run library (asked for on every view, so kept in a ui/kept.py
store), and by st.cache_resource the job registry, the access code source and the attempt limiter. Keyed by their
configuration, so a changed setting gets a fresh object."""
from __future__ import annotations

import functools
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import streamlit as st
from pydantic import ValidationError
from streamlit import runtime
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager

from pipeline.config import Settings
from pipeline.store import migrated_database, open_store, store_exists
from pipeline.store.base import RunStore, StoreError
from pipeline.store.database import Database
from pipeline.store.files import RUN_ID, load_run_file
from pipeline.store.timeline import load_timeline
from ui.access import (
    AccessState,
    AttemptLimiter,
    CachedCode,
    FileCode,
    SecretManagerCode,
    access_state,
    make_client,
)
from ui.kept import Kept
from ui.library import RunLibrary
from ui.uploads import UploadGate, UploadLimits, sweep
from ui.views import ReportView, kept_report_view, report_view

from .components import md_text
from .config import AppConfig, env_problem

if TYPE_CHECKING:
    from ui.jobs import JobRegistry

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=8)
def _settings_of(environment: frozenset[tuple[str, str]]) -> tuple[AppConfig, Settings] | str:
    """The app's and the research settings as one environment gives them, or the message naming its invalid values:
    both are read only from the environment, so they are read once per environment, not per script run."""
    try:
        return AppConfig(), Settings()
    except ValidationError as e:
        return env_problem(e)


def settings() -> Settings:
    """The research settings (the run store, live runs) of the current environment; config() has checked them."""
    got = _settings_of(frozenset(os.environ.items()))
    return got[1] if not isinstance(got, str) else Settings()


def config() -> AppConfig:
    """The app's settings, per script run (tests change the environment between runs). Invalid values, of the app's
    settings or the research settings (the run store, live runs), stop the page with one message naming them."""
    got = _settings_of(frozenset(os.environ.items()))
    if isinstance(got, str):
        st.error(md_text(got), icon=":material/error:")
        st.stop()
    return got[0]


_LIBRARIES: Kept[RunLibrary] = Kept(8)


def library(cfg: AppConfig) -> RunLibrary:
    """The run library of the benchmark folder, one per folder and process (a page asks for it several times)."""
    folder = os.path.abspath(cfg.benchmark_dir)
    return _LIBRARIES.get(folder, lambda: RunLibrary(Path(folder).resolve()))


@st.cache_resource(show_spinner=False)
def _database(where: str) -> Database:
    # One per process: its SQLite connection or PostgreSQL pool serves the store, the ledgers and the live runs.
    return migrated_database(where)


@st.cache_resource(show_spinner=False)
def _store(where: str, stale_after: float) -> RunStore:
    chosen = settings().model_copy(update={"db_path": where, "heartbeat_stale": stale_after})
    return open_store(chosen, db=_database(where))


def database() -> Database:
    """The database (RESEARCH_DB), opened once per process; StoreError when it cannot be used."""
    return _database(settings().db_path)


def store_problem() -> str | None:
    """Why the run store RESEARCH_DB names cannot be used (its password masked), or None when it can or does not
    exist yet."""
    now = settings()
    try:
        if store_exists(now):
            _store(now.db_path, now.heartbeat_stale)
    except StoreError as e:
        return str(e)
    return None


def store(cfg: AppConfig, *, create: bool = False) -> RunStore | None:
    """The run store (RESEARCH_DB), one per process; None when it does not exist and `create` is False, or when the
    database cannot be reached (the public pages then show what the saved files hold)."""
    now = settings()
    try:
        if not (create or store_exists(now)):
            return None
        return _store(now.db_path, now.heartbeat_stale)
    except StoreError as e:
        if create:
            raise
        log.warning("run store unavailable: %s", e)
        return None


@st.cache_resource(show_spinner=False)
def _registry(live_dir: str, limits_json: str, db_path: str, stale_after: float) -> JobRegistry:
    # Imported here: the public pages never load the live-run stack (model client, fetcher, extraction).
    from ui.jobs import JobRegistry, LiveLimits

    return JobRegistry(runs_dir=Path(live_dir), db=_database(db_path),
                       limits=LiveLimits.model_validate_json(limits_json), store=_store(db_path, stale_after),
                       stale_after=stale_after)


def registry(cfg: AppConfig) -> JobRegistry:
    """The live-run registry; StoreError when the database cannot be used. Its first use in a process removes the
    upload folders that a process which died left behind."""
    now = settings()
    jobs = _registry(str(cfg.live_dir.resolve()), cfg.live_limits.model_dump_json(), now.db_path,
                     now.heartbeat_stale)
    _swept(str(cfg.uploads_dir.resolve()), now.cache_dir)
    return jobs


@st.cache_resource(show_spinner=False)
def _swept(uploads: str, cache_dir: str) -> int:
    return sweep(Path(uploads), cache_dir)


@st.cache_resource(show_spinner=False)
def _secret(name: str, endpoint: str | None, ttl: float) -> SecretManagerCode:
    return SecretManagerCode(name, client_factory=lambda: make_client(endpoint), ttl=ttl)


@st.cache_resource(show_spinner=False)
def _code_file(path: str, ttl: float) -> FileCode:
    return FileCode(Path(path), ttl=ttl)


def access(cfg: AppConfig) -> AccessState:
    """Whether live runs can be unlocked: ACCESS_CODE_FILE, else ACCESS_CODE_SECRET (each cached for minutes, not
    re-read per rerun), else ACCESS_CODE."""
    secret: CachedCode | None = None
    if cfg.access_code_file is not None and str(cfg.access_code_file).strip():
        secret = _code_file(str(cfg.access_code_file), cfg.secret_ttl)
    elif cfg.access_code_secret and cfg.access_code_secret.strip():
        secret = _secret(cfg.access_code_secret.strip(), cfg.secret_manager_url, cfg.secret_ttl)
    local = cfg.access_code.get_secret_value() if cfg.access_code else None
    return access_state(secret=secret, local_code=local)


@st.cache_resource(show_spinner=False)
def _upload_gate(limits_json: str) -> UploadGate:
    gate = UploadGate(UploadLimits.model_validate_json(limits_json))
    if runtime.exists():  # a served app (AppTest has no upload endpoint)
        manager = runtime.get_instance().uploaded_file_mgr
        if isinstance(manager, MemoryUploadedFileManager):
            gate.install(manager)
        else:  # another Streamlit's manager: the page offers no upload rather than an ungated one
            log.error("uploads are off: the upload manager %s cannot be gated", type(manager).__name__)
    return gate


def upload_gate() -> UploadGate | None:
    """The server's gate on uploads, installed on Streamlit's upload endpoint by the first script run (app.py calls
    this before any page); while the settings are invalid a closed gate is installed and None returned (the page
    says what is wrong)."""
    got = _settings_of(frozenset(os.environ.items()))
    if isinstance(got, str):
        _upload_gate(UploadLimits.closed().model_dump_json())
        return None
    return _upload_gate(got[0].upload_limits.model_dump_json())


@st.cache_resource(show_spinner=False)
def _limiter(db_path: str, per_visitor: int, global_limit: int, window: float) -> AttemptLimiter:
    return AttemptLimiter(_database(db_path), per_visitor=per_visitor, global_limit=global_limit, window=window)


def limiter(cfg: AppConfig) -> AttemptLimiter:
    """The wrong-code counter; StoreError when the database cannot be used."""
    return _limiter(settings().db_path, cfg.access_max_attempts, cfg.access_global_attempts,
                    cfg.access_window_seconds)


def run_status(cfg: AppConfig, run_id: str) -> str | None:
    """A recorded run's status as shown (running, interrupted, complete, ...), or None when the store lacks it."""
    if not RUN_ID.match(run_id):
        return None
    runs = store(cfg)
    row = runs.run(run_id) if runs is not None else None
    return row.shown_status if row is not None else None


def find_report(cfg: AppConfig, run_id: str) -> ReportView | None:
    """A saved run's report page content by id, from the benchmark folder (kept while its file is unchanged), the
    live runs or the run store; None if there is none."""
    if not RUN_ID.match(run_id):
        return None
    runs = store(cfg)
    kept = kept_report_view(library(cfg), run_id, runs)
    if kept is not None:  # a `run --json` file in the benchmark folder: its call log is in the run store
        return kept
    rr = load_run_file(cfg.live_dir, run_id)
    if rr is not None:
        return report_view(rr, load_timeline(rr, cfg.live_dir, runs))
    rr = runs.result(run_id) if runs is not None else None  # e.g. `python -m pipeline run` recorded it
    if rr is not None:
        return report_view(rr, load_timeline(rr, None, runs))
    return None
