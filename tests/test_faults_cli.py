"""The fault matrix through the command line: a representative cell of each kind of fault, run by `python -m
pipeline run`'s main() in this process (and, for a full disk, as a real command on a real full disk).

Each asserts what the user sees: no traceback anywhere, the documented exit code (0 for a complete or partial
run, 1 for a failed one or one the run store could not record), each problem on stderr as `research: problem
(KIND): ...` naming its cause, the report on stdout and the RunResult JSON written.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import pipeline.cli.commands as commands
from pipeline.cli.main import main
from pipeline.core.schema import RunResult
from pipeline.store.base import RunStore
from tests.test_faults import (  # noqa: F401  (servers, world, _one_certificate: fixtures)
    FAULTS,
    HANG_TIMEOUT,
    QUESTION,
    QUOTE_A,
    World,
    _one_certificate,
    baseline,
    dead_pid,
    is_step,
    once,
    servers,
    target,
    world,
)
from tests.test_faults_store import fill_disk
from tests.test_faults_web import PAGE_FAULTS

FAULT = {f.name: f for f in FAULTS}


@dataclass(frozen=True)
class Cell:
    mode: str
    step: str  # where the model fault strikes ("" for none)
    fault: str  # a FAULTS name, or a page fault's
    status: str
    exit: int
    problem: str | None  # the kind on stderr
    says: str = ""  # in that problem's line


CELLS = [
    Cell("fixed", "writer", "529", "partial", 0, "writer_unavailable", "HTTP 529"),
    Cell("tools", "worker", "timeout", "partial", 0, "worker_failed", "timed out"),
    Cell("fixed", "plan", "malformed", "partial", 0, "plan_fallback", "the planner failed"),
    Cell("tools", "sentence_judge", "invalid", "partial", 0, "judge_unavailable", "did not match"),
    Cell("fixed", "all", "500", "failed", 1, "model_unavailable", "no model call succeeded"),
    Cell("tools", "support_judge", "429-once", "complete", 0, None),
    Cell("fixed", "", "slow-body", "complete", 0, None, "(1 timeout)"),
]


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    said = capsys.readouterr()
    assert "Traceback" not in said.out + said.err, said.err
    return code, said.out, said.err


def _env(world: World, monkeypatch: pytest.MonkeyPatch, **extra: str) -> None:
    for name, value in world.env(**extra).items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("cell", [pytest.param(c, id=f"{c.mode}-{c.step or 'page'}-{c.fault}") for c in CELLS])
def test_cli_shows_the_fault(world: World, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str], tmp_path: Path, cell: Cell) -> None:
    extra: dict[str, str] = {}
    if cell.fault in FAULT:
        FAULT[cell.fault].inject(world.fake, target(cell.step))
        if FAULT[cell.fault].kind == "hang":
            extra["RESEARCH_MODEL_TIMEOUT"] = str(HANG_TIMEOUT)
    else:
        [page_fault] = [f for f in PAGE_FAULTS if f.name == cell.fault]
        world.web.reset({"/b": page_fault.route})
        world.search.reset([h for h in world.search.hits if h.url.endswith("/b")])
        extra["RESEARCH_FETCH_DEADLINE"] = "0.5"
    _env(world, monkeypatch, **extra)
    out = tmp_path / "run.json"
    code, stdout, stderr = _cli(["run", QUESTION, "--mode", cell.mode, "--json", str(out)], capsys)
    result = RunResult.model_validate_json(out.read_text())
    assert (code, result.status) == (cell.exit, cell.status), stderr
    assert stdout.strip() == result.report.markdown.strip() and stdout.strip()
    problems = re.findall(r"^research: problem \((\w+)\): (.*)$", stderr, re.M)
    assert [k for k, _ in problems] == [p.kind for p in result.problems]
    if cell.problem is None:
        assert problems == [] and cell.says in result.report.markdown
    else:
        assert any(k == cell.problem and cell.says in line for k, line in problems), problems
    assert re.search(rf"^research: run {result.run_id} {cell.status}; \$", stderr, re.M)


# -- the run store fails under a CLI run -----------------------------------------------------------------------------
def _check_not_recorded(code: int, stdout: str, stderr: str, db: Path, json_path: Path) -> str:
    """The user sees the run stopped, why, and how to go on; returns the run id."""
    run_id = re.match(r"research: run (\w+) started", stderr).group(1)  # type: ignore[union-attr]
    assert code == 1, stderr
    assert "Traceback" not in stdout + stderr
    [line] = re.findall(r"^research: problem \(store_failed\): (.*)$", stderr, re.M)
    for said in (str(db), "database or disk is full", "RESEARCH_DB", "Free space", f"resume run {run_id}"):
        assert said in line, line
    assert f"python -m pipeline resume {run_id}" in stderr.splitlines()[-1]
    result = RunResult.model_validate_json(json_path.read_text())
    assert result.status == "failed" and result.findings and {QUOTE_A} <= {f.quote for f in result.findings}
    return run_id


def test_a_full_disk_under_a_cli_run_keeps_the_result_and_resume_finishes_it(
        world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    opened: list[RunStore] = []
    real_open = commands.open_store

    def spy(*args: Any, **kwargs: Any) -> RunStore:
        opened.append(real_open(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(commands, "open_store", spy)
    fill = once(lambda: fill_disk(opened[0].db))  # type: ignore[attr-defined]
    world.fake.on_request(lambda r: fill() if is_step("writer")(r) else None)
    _env(world, monkeypatch)
    out = tmp_path / "run.json"
    code, stdout, stderr = _cli(["run", QUESTION, "--mode", "fixed", "--json", str(out)], capsys)
    run_id = _check_not_recorded(code, stdout, stderr, world.db, out)

    # The run's process is gone (here: marked so) and the database has room again (a new connection, no cap).
    world.store.db.execute("UPDATE runs SET pid = ? WHERE id = ?", (dead_pid(), run_id))
    answered, sent = len(world.store.events(run_id, ["model_response"])), len(world.fake.requests)
    code, stdout, stderr = _cli(["resume", run_id, "--json", str(out)], capsys)
    assert code == 0, stderr
    resumed = RunResult.model_validate_json(out.read_text())
    assert (resumed.run_id, resumed.status, resumed.problems) == (run_id, "complete", [])
    base = baseline("fixed", 1, tmp_path / "baseline")
    assert len(world.fake.requests) - sent == sum(base.counts.values()) - answered  # only answers never recorded
    assert world.store.result(run_id) == resumed


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MB tmpfs of its own (skipped where this process may not mount one)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)], capture_output=True,
                             text=True) if shutil.which("mount") else None
    if mounted is None or mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() if mounted else 'no mount command'})")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def fill_files(folder: Path) -> Callable[[], None]:
    """Fill the file system of `folder` to the last byte with a file of its own."""
    def fill() -> None:
        with (folder / "filler").open("wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
            for size in (4096, 1):
                try:
                    while True:
                        f.write(b"\0" * size)
                        f.flush()
                except OSError:
                    continue
    return fill


def test_a_real_full_disk_under_a_cli_process(world: World, small_disk: Path, tmp_path: Path) -> None:
    db = small_disk / "runs.sqlite"
    env = {**os.environ, **world.env(RESEARCH_DB=str(db))}
    fill = once(fill_files(small_disk))
    world.fake.on_request(lambda r: fill() if is_step("writer")(r) else None)
    out = tmp_path / "run.json"
    run = subprocess.run([sys.executable, "-m", "pipeline", "run", QUESTION, "--mode", "tools", "--json", str(out)],
                         capture_output=True, text=True, env=env, timeout=120)
    run_id = _check_not_recorded(run.returncode, run.stdout, run.stderr, db, out)

    (small_disk / "filler").unlink()
    resumed = subprocess.run([sys.executable, "-m", "pipeline", "resume", run_id, "--json", str(out)],
                             capture_output=True, text=True, env=env, timeout=120)
    assert resumed.returncode == 0 and "Traceback" not in resumed.stdout + resumed.stderr, resumed.stderr
    result = json.loads(out.read_text())
    assert (result["run_id"], result["status"], result["problems"]) == (run_id, "complete", [])
