"""Several app instances on one database (PostgreSQL, and SQLite for instances on one machine): each instance is a
process of its own (tests/fakes/app_process.py) with the registry, ledger and limiter the app builds. The spend
ceiling, the wrong-code limit and the view of live runs are shared; a run whose instance is killed is shown as
interrupted once its heartbeat goes stale, and another instance resumes it without repeating a finished model call
(checked on the fake model's own request log)."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.core.schema import RunResult
from pipeline.store import migrated_database
from pipeline.store.sql import SqlRunStore
from tests.test_live import QUESTION, QUOTE, World, world  # noqa: F401  (world is a fixture)

ROOT = Path(__file__).resolve().parents[1]
STALE = 2.0


class AppProcess:
    """One app instance: send a command, read its answer (a reader thread keeps stdout drained)."""

    def __init__(self, env: dict[str, str]):
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.app_process"], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1)
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        assert self._next(60) == {"ready": True}

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)

    def _next(self, timeout: float) -> Any:
        try:
            return json.loads(self._lines.get(timeout=timeout))
        except queue.Empty:
            err = self.proc.stderr.read() if self.proc.poll() is not None and self.proc.stderr else ""
            raise AssertionError(f"the app process did not answer in {timeout} s {err[-2000:]}") from None

    def send(self, **cmd: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def answer(self, timeout: float = 60) -> Any:
        reply = self._next(timeout)
        assert "error" not in reply, reply["error"]
        return reply["ok"]

    def ask(self, timeout: float = 60, **cmd: Any) -> Any:
        self.send(**cmd)
        return self.answer(timeout)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture()
def apps(db_url: str, world: World) -> Iterator[Callable[[], AppProcess]]:
    """Starts app instances on the test database, with the world's fake model, search and pages."""
    env = {**os.environ, "RESEARCH_DB": db_url, "ANTHROPIC_API_KEY": "sk-ant-live-test",
           "ANTHROPIC_BASE_URL": world.fake.base_url, "RESEARCH_SEARCH_PROVIDER": "brave",
           "BRAVE_API_KEY": "brave-key", "RESEARCH_SEARCH_BASE_URL": world.search.base_url,
           "RESEARCH_FETCH_ALLOW": world.web.host_port, "RESEARCH_MODEL_MAX_RETRIES": "1",
           "RESEARCH_MODEL_TIMEOUT": "10", "RESEARCH_HEARTBEAT_STALE": str(STALE), "APP_BEAT_EVERY": "0.2"}
    started: list[AppProcess] = []

    def start() -> AppProcess:
        started.append(AppProcess(env))
        return started[-1]

    yield start
    for app in started:
        app.close()


def until(check: Callable[[], Any], timeout: float = 30, every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(every)
    raise AssertionError("the condition did not come true in time")


def test_forty_reservations_on_two_instances_never_pass_the_ceiling(apps: Callable[[], AppProcess]) -> None:
    a, b = apps(), apps()
    a.send(op="reserve_many", prefix="a", n=20, want=0.3)  # 40 x $0.30 = $12 asked against a $5 ceiling
    b.send(op="reserve_many", prefix="b", n=20, want=0.3)
    grants = [g for g in [*a.answer(), *b.answer()] if g is not None]
    assert sum(grants) == pytest.approx(5.0) and sum(grants) <= 5.0 + 1e-9
    assert sorted(grants)[-16:] == [0.3] * 16 and len(grants) == 17  # 16 full grants, one of the last $0.20
    assert apps().ask(op="today") == pytest.approx(5.0)  # a third instance sees the same ledger


def test_wrong_codes_on_two_instances_are_counted_together(apps: Callable[[], AppProcess]) -> None:
    a, b = apps(), apps()
    for app in (a, b, a, b, a):
        assert not app.ask(op="attempt", visitor="v1", right=False)["ok"]
    refused = b.ask(op="attempt", visitor="v1", right=True)
    assert not refused["ok"] and "Too many wrong codes" in refused["message"]
    assert a.ask(op="attempt", visitor="v2", right=True)["ok"]


def test_a_run_on_one_instance_is_followed_from_another(apps: Callable[[], AppProcess], world: World) -> None:
    world.brain.latency = 0.3
    a, b = apps(), apps()
    run_id = a.ask(op="start", question=QUESTION, mode="fixed")["run_id"]
    seen = until(lambda: (p := b.ask(op="progress", run_id=run_id)) and p["model_calls"] >= 1 and p)
    assert seen["status"] == "running" and seen["question"] == QUESTION and seen["step"] != "starting"
    assert b.ask(op="running") == 1  # the other instance's run counts against the shared limit
    done = until(lambda: (p := b.ask(op="progress", run_id=run_id))["status"] != "running" and p, timeout=60)
    assert done["status"] == "finished"
    rr = RunResult.model_validate(b.ask(op="result", run_id=run_id))  # read from the database, not a's memory
    assert rr.status == "complete" and any(f.quote == QUOTE for f in rr.findings)
    assert b.ask(op="today") == pytest.approx(rr.usage.cost_usd)  # a settled its reservation to the real cost


def test_a_killed_instance_run_is_interrupted_and_resumed_without_repeating_a_call(
        apps: Callable[[], AppProcess], world: World, db_url: str) -> None:
    world.brain.latency = 0.4
    a, b = apps(), apps()
    run_id = a.ask(op="start", question=QUESTION, mode="tools")["run_id"]
    until(lambda: b.ask(op="progress", run_id=run_id)["model_calls"] >= 2, timeout=60)
    a.kill()
    sent_before = len(world.fake.message_requests)
    db = migrated_database(db_url)
    with SqlRunStore(db, stale_after=STALE) as store:
        finished_before = len(store.events(run_id, ["model_response"]))
        assert finished_before >= 2
        assert b.ask(op="interrupted") == []  # its heartbeat is still fresh
        assert until(lambda: run_id in b.ask(op="interrupted"), timeout=STALE * 5)
        assert b.ask(op="progress", run_id=run_id)["status"] == "interrupted"
        assert b.ask(op="running") == 0  # the dead instance's run no longer holds a slot
        resumed = b.ask(op="resume", run_id=run_id)
        assert resumed == {"run_id": run_id}
        again = apps().ask(op="resume", run_id=run_id)  # a second visitor, elsewhere, cannot resume it too
        assert again["refused"] == "resume"
        assert b.ask(op="wait", run_id=run_id, timeout=90)
        rr = RunResult.model_validate(b.ask(op="result", run_id=run_id))
        assert rr.status == "complete" and any(f.quote == QUOTE for f in rr.findings)
        row = store.run(run_id)
        assert row is not None and row.status == "complete"
    # No model call that had been answered before the kill was sent again: a body sent twice can only be one that
    # was in flight when the instance died.
    bodies = Counter(m.recorded.raw for m in world.fake.message_requests)
    repeated = sum(n - 1 for n in bodies.values())
    assert repeated <= sent_before - finished_before
    assert len(world.fake.message_requests) > sent_before  # the rest of the run was done by the resuming instance
    # The ledger counts what the run spent in all, once: the dead instance's reservation was released.
    assert b.ask(op="today") == pytest.approx(rr.usage.cost_usd)
