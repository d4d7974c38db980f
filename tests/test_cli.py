"""The CLI contract: help, usage errors and configuration errors give the documented exit codes and one clear line."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest


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
    assert data["project"]["scripts"]["research"] == "pipeline.__main__:main"
