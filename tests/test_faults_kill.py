"""The fault matrix, SIGKILL column: `run` is killed the moment a step's first request reaches the fake model (or,
fixed mode's research, its first page is being served), then `resume` finishes it.

Each cell asserts that the killed run is listed as interrupted, with everything recorded before the kill kept; that
`resume` exits 0 with the run complete and the findings of a run never killed; and that no paid call is repeated:
the model requests sent on resume are exactly those whose answers were not recorded, every answer is recorded once,
and no search or page is asked for again (but the page the kill cut off).

The killed `run` is this test process forked (the modules are loaded already, so a cell takes a fraction of a
second instead of the two a new interpreter needs), calling the CLI's main() as `python -m pipeline run` does;
`resume` runs in this process through main() too. One cell (`-subprocess`) runs both as real commands.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.core.schema import RunResult
from pipeline.store.sql import SqliteRunStore
from tests.fakes.anthropic_api import MessagesRequest
from tests.fakes.web_server import Route
from tests.test_faults import (  # noqa: F401  (servers, _one_certificate: fixtures)
    PAGES,
    QUESTION,
    STEPS,
    Servers,
    World,
    _one_certificate,
    baseline,
    open_world,
    servers,
    target,
)

POINTS = {"fixed": ("plan", "fetch", "analyst", "support_judge", "writer", "sentence_judge"),
          "tools": ("plan", "worker", "support_judge", "writer", "sentence_judge")}
assert all(set(POINTS[m]) - {"fetch"} <= set(STEPS[m]) for m in POINTS)
# The last checkpoint the killed run wrote: proof that it was cut where the cell says.
LAST = {"plan": None, "fetch": "plan", "worker": "plan", "analyst": "research", "writer": "judge",
        "sentence_judge": "judge"}
# Each finding is judged as it is recorded, so the first judge call comes during the step that records it: fixed
# mode's analyst (after the research checkpoint, or just after its own when the last page answered first), tools
# mode's workers (before any has finished).
LAST_JUDGED = {"fixed": {"research", "analyse"}, "tools": {"plan"}}
CELLS = [pytest.param(mode, point, False, id=f"{mode}-{point}") for mode in POINTS for point in POINTS[mode]]
CELLS.append(pytest.param("fixed", "writer", True, id="fixed-writer-subprocess"))


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def forked_cli(argv: list[str], out: Path, err: Path) -> int:
    """The pid of a child of this process running main(argv) with stdout and stderr in files, as a CLI process."""
    pid = os.fork()
    if pid:
        return pid
    code = 70
    try:  # the child: never return into pytest
        for fd, path in ((1, out), (2, err)):
            target_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target_fd, fd)
            os.close(target_fd)
        sys.stdout = open(1, "w", closefd=False, buffering=1)  # noqa: SIM115  (the child exits without closing)
        sys.stderr = open(2, "w", closefd=False, buffering=1)  # noqa: SIM115
        code = main(argv)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


@pytest.fixture()
def release() -> Iterator[threading.Event]:
    """Set when the test ends: no page handler stays blocked on it."""
    event = threading.Event()
    yield event
    event.set()


@pytest.mark.parametrize(("mode", "point", "real"), CELLS)
def test_killed_at_each_step_then_resumed(servers: Servers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          release: threading.Event, mode: str, point: str, real: bool) -> None:
    base = baseline(mode, 1, tmp_path / "baseline")
    routes = dict(PAGES)
    if point == "fetch":  # the first page hangs until the test ends: the run is killed mid-fetch
        body = PAGES["/a"].body

        def held() -> Iterator[bytes]:
            release.wait(30)
            yield body

        routes["/a"] = Route.streamed(held)
    with ExitStack() as stack:
        world = stack.enter_context(open_world(servers, tmp_path / "unused", routes))
        db = tmp_path / "cli" / "runs.sqlite"  # the CLI's store: nothing in this process has it open before the kill
        env = world.env(RESEARCH_DB=str(db))
        at: Callable[[MessagesRequest], bool] = target(point) if point != "fetch" else (lambda _r: False)
        if point != "fetch":
            world.fake.fault(at, kind="hang", times=1)  # held until the kill
        reached = (lambda: world.web.count("/a") >= 1) if point == "fetch" else (lambda: world.fake.count(at) >= 1)
        argv = ["run", QUESTION, "--mode", mode, "--quiet"]
        out, err = tmp_path / "run.out", tmp_path / "run.err"

        # The run, killed the moment the step begins.
        if real:
            with err.open("w") as stderr:
                child = subprocess.Popen([sys.executable, "-m", "pipeline", *argv], stdout=subprocess.DEVNULL,
                                         stderr=stderr, env={**os.environ, **env})
                pid = child.pid
                _wait_for(lambda: reached() or child.poll() is not None, f"the {point} step")
                os.kill(pid, signal.SIGKILL)
                child.wait(30)
                killed = child.returncode == -signal.SIGKILL
        else:
            for name, value in env.items():
                monkeypatch.setenv(name, value)
            pid = forked_cli(argv, out, err)
            ended: list[int] = []  # the child's wait status, once it is reaped

            def exited() -> bool:
                reaped, status = os.waitpid(pid, os.WNOHANG)
                ended.extend([status] if reaped else [])
                return bool(ended)

            try:
                _wait_for(lambda: reached() or exited(), f"the {point} step")
            finally:
                if not ended:
                    os.kill(pid, signal.SIGKILL)
                    ended.append(os.waitpid(pid, 0)[1])
            killed = os.WIFSIGNALED(ended[0]) and os.WTERMSIG(ended[0]) == signal.SIGKILL
        said = err.read_text()
        assert killed, said
        run_id = re.match(r"research: run (\w+) started", said).group(1)  # type: ignore[union-attr]
        if point == "fetch":
            world.web.route("/a", PAGES["/a"])
            release.set()

        # Killed: listed as interrupted, everything recorded before the kill kept.
        with SqliteRunStore(db) as store:
            assert [(r.id, r.status) for r in store.runs()] == [(run_id, "interrupted")]
            answered = len(store.events(run_id, ["model_response"]))
            recorded = store.events(run_id)
            last = store.checkpoint(run_id)
        assert (last.after if last else None) in ({LAST[point]} if point in LAST else LAST_JUDGED[mode])
        sent_before = len(world.fake.message_requests)

        # Resumed: complete, the findings of a run never killed, only what was not recorded sent again.
        json_out = tmp_path / "resumed.json"
        if real:
            done = subprocess.run([sys.executable, "-m", "pipeline", "resume", run_id, "--json", str(json_out)],
                                  capture_output=True, text=True, env={**os.environ, **env}, timeout=120)
            code, stdout, stderr_text = done.returncode, done.stdout, done.stderr
        else:
            capsys_out, capsys_err = tmp_path / "resume.out", tmp_path / "resume.err"
            with capsys_out.open("w") as o, capsys_err.open("w") as e:
                saved = sys.stdout, sys.stderr
                sys.stdout, sys.stderr = o, e
                try:
                    code = main(["resume", run_id, "--json", str(json_out)])
                finally:
                    sys.stdout, sys.stderr = saved
            stdout, stderr_text = capsys_out.read_text(), capsys_err.read_text()
        assert code == 0, stderr_text
        assert "Traceback" not in said + stdout + stderr_text
        result = RunResult.model_validate_json(json_out.read_text())
        assert (result.run_id, result.status, result.problems) == (run_id, "complete", [])
        assert {f.quote for f in result.findings} == base.quotes
        assert stdout.strip() == result.report.markdown.strip()

        sent_after = len(world.fake.message_requests) - sent_before
        assert sent_after == sum(base.counts.values()) - answered  # no recorded answer asked for again
        assert result.usage.model_calls == base.model_calls
        assert len(world.search.requests) == 1
        assert world.web.count("/a") == (2 if point == "fetch" else 1) and world.web.count("/b") <= 2
        with SqliteRunStore(db) as store:
            assert len(store.events(run_id, ["model_response"])) == base.model_calls  # each answer recorded once
            assert store.result(run_id) == result
            events = store.events(run_id)
            assert events[:len(recorded)] == recorded  # what the killed run recorded is kept as it was
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert json.loads(json_out.read_text())["status"] == "complete"
