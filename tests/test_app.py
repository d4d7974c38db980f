"""The app's public page: saved runs listed, bad files reported, an empty state that says what to do."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pipeline.saved_runs import load_saved_runs
from pipeline.schema import RunResult

ROOT = Path(__file__).resolve().parents[1]


def _write_run(folder: Path, run_id: str) -> None:
    rr = RunResult(run_id=run_id, question=f"question {run_id}?", mode="tools", status="partial")
    (folder / f"{run_id}.json").write_text(rr.model_dump_json())


def test_load_saved_runs_reads_valid_files_and_reports_bad_ones(tmp_path: Path) -> None:
    _write_run(tmp_path, "r1")
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "other.json").write_text('{"hello": 1}')
    rows, errors = load_saved_runs(tmp_path)
    assert [r.run_id for r in rows] == ["r1"] and rows[0].mode == "tools"
    assert sorted(name for name, _ in errors) == ["broken.json", "other.json"]
    assert load_saved_runs(tmp_path / "missing") == ([], [])


@pytest.fixture()
def app_copy(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "app.py", tmp_path / "app.py")
    (tmp_path / "benchmark_runs").mkdir()
    return tmp_path


def test_app_empty_state_says_how_to_produce_runs(app_copy: Path) -> None:
    at = AppTest.from_file(str(app_copy / "app.py")).run(timeout=30)
    assert not at.exception
    assert any("python -m pipeline run" in i.value for i in at.info)


def test_app_lists_saved_runs(app_copy: Path) -> None:
    _write_run(app_copy / "benchmark_runs", "r42")
    at = AppTest.from_file(str(app_copy / "app.py")).run(timeout=30)
    assert not at.exception
    assert "r42" in at.dataframe[0].value["run_id"].tolist()
