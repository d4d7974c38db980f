"""The app's small SQLite tables: a failed write leaves nothing behind; connections are closed."""
from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.store.sqlite_tx import immediate, opened


def test_a_failure_inside_the_transaction_rolls_everything_back(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    with opened(path) as db:
        db.execute("CREATE TABLE t (x INTEGER)")
    with immediate(path) as db:
        db.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(RuntimeError), immediate(path) as db:
        db.execute("INSERT INTO t VALUES (2)")
        raise RuntimeError("boom")
    with opened(path) as db:
        assert [r[0] for r in db.execute("SELECT x FROM t")] == [1]
        assert not db.in_transaction


def test_an_early_return_commits(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    with opened(path) as db:
        db.execute("CREATE TABLE t (x INTEGER)")

    def add() -> int:
        with immediate(path) as db:
            db.execute("INSERT INTO t VALUES (7)")
            return 7

    assert add() == 7
    with opened(path) as db:
        assert db.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 1
