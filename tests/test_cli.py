"""The CLI contract: help, usage errors and configuration errors give the documented exit codes and one clear line."""
from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli.commands import print_outcome, terminal_text
from pipeline.cli.main import main
from pipeline.core.schema import Report, RunOptions, RunResult
from pipeline.store.sql import SqliteRunStore


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def test_help_lists_the_commands() -> None:
    proc = cli("--help")
    assert proc.returncode == 0
    for command in ("run", "fetch", "search"):
        assert command in proc.stdout


@pytest.mark.parametrize("args", [[], ["fetch"], ["run"], ["run", "q", "--mode", "magic"], ["bogus"]])
def test_usage_errors_exit_2(args: list[str]) -> None:
    proc = cli(*args)
    assert proc.returncode == 2 and "usage:" in proc.stderr


def test_bad_environment_value_is_one_clear_line_and_exit_2() -> None:
    proc = cli("search", "x", env={"RESEARCH_SEARCH_PROVIDER": "bing"})
    assert proc.returncode == 2
    assert "RESEARCH_SEARCH_PROVIDER" in proc.stderr and "Traceback" not in proc.stderr


def test_missing_provider_key_names_the_variable() -> None:
    proc = cli("search", "x", "--json", env={"RESEARCH_SEARCH_PROVIDER": "brave"})
    assert proc.returncode == 2 and "BRAVE_API_KEY" in proc.stderr and "Traceback" not in proc.stderr


def test_console_script_is_declared() -> None:
    import tomllib
    from pathlib import Path

    data = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert data["project"]["scripts"]["research"] == "pipeline.cli.main:main"


def _finished_run(db: Path) -> RunResult:
    result = RunResult(run_id="done1", question="What does Qdrant cost?", mode="fixed", status="complete",
                       report=Report(markdown="# Qdrant\n\nIt starts at 25 dollars."))
    with SqliteRunStore(db) as store:
        recorder = store.recorder(result.run_id)
        recorder.start(question=result.question, options=RunOptions(), models={}, prompt_version="v")
        recorder.finish(result)
    return result


@pytest.mark.parametrize("where", ["a directory", "under a file"])
def test_export_to_a_path_that_cannot_be_written_is_one_line_and_exit_1(
        where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _finished_run(tmp_path / "runs.sqlite")
    (tmp_path / "file").write_text("x")
    target = tmp_path if where == "a directory" else tmp_path / "file" / "run.json"
    monkeypatch.setenv("RESEARCH_DB", str(tmp_path / "runs.sqlite"))
    assert main(["export", "done1", str(target)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"research: cannot write {target}")


def test_replay_refuses_an_unwritable_json_path_before_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "runs.sqlite"
    _finished_run(db)
    monkeypatch.setenv("RESEARCH_DB", str(db))
    assert main(["replay", "done1", "--json", str(tmp_path), "--quiet"]) == 2
    assert "--json" in capsys.readouterr().err
    with SqliteRunStore(db) as store:
        assert [r.id for r in store.runs()] == ["done1"]  # nothing was run


def test_run_refuses_an_unwritable_json_path_before_running(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    proc = cli("run", "What does Qdrant cost?", "--json", str(tmp_path), "--quiet",
               env={"ANTHROPIC_API_KEY": "sk-ant-cli-test-key", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
                    "RESEARCH_SEARCH_PROVIDER": "brave", "BRAVE_API_KEY": "brave-key", "RESEARCH_DB": str(db)})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "--json" in proc.stderr
    assert not db.exists()  # no run was started


def test_the_report_is_printed_even_when_its_json_cannot_be_written(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    result = _finished_run(tmp_path / "runs.sqlite")
    assert print_outcome(result, str(tmp_path)) == 1
    out, err = capsys.readouterr()
    assert out.strip() == result.report.markdown.strip()
    assert f"research: cannot write the JSON to {tmp_path}" in err and "python -m pipeline export done1" in err
    assert "JSON in" not in err and "Traceback" not in err


def test_runs_prints_questions_without_terminal_control_characters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "runs.sqlite"
    hostile = "Why\x1b]0;owned\x07 is\x1b[2J the sky \u202eblue\x9b31m?"
    with SqliteRunStore(db) as store:
        store.recorder("ctl1").start(question=hostile, options=RunOptions(), models={}, prompt_version="v")
    monkeypatch.setenv("RESEARCH_DB", str(db))
    assert main(["runs"]) == 0
    out = capsys.readouterr().out
    assert "Why]0;owned is[2J the sky blue31m?" in out
    assert not any(c in out for c in "\x1b\x07\x9b\u202e")
    assert main(["runs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["question"] == hostile  # the data itself is kept exact


# --- the report on a terminal reads as text; piped, it stays Markdown ----------------------------------------------

ESCAPED = ("# NASA picks rover \\(VIPER\\) lander\n\n_Extractive: quotes only, no model._\n\n"
           "- Page S1 says: \"Astrobotic won a \\$199.5 million task order\" [F1]\n")
_SHOW = ("import sys\nfrom pipeline.cli.commands import print_outcome\nfrom pipeline.core.schema import RunResult\n"
         "print_outcome(RunResult.model_validate_json(sys.stdin.read()), None)\n")


def test_terminal_text_drops_markdown_escapes_and_plain_emphasis_lines_only() -> None:
    assert terminal_text(ESCAPED) == ("# NASA picks rover (VIPER) lander\n\nExtractive: quotes only, no model.\n\n"
                                      "- Page S1 says: \"Astrobotic won a $199.5 million task order\" [F1]\n")
    assert terminal_text("a_b_c and \\\\ kept\n") == "a_b_c and \\ kept\n"


def _shown(result: RunResult, *, tty: bool) -> str:
    """stdout of print_outcome in a child process whose stdout is a pseudo-terminal, or a pipe."""
    if not tty:
        return subprocess.run([sys.executable, "-c", _SHOW], input=result.model_dump_json(), capture_output=True,
                              text=True, timeout=60, check=True).stdout
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", _SHOW], stdin=subprocess.PIPE, stdout=follower,
                            stderr=subprocess.DEVNULL)
    os.close(follower)
    assert proc.stdin is not None
    proc.stdin.write(result.model_dump_json().encode())
    proc.stdin.close()
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_a_report_printed_to_a_terminal_is_unescaped_and_piped_stays_markdown() -> None:
    result = RunResult(run_id="t1", question="Who won VIPER?", mode="extractive", status="complete",
                       report=Report(markdown=ESCAPED))
    assert _shown(result, tty=True).startswith(terminal_text(ESCAPED))
    assert _shown(result, tty=False).startswith(ESCAPED)
