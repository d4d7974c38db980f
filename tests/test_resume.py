"""Resume: a CLI run killed with SIGKILL in the middle of research continues with `resume`, repeating no search,
fetch or model call finished before the kill, and counting every unit of spend once (with either model provider)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.core.event_types import SearchEvent
from pipeline.core.schema import RunOptions, RunResult
from pipeline.models.anthropic import WARM_ASK
from pipeline.models.openai import TOOLS_PROBE
from pipeline.replay.checkpoint import Checkpoint
from pipeline.replay.tape import without_nonces
from pipeline.store.sql import REEMITTED, StoreError
from tests.fakes.anthropic_api import FakeAnthropic, MessagesRequest
from tests.fakes.openai_api import FakeOpenAI, openai_env
from tests.fakes.research_brain import ResearchBrain
from tests.fakes.search_apis import FakeSearchApi, Hit
from tests.fakes.stores import open_test_store
from tests.fakes.web_server import Route, WebServer
from tests.test_e2e import page

QUESTION = "What does Qdrant Cloud pricing start at?"
PAGE_A = page("Qdrant pricing", "Qdrant Cloud pricing starts at 25 dollars per month for the smallest cluster.")
PAGE_B = page("Qdrant plans", "Qdrant Cloud pricing for the hybrid plan starts at 99 dollars per month.")


@dataclass
class World:
    model: FakeAnthropic | FakeOpenAI
    search: FakeSearchApi
    web: WebServer
    release: threading.Event  # while unset, /b hangs before sending its body: the run is mid-fetch
    db: str  # RESEARCH_DB: a SQLite file or a postgresql:// URL
    started: bool = False  # once the first run began: later commands get only the key and URL, not the choices

    @property
    def model_requests(self) -> list[MessagesRequest]:
        return self.model.chat_requests if isinstance(self.model, FakeOpenAI) else self.model.message_requests

    def env(self) -> dict[str, str]:
        if isinstance(self.model, FakeOpenAI):  # `resume` takes the provider and model ids from the recording
            model = openai_env(self.model.base_url, "sk-openai-resume-test-key", choices=not self.started)
        else:
            model = {"ANTHROPIC_API_KEY": "sk-ant-resume-test-key", "ANTHROPIC_BASE_URL": self.model.base_url}
        return {**os.environ, **model,
                "RESEARCH_SEARCH_PROVIDER": "brave", "BRAVE_API_KEY": "brave-key",
                "RESEARCH_SEARCH_BASE_URL": self.search.base_url, "RESEARCH_FETCH_ALLOW": self.web.host_port,
                "RESEARCH_DB": self.db, "RESEARCH_MODEL_MAX_RETRIES": "0"}


@pytest.fixture(params=["anthropic", "openai"])
def world(db_url: str, request: pytest.FixtureRequest) -> Iterator[World]:
    release = threading.Event()

    def slow_body() -> Iterator[bytes]:
        release.wait(60)
        yield PAGE_B.body

    with ExitStack() as stack:
        web = stack.enter_context(WebServer({"/a": PAGE_A, "/b": Route.streamed(slow_body)}))
        stack.callback(release.set)  # runs before the server stops: no handler stays blocked
        search = stack.enter_context(FakeSearchApi("brave", [
            Hit(title="a", url=web.url("/a"), snippet="s", published=None),
            Hit(title="b", url=web.url("/b"), snippet="s", published=None)], api_key="brave-key"))
        model: FakeAnthropic | FakeOpenAI = stack.enter_context(
            FakeOpenAI(ResearchBrain()) if request.param == "openai" else FakeAnthropic(ResearchBrain()))
        yield World(model, search, web, release, db_url)


def _wait_for(condition, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _all_recorded(world: World, err: Path) -> bool:
    """Whether the run that `err` names has recorded a response for every request the fake model has received."""
    lines = err.read_text().splitlines()
    started = re.match(r"research: run (\w+) started", lines[0]) if lines else None
    if started is None:
        return False
    with open_test_store(world.db) as store:
        return len(store.events(started.group(1), ["model_response"])) == len(world.model.requests)


def _is_probe(r: MessagesRequest) -> bool:
    """The OpenAI adapter's check that the endpoint calls tools, made once before a tools-mode run."""
    return r.has_tool("record_finding") and r.user_texts == [TOOLS_PROBE]


def _is_warm(r: MessagesRequest) -> bool:
    """The Anthropic adapter's request that writes the workers' shared prefix into the cache, beside the plan."""
    return r.has_tool("record_finding") and r.user_texts == [WARM_ASK]


def _is_worker(r: MessagesRequest) -> bool:
    return r.has_tool("record_finding") and not _is_probe(r) and not _is_warm(r)


def test_a_killed_run_resumes_without_repeating_finished_work(world: World, tmp_path: Path) -> None:
    err = tmp_path / "run.err"
    with err.open("w") as stderr:
        child = subprocess.Popen([sys.executable, "-m", "pipeline", "run", QUESTION, "--mode", "tools", "--quiet"],
                                 stdout=subprocess.DEVNULL, stderr=stderr, env=world.env())
        try:
            # The worker has searched, fetched /a, recorded a finding and asked for /b, which now hangs. The cache
            # warm-up runs beside the plan: a model request still in flight at the kill is sent but never recorded,
            # so the kill waits until every request the model received has its response recorded.
            _wait_for(lambda: child.poll() is not None or world.web.count("/b") == 1 and _all_recorded(world, err),
                      "the fetch of /b, with every model response recorded")
            assert child.poll() is None, err.read_text()
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    world.started = True
    first_line = err.read_text().splitlines()[0]
    run_id = re.match(r"research: run (\w+) started \(tools mode\); resume with: python -m pipeline resume (\w+)$",
                      first_line).group(1)  # type: ignore[union-attr]
    before = {"model": len(world.model.requests), "worker": world.model.count(_is_worker),
              "search": len(world.search.requests), "/a": world.web.count("/a")}
    assert before["worker"] >= 3 and before["search"] == 1 and before["/a"] == 1

    listed = subprocess.run([sys.executable, "-m", "pipeline", "runs", "--json"], capture_output=True, text=True,
                            env=world.env(), timeout=60)
    assert [(r["id"], r["status"]) for r in json.loads(listed.stdout)] == [(run_id, "interrupted")]
    with open_test_store(world.db) as store:
        assert store.result(run_id) is None
        assert [e.payload["after"] for e in store.events(run_id, ["checkpoint"])] == ["plan"]
        recorded_before = len(store.events(run_id))

    world.web.route("/b", PAGE_B)
    world.release.set()
    out = tmp_path / "resumed.json"
    resumed = subprocess.run([sys.executable, "-m", "pipeline", "resume", run_id, "--json", str(out), "--quiet"],
                             capture_output=True, text=True, env=world.env(), timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    result = RunResult.model_validate_json(out.read_text())
    assert result.run_id == run_id and result.status == "complete"
    assert {f.quote for f in result.findings} == {
        "Qdrant Cloud pricing starts at 25 dollars per month for the smallest cluster.",
        "Qdrant Cloud pricing for the hybrid plan starts at 99 dollars per month."}

    # Nothing finished before the kill was done again: one plan, one search, one fetch of /a, and every worker
    # turn sent once (each turn's conversation has its own length); only the fetch cut off by the kill is redone.
    requests = world.model_requests
    assert sum("<max_sub_questions>" in r.last_user_text for r in requests) == 1
    assert sum(map(_is_probe, requests)) == (1 if isinstance(world.model, FakeOpenAI) else 0)
    assert sum(map(_is_warm, requests)) == (0 if isinstance(world.model, FakeOpenAI) else 1)  # not warmed again
    turns = [len(r.messages) for r in requests if _is_worker(r)]
    assert len(turns) == len(set(turns)) > before["worker"]
    assert len(world.search.requests) == 1 and world.web.count("/a") == 1 and world.web.count("/b") == 2

    # Spend is counted once: the ledger continued from the recording, so it holds every request sent, once.
    assert result.usage.model_calls == len(world.model.requests) > before["model"]
    assert result.usage.searches == 1 and result.usage.fetches == 2
    with open_test_store(world.db) as store:
        responses = store.events(run_id, ["model_response"])
        assert len(responses) == len(world.model.requests)  # served calls are not recorded twice
        assert sum(e.payload["cost_usd"] for e in responses) == pytest.approx(result.usage.cost_usd)
        assert store.result(run_id) == result and store.run(run_id).status == "complete"  # type: ignore[union-attr]
        events = store.events(run_id)
        assert len(events) > recorded_before and [e.seq for e in events] == list(range(1, len(events) + 1))
        # Checkpoints after each step and each worker; the last one rebuilds the notebook from the stored pages.
        afters = [e.payload["after"] for e in store.events(run_id, ["checkpoint"])]
        assert afters[:1] == ["plan"] and {"research", "worker:Q1", "judge", "write"} <= set(afters)
        # What the resumed run did again on its way to the cut (steps, tool calls, findings) is not recorded twice.
        derived = Counter(e.kind + without_nonces(json.dumps(e.payload)) for e in store.events(run_id, REEMITTED))
        assert derived and max(derived.values()) == 1
        assert [e.payload["id"] for e in store.events(run_id, ["finding"])] == ["F1", "F2"]
        last = Checkpoint.model_validate(store.checkpoint(run_id))
        texts = [e.payload["text"] for e in store.events(run_id, ["fetch"]) if e.payload.get("text")]
        state = last.notebook_state(texts)
        assert [s.source.id for s in state.sources] == [s.id for s in result.sources]
        assert all(f.quote == state.sources[int(f.source[1:]) - 1].text[f.start:f.end] for f in result.findings)
        assert last.budget.used == result.usage


def test_resume_refuses_a_finished_run_and_an_unknown_one(world: World) -> None:
    world.release.set()
    done = subprocess.run([sys.executable, "-m", "pipeline", "run", QUESTION, "--quiet"], capture_output=True,
                          text=True, env=world.env(), timeout=120)
    assert done.returncode == 0, done.stderr
    run_id = re.search(r"run (\w+) started", done.stderr).group(1)  # type: ignore[union-attr]
    again = subprocess.run([sys.executable, "-m", "pipeline", "resume", run_id], capture_output=True, text=True,
                           env=world.env(), timeout=60)
    assert again.returncode == 1 and "already finished" in again.stderr and "export" in again.stderr
    unknown = subprocess.run([sys.executable, "-m", "pipeline", "resume", "nosuchrun"], capture_output=True,
                             text=True, env=world.env(), timeout=60)
    assert unknown.returncode == 2 and "python -m pipeline runs" in unknown.stderr


def _interrupted_run(db: str, provider: str) -> None:
    """A run whose process is gone, after one search through `provider`."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    with open_test_store(db) as store:
        recorder = store.recorder("r1")
        recorder.start(question=QUESTION, options=RunOptions(), models={}, prompt_version="v")
        recorder.emit(SearchEvent(query="qdrant pricing", provider=provider, n=10, results=[]))
        recorder.stop()
        assert store.db.execute("UPDATE runs SET pid = ? WHERE id = 'r1'", (int(dead.stdout),)).rowcount == 1


def test_resume_refuses_a_search_provider_other_than_the_recorded_one(db_url: str, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    _interrupted_run(db_url, "brave")
    for name, value in {"RESEARCH_DB": db_url, "ANTHROPIC_API_KEY": "sk-ant-resume-test-key",
                        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "RESEARCH_SEARCH_PROVIDER": "tavily",
                        "TAVILY_API_KEY": "tvly-resume-test-key", "RESEARCH_SEARCH_BASE_URL": "http://127.0.0.1:9"
                        }.items():
        monkeypatch.setenv(name, value)
    assert main(["resume", "r1", "--quiet"]) == 2
    assert "RESEARCH_SEARCH_PROVIDER=brave" in capsys.readouterr().err
    with open_test_store(db_url) as store:
        assert store.run("r1").shown_status == "interrupted"  # type: ignore[union-attr]  # not taken over


def test_of_two_resumes_racing_for_one_run_only_one_claims_it(db_url: str) -> None:
    _interrupted_run(db_url, "brave")
    with open_test_store(db_url) as first, open_test_store(db_url) as second:
        # Both have read the row and found its process gone; then both try to take it over.
        seen_first, seen_second = first.require_run("r1"), second.require_run("r1")
        assert seen_first.shown_status == seen_second.shown_status == "interrupted"
        first.claim(seen_first)
        with pytest.raises(StoreError, match="another process took over run r1"):
            second.claim(seen_second)
        assert second.require_run("r1").pid == os.getpid() and second.require_run("r1").shown_status == "running"
