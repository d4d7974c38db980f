"""A run store written before the layered layout (commit d5c01fb, see tests/fixtures/stores/make_before_layout.py)
replays offline with today's code to the recorded RunResult; every stored event parses into its typed event and
back into the same JSON, and today's code writes payloads with the same keys, in the same order."""
from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli.main import main
from pipeline.cli.store_commands import compare_results
from pipeline.core.event_types import EVENT_TYPES
from pipeline.core.schema import RunResult
from pipeline.replay.tape import TAPE_KINDS, Tape, TapeMode
from pipeline.research.prompts import version as prompt_version
from pipeline.store.sql import SqliteRunStore
from tests.test_replay import THREE_PARTS, Fakes, record_with_anthropic_search

FIXTURE = Path(__file__).parent / "fixtures" / "stores" / "before-layout.sqlite"


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    copy = tmp_path / "runs.sqlite"
    shutil.copyfile(FIXTURE, copy)
    return copy


def _runs(db: Path) -> list[tuple[str, str]]:
    with SqliteRunStore(db) as store:
        return sorted((r.id, r.mode) for r in store.runs(limit=10))


def test_the_fixture_holds_a_fixed_and_two_tools_runs(db: Path) -> None:
    assert sorted(mode for _, mode in _runs(db)) == ["fixed", "tools", "tools"]


@pytest.mark.parametrize("index", [0, 1, 2])
def test_a_run_recorded_before_the_layout_replays_to_the_recorded_result(
        db: Path, tmp_path: Path, index: int, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    run_id, _ = _runs(db)[index]
    monkeypatch.setenv("RESEARCH_DB", str(db))
    out = tmp_path / "replay.json"
    assert main(["replay", run_id, "--json", str(out), "--quiet"]) == 0
    replayed = RunResult.model_validate_json(out.read_text())
    with SqliteRunStore(db) as store:
        original = store.result(run_id)
        assert original is not None
        # A prompt edited since the recording shows in models.prompts, and only there (the replies are recorded).
        assert compare_results(original, replayed) in ([], ["models"])
        assert replayed.models == {**original.models, "prompts": prompt_version()}
        assert replayed.report.markdown == original.report.markdown and replayed.findings == original.findings
        replay_events = store.events(replayed.run_id)
    err = capsys.readouterr().err
    assert "research: 0 calls were not in the recording" in err or "were not in the recording" not in err
    assert "matches the recorded result" in err or original.models["prompts"] != prompt_version()
    assert not [e for e in replay_events if e.payload.get("not_recorded")]


def test_every_stored_event_parses_into_its_typed_event_and_back_into_the_same_json(db: Path) -> None:
    with SqliteRunStore(db) as store:
        for run_id, _ in _runs(db):
            stored = store.events(run_id)
            assert stored
            for row in stored:
                event = row.event()
                assert type(event) is EVENT_TYPES[row.kind] and event.kind == row.kind
                assert list(event.payload().items()) == list(row.payload.items())  # same keys, same order
            tape = Tape.from_store(store, run_id, TapeMode.REPLAY)
            on_tape = [row for row in stored if row.kind in TAPE_KINDS]
            assert [e.kind for e in tape.events] == [row.kind for row in on_tape]
            assert all(type(e) is EVENT_TYPES[e.kind] for e in tape.events)


def _shapes(db: Path) -> dict[str, set[tuple[Any, ...]]]:
    """Per event kind, the key sequences of its payloads (steps and assignments told apart by what they report)."""
    shapes: dict[str, set[tuple[Any, ...]]] = defaultdict(set)
    with SqliteRunStore(db) as store:
        for run_id, _ in _runs(db):
            for row in store.events(run_id):
                p = row.payload
                tag = ((p.get("name"), p.get("part"), p.get("status")) if row.kind == "step"
                       else (p.get("what"),) if row.kind == "assigned" else ())
                shapes[row.kind].add((*tag, *p))
    return shapes


def test_todays_code_writes_the_same_payload_keys_as_the_code_before_the_layout(db: Path, tmp_path: Path) -> None:
    """The recipe of make_before_layout.py, run with today's code and fakes."""
    today = tmp_path / "today.sqlite"
    fakes = Fakes()
    fakes.brain.plans["three parts"] = THREE_PARTS
    try:
        with SqliteRunStore(today) as store:
            for mode in ("fixed", "tools"):
                fakes.record(store, "Qdrant Cloud pricing in three parts", mode)
    finally:
        fakes.close()
    record_with_anthropic_search(today)
    assert _shapes(today) == _shapes(db)
