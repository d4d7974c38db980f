"""The database layer on both backends: RESEARCH_DB as a path or a postgresql:// URL, the password masked in every
message, `db check` and `db upgrade`, heartbeats that tell a live run from a dead one, and a PostgreSQL server that
goes away in the middle of a run (and comes back)."""
from __future__ import annotations

import json
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli.main import main
from pipeline.config import Settings
from pipeline.core.event_types import StepEvent
from pipeline.core.events import EventSink
from pipeline.core.schema import RunOptions
from pipeline.research.context import RunContext
from pipeline.research.orchestrator import build_context, research
from pipeline.store.base import StoreError, this_host
from pipeline.store.database import CONNECT_TIMEOUT, check_target, mask, open_database, secrets_of
from pipeline.store.migrations import SCHEMA_VERSION, migrate, schema_version
from pipeline.store.sql import SqlRunStore
from tests.fakes.corpora import qdrant_corpus
from tests.fakes.postgres_server import PASSWORD, PostgresServer, postgres_server


def test_urls_are_shown_with_the_password_masked() -> None:
    url = "postgresql://app:s3cret-pw@db.internal:5432/verbatim?sslmode=require"
    assert mask(url) == "postgresql://app:***@db.internal:5432/verbatim?sslmode=require"
    assert mask("postgresql://app@/verbatim?host=/cloudsql/p:r:i&password=s3cret-pw") == \
        "postgresql://app@/verbatim?host=/cloudsql/p:r:i&password=***"
    assert secrets_of(url) == ["s3cret-pw"] and secrets_of("runs/research.sqlite") == []
    assert mask("runs/research.sqlite") == "runs/research.sqlite"
    # Passwords a URL parser splits differently from libpq, and percent-encoded ones, are masked all the same.
    for url, secret in [("postgresql://u:ab#cd@127.0.0.1:9/db", "ab#cd"), ("postgresql://u:pa?ss@h/db", "pa?ss"),
                        ("postgresql://u:a%40b@h/db", "a@b")]:
        assert "***" in mask(url) and secret not in mask(url) and secret in secrets_of(url)
        assert url.split("//")[1].split(":")[1].split("@h")[0] not in mask(url)
    with pytest.raises(StoreError, match=r"SQLite file path or a postgresql:// URL, not 'mysql://u:\*\*\*@h/db'"):
        check_target("mysql://u:pw@h/db")


def test_a_short_password_is_masked_where_it_stands_without_garbling_the_message(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert mask("postgresql://u:p@127.0.0.1:5432/db") == "postgresql://u:***@127.0.0.1:5432/db"
    monkeypatch.setenv("RESEARCH_DB", "postgresql://u:p@127.0.0.1:9/db")
    assert main(["db", "check"]) == 2
    err = capsys.readouterr().err
    assert "RESEARCH_DB (postgresql://u:***@127.0.0.1:9/db)" in err and "port 9" in err  # "p" is not masked in words


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_research_db_says_what_to_set(value: str, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCH_DB", value)
    assert main(["db", "check"]) == 2 and main(["runs"]) == 2
    assert "RESEARCH_DB is set but empty" in capsys.readouterr().err


def test_db_check_and_upgrade(db_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
                              ) -> None:
    monkeypatch.setenv("RESEARCH_DB", db_url)
    assert main(["db", "check"]) == 1  # a new database: no schema yet
    assert "db upgrade" in capsys.readouterr().out
    assert main(["db", "upgrade"]) == 0
    assert f"upgraded from schema version 0 to {SCHEMA_VERSION}" in capsys.readouterr().out
    assert main(["db", "upgrade"]) == 0 and "nothing to do" in capsys.readouterr().out
    assert main(["db", "check"]) == 0
    out = capsys.readouterr().out
    assert f"schema version {SCHEMA_VERSION}, up to date" in out and PASSWORD not in out


def test_db_check_refuses_a_newer_schema_with_both_versions(db_url: str, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    db = open_database(db_url)
    migrate(db)
    if db.kind == "sqlite":
        db.execute("PRAGMA user_version = 42")
    else:
        db.execute("UPDATE schema_version SET version = 42")
    db.close()
    monkeypatch.setenv("RESEARCH_DB", db_url)
    assert main(["db", "check"]) == 2
    assert f"schema version 42 is newer than this program's {SCHEMA_VERSION}" in capsys.readouterr().err
    assert main(["db", "upgrade"]) == 2  # refused too, and nothing is changed
    err = capsys.readouterr().err
    assert "schema version 42, newer than this program's" in err and PASSWORD not in err
    db = open_database(db_url)
    assert schema_version(db) == 42
    db.close()


def test_an_unreachable_server_is_one_clear_line_with_the_password_masked(capsys: pytest.CaptureFixture[str],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCH_DB", f"postgresql://verbatim:{PASSWORD}@127.0.0.1:9/verbatim")
    assert main(["db", "check"]) == 2
    err = capsys.readouterr().err
    assert "RESEARCH_DB (postgresql://verbatim:***@127.0.0.1:9/verbatim)" in err and PASSWORD not in err
    assert main(["runs"]) == 2 and PASSWORD not in capsys.readouterr().err


def test_a_heartbeat_keeps_a_running_run_alive_and_its_absence_marks_it_interrupted(db_url: str) -> None:
    with SqlRunStore(open_database(db_url), stale_after=1.0) as store:
        rec = store.recorder("beating")  # beats every stale_after / 4 seconds
        rec.start(question="Alive?", options=RunOptions(), models={}, prompt_version="v")
        time.sleep(1.5)  # longer than stale_after: only the heartbeat keeps it running
        row = store.run("beating")
        assert row is not None and row.shown_status == "running" and row.heartbeat is not None
        # A run of another host that fell silent: its process cannot be checked, its heartbeat tells. The beat is
        # stopped first: a beat landing after the update would make the run look alive again (flaky under load).
        rec.stop()
        store.db.execute("UPDATE runs SET host = 'other-host', heartbeat = ? WHERE id = 'beating'",
                         (time.time() - 5,))
        row = store.run("beating")
        assert row is not None and row.host == "other-host" and row.shown_status == "interrupted"
        assert [r.status for r in store.runs()] == ["interrupted"]
        store.db.execute("UPDATE runs SET heartbeat = ? WHERE id = 'beating'", (time.time(),))
        assert store.run("beating").shown_status == "running"  # type: ignore[union-attr]
        assert this_host() != "other-host"


@pytest.fixture(scope="module")
def own_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this module's own, which a test stops and starts again."""
    with postgres_server() as server:
        yield server


def test_a_server_that_goes_away_mid_run_fails_honestly_and_keeps_what_was_written(own_server: PostgresServer
                                                                                     ) -> None:
    if own_server._control is None:
        pytest.skip("RESEARCH_TEST_POSTGRES_URL names a server these tests cannot stop")
    with own_server.database() as url:
        store = SqlRunStore(open_database(url))
        rec = store.recorder("cut")
        rec.start(question="Will it survive?", options=RunOptions(), models={}, prompt_version="v")
        for i in range(3):
            rec.emit(StepEvent(name=f"before-{i}"))
        own_server.stop()
        try:
            with pytest.raises(StoreError) as failure:
                rec.emit(StepEvent(name="during"))
            message = str(failure.value)
            assert "RESEARCH_DB (postgresql://verbatim:***@127.0.0.1:" in message and PASSWORD not in message
        finally:
            own_server.start()
        rec.emit(StepEvent(name="after"))  # the pool replaced its dead connections
        names = [e.payload["name"] for e in store.events("cut")]
        assert names[:3] == ["before-0", "before-1", "before-2"] and names[-1] == "after" and "during" not in names
        rec.stop()
        store.close()


def test_a_store_made_by_the_previous_code_upgrades_in_place_with_nothing_lost(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "runs.sqlite"
    shutil.copyfile(Path(__file__).parent / "fixtures" / "stores" / "before-layout.sqlite", db)

    def contents() -> tuple[int, list[tuple[object, ...]], list[tuple[object, ...]]]:
        with closing(sqlite3.connect(db)) as raw:
            version = raw.execute("PRAGMA user_version").fetchone()[0]
            runs = raw.execute("SELECT id, question, status, result FROM runs ORDER BY id").fetchall()
            events = raw.execute("SELECT run_id, seq, kind, payload FROM events ORDER BY run_id, seq").fetchall()
        return version, runs, events

    before, runs, events = contents()
    assert before == 2 and len(runs) == 3 and len(events) > 30
    monkeypatch.setenv("RESEARCH_DB", str(db))
    assert main(["db", "check"]) == 1 and "1 migration(s) waiting" in capsys.readouterr().out
    assert main(["db", "upgrade"]) == 0 and f"from schema version 2 to {SCHEMA_VERSION}" in capsys.readouterr().out
    assert contents() == (SCHEMA_VERSION, runs, events)  # every run and event as it was
    assert main(["runs", "--json"]) == 0 and len(json.loads(capsys.readouterr().out)) == 3


def test_a_database_with_tables_but_no_schema_version_is_refused(db_url: str) -> None:
    db = open_database(db_url)
    db.execute("CREATE TABLE runs (id TEXT)")  # someone else's table, in the database RESEARCH_DB names
    with pytest.raises(StoreError, match="has a runs table but no schema version"):
        migrate(db)
    db.close()


def test_a_run_whose_database_goes_away_raises_a_clear_error_and_stops_beating(own_server: PostgresServer,
                                                                              tmp_path: Path) -> None:
    if own_server._control is None:
        pytest.skip("RESEARCH_TEST_POSTGRES_URL names a server these tests cannot stop")
    corpus = qdrant_corpus(tmp_path / "corpus")
    with own_server.database() as url:
        settings = Settings(search_provider="corpus", corpus_dir=str(corpus), db_path=url)
        store = SqlRunStore(open_database(url))

        def context_then_outage(s: Settings, o: RunOptions, e: EventSink, **kw: Any) -> RunContext:
            ctx = build_context(s, o, e, **kw)
            own_server.stop()  # the database goes away as the run begins its steps
            return ctx

        try:
            with pytest.raises(StoreError) as failure:
                research("What does Qdrant Cloud pricing start at?", settings, options=RunOptions(mode="extractive"),
                         run_id="outage01", store=store, context=context_then_outage)
        finally:
            own_server.start()
        assert "RESEARCH_DB (postgresql://verbatim:***@" in str(failure.value) and PASSWORD not in str(failure.value)
        for beat in [t for t in threading.enumerate() if t.name == "heartbeat-outage01"]:
            beat.join(CONNECT_TIMEOUT + 5)  # a beat already waiting on the dead server ends with it
            assert not beat.is_alive()  # stopped: the run does not look alive to the other instances
        row = store.run("outage01")  # the run row written before the outage is kept, unfinished
        assert row is not None and row.status == "running" and row.question.startswith("What does Qdrant")
        store.close()


class SlowBeatStore(SqlRunStore):
    """A store whose heartbeat write waits until the test lets it go: a beat caught in the middle of its write."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.entered, self.release = threading.Event(), threading.Event()
        super().__init__(*args, **kwargs)

    def beat(self, run_id: str) -> None:
        self.entered.set()
        assert self.release.wait(10)
        super().beat(run_id)


def test_closing_a_store_waits_for_a_heartbeat_in_the_middle_of_its_write(tmp_path: Path) -> None:
    failures: list[BaseException] = []
    hook, threading.excepthook = threading.excepthook, lambda args: failures.append(args.exc_value)  # type: ignore[assignment,misc]
    try:
        store = SlowBeatStore(open_database(str(tmp_path / "runs.sqlite")), stale_after=0.04)  # a beat every 0.01 s
        store.recorder("slow").start(question="Closing?", options=RunOptions(), models={}, prompt_version="v")
        assert store.entered.wait(5)
        closer = threading.Thread(target=store.close)
        closer.start()
        time.sleep(0.3)
        assert closer.is_alive()  # the database is not closed under the beat that is writing
        store.release.set()
        closer.join(10)
        assert not closer.is_alive() and failures == []
    finally:
        threading.excepthook = hook
