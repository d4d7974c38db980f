"""Live runs: background jobs against the local fakes, progress, cancellation, and the server-wide limits
(concurrent runs, a daily spend ceiling in SQLite shared by every registry on the same file); extractive runs with no
model key over a small corpus, which cost nothing and reserve nothing."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pipeline.config import Settings
from pipeline.core.budget import Budget, Phase, Refusal
from pipeline.core.schema import BudgetLimits, RunResult
from pipeline.research.orchestrator import research
from pipeline.store import migrated_database
from pipeline.store.database import Database
from pipeline.store.files import load_run_file
from pipeline.store.sql import SqlRunStore
from pipeline.store.timeline import load_timeline
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.corpora import qdrant_corpus
from tests.fakes.research_brain import ResearchBrain
from tests.fakes.search_apis import FakeSearchApi, Hit
from tests.fakes.web_server import Route, WebServer
from ui.jobs import MODES, NO_MODEL_KEY, PRESETS, Job, JobRegistry, LiveLimits, Refused, preset_label
from ui.ledger import SpendLedger

QUESTION = "What does Qdrant Cloud pricing start at?"
QUOTE = "Qdrant Cloud pricing starts at 25 dollars per month for the smallest cluster."
NO_KEY_SENTENCE = ("No model key is configured on this server, so only the extractive mode — no model, sentences "
                   "selected by code — can run")


@dataclass
class World:
    fake: FakeAnthropic
    brain: ResearchBrain
    search: FakeSearchApi
    web: WebServer

    def settings(self) -> Settings:
        return Settings(anthropic_api_key="sk-ant-live-test", anthropic_base_url=self.fake.base_url,
                        search_provider="brave", brave_api_key="brave-key", search_base_url=self.search.base_url,
                        fetch_allow_raw=self.web.host_port, model_max_retries=1, model_timeout=10)


@pytest.fixture()
def world() -> Iterator[World]:
    brain = ResearchBrain()
    with ExitStack() as stack:
        web = stack.enter_context(WebServer({"/qdrant": Route.html(
            "<html><head><title>Qdrant pricing</title></head><body><article><h1>Qdrant pricing</h1>"
            f"<p>Qdrant is an open-source vector database.</p><p>{QUOTE}</p></article></body></html>")}))
        search = stack.enter_context(FakeSearchApi("brave", [Hit(title="Qdrant", url=web.url("/qdrant"),
                                                                 snippet="pricing", published=None)],
                                                   api_key="brave-key"))
        fake = stack.enter_context(FakeAnthropic(brain))
        yield World(fake, brain, search, web)


_BACKEND: dict[str, str] = {}
_OPENED: list[Database] = []


@pytest.fixture(autouse=True)
def _on_each_backend(db_url: str) -> Iterator[None]:
    """Every test of this module runs on both databases: a SQLite file, and PostgreSQL (tests/conftest.py)."""
    _BACKEND["url"] = db_url
    yield
    while _OPENED:
        _OPENED.pop().close()


def state_db(tmp_path: Path) -> Database:
    """The database the ledger and the live runs share: this test's backend (each call a new connection or pool, as
    another session or process would open)."""
    _OPENED.append(migrated_database(_BACKEND["url"]))
    return _OPENED[-1]


class Clock:
    def __init__(self, t: float = 1_767_225_600.0):  # 2026-01-01 00:00 UTC
        self.t = t

    def __call__(self) -> float:
        return self.t


def registry(tmp_path: Path, world: World, **limits: float) -> JobRegistry:
    return JobRegistry(runs_dir=tmp_path / "live", db=state_db(tmp_path),
                       limits=LiveLimits(**limits), settings=world.settings)


def finish(reg: JobRegistry, job: Job) -> Job:
    assert reg.wait(job.id, timeout=60), "the live run did not finish"
    return job


def test_cancelled_budget_refuses_every_call() -> None:
    budget = Budget(BudgetLimits(), lambda m: Settings().price("claude-haiku-5-5"))
    assert budget.spend("searches") is None and not budget.exhausted()
    budget.cancel()
    for refusal in (budget.spend("searches"), budget.spend("fetches", Phase.SYNTHESIS),
                    budget.authorize_call("claude-haiku-5-5", input_tokens=10, max_tokens=100, phase=Phase.SYNTHESIS)):
        assert isinstance(refusal, Refusal) and refusal.message.startswith("CANCELLED")
    assert budget.cancelled and budget.exhausted(Phase.SYNTHESIS) and budget.remaining("fetches") == 0
    assert budget.used().searches == 1


def test_ledger_reserves_within_the_ceiling_and_settles_to_real_cost(db_url: str) -> None:
    clock = Clock()
    ledger = SpendLedger(migrated_database(db_url), clock)
    assert ledger.reserve("a", 2.0, ceiling=5.0, minimum=0.05) == 2.0
    assert ledger.reserve("b", 2.0, ceiling=5.0, minimum=0.05) == 2.0
    assert ledger.reserve("c", 2.0, ceiling=5.0, minimum=0.05) == 1.0  # lowered to what is left today
    assert ledger.reserve("d", 2.0, ceiling=5.0, minimum=0.05) is None
    ledger.settle("a", 0.25)
    assert ledger.today() == pytest.approx(3.25)
    other = SpendLedger(migrated_database(db_url), clock)  # another session, process or instance: same ledger
    assert other.reserve("e", 2.0, ceiling=5.0, minimum=0.05) == pytest.approx(1.75)
    clock.t += 86_400  # a new UTC day
    assert ledger.today() == 0.0 and ledger.reserve("f", 2.0, ceiling=5.0, minimum=0.05) == 2.0


@pytest.mark.parametrize("mode", ["fixed", "tools"])
def test_a_live_run_works_in_the_background_and_is_saved(tmp_path: Path, world: World, mode: str) -> None:
    reg = registry(tmp_path, world)
    job = reg.start(QUESTION, mode, "quick")
    assert isinstance(job, Job) and job.thread is not None and job.thread.daemon
    finish(reg, job)
    p = job.progress()
    assert p.status == "finished" and p.step == "done" and p.findings >= 1
    assert p.model_calls == len(world.fake.requests) and p.searches >= 1 and p.fetches >= 1
    assert p.limits.cost_usd == PRESETS["quick"].limits.cost_usd and p.recent
    saved = load_run_file(tmp_path / "live", job.run_id)
    assert saved is not None and saved == job.result and saved.mode == mode
    assert any(f.quote == QUOTE for f in saved.findings) and saved.status == "complete"
    timeline = load_timeline(saved, tmp_path / "live")
    assert timeline.origin == "events"
    assert sum(e.kind == "model" for e in timeline.entries) == saved.usage.model_calls
    assert sum(e.cost_usd for e in timeline.entries) == pytest.approx(saved.usage.cost_usd)
    assert reg.ledger.today() == pytest.approx(saved.usage.cost_usd)  # the reservation was settled
    assert reg.running() == 0


def test_concurrency_limit_refuses_with_its_message(tmp_path: Path, world: World) -> None:
    world.brain.latency = 0.3
    reg = registry(tmp_path, world, max_concurrent=1)
    first = reg.start(QUESTION, "fixed", "quick")
    assert isinstance(first, Job)
    second = reg.start("Another question about Qdrant pricing?", "fixed", "quick")
    assert isinstance(second, Refused) and second.reason == "concurrency"
    assert "already in progress" in second.message and "limit is 1" in second.message
    finish(reg, first)
    third = reg.start("Another question about Qdrant pricing?", "fixed", "quick")
    assert isinstance(third, Job)
    finish(reg, third)


def test_daily_spend_ceiling_refuses_with_its_message_and_lowers_the_last_budget(tmp_path: Path,
                                                                                   world: World) -> None:
    reg = registry(tmp_path, world, daily_usd=0.30)
    job = reg.start(QUESTION, "fixed", "standard")
    assert isinstance(job, Job) and job.limits.cost_usd == pytest.approx(0.30)
    refused = reg.start(QUESTION, "fixed", "quick")  # the first still holds its whole cap
    assert isinstance(refused, Refused) and refused.reason == "spend"
    assert "spending limit" in refused.message and "$0.30" in refused.message
    finish(reg, job)
    assert job.result is not None and job.result.usage.cost_usd <= 0.30
    again = registry(tmp_path, world, daily_usd=0.30)  # a restarted server reads the same ledger
    nxt = again.start(QUESTION, "fixed", "quick")
    assert isinstance(nxt, Job)
    assert nxt.limits.cost_usd == pytest.approx(min(0.25, 0.30 - job.result.usage.cost_usd), abs=1e-6)
    finish(again, nxt)


def test_cancel_winds_the_run_down_and_keeps_what_was_gathered(tmp_path: Path, world: World) -> None:
    world.brain.latency = 0.4
    reg = registry(tmp_path, world)
    job = reg.start(QUESTION, "tools", "quick")
    assert isinstance(job, Job)
    time.sleep(0.6)
    assert reg.cancel(job.id) and job.progress().cancel_requested
    started = time.monotonic()
    finish(reg, job)
    assert time.monotonic() - started < 3
    rr = job.result
    assert rr is not None and rr.status in ("partial", "failed")
    assert rr.problems[-1].kind == "cancelled" and [p.kind for p in rr.problems].count("cancelled") == 1
    assert rr.usage.model_calls <= 3 and load_run_file(tmp_path / "live", rr.run_id) == rr
    assert not reg.cancel(job.id)  # already finished


def test_refusals_before_anything_is_spent(tmp_path: Path, world: World) -> None:
    reg = registry(tmp_path, world)
    assert isinstance(r := reg.start("   ", "fixed", "quick"), Refused) and r.reason == "question"
    assert isinstance(r := reg.start("x" * 501, "fixed", "quick"), Refused) and r.reason == "question"
    assert isinstance(r := reg.start(QUESTION, "fixed", "huge"), Refused) and r.reason == "preset"
    no_keys = JobRegistry(runs_dir=tmp_path / "live", db=state_db(tmp_path),
                          limits=LiveLimits(), settings=lambda: Settings(search_provider="corpus"))
    refused = no_keys.start(QUESTION, "fixed", "quick")
    assert isinstance(refused, Refused) and refused.reason == "config" and "ANTHROPIC_API_KEY" in refused.message
    assert isinstance(r := reg.start(QUESTION, "bogus", "quick"), Refused) and r.reason == "mode"  # type: ignore[arg-type]
    assert reg.ledger.today() == 0.0 and world.fake.requests == []


def test_live_runs_are_recorded_in_the_run_store(tmp_path: Path, world: World, db_url: str) -> None:
    db = migrated_database(db_url)
    store = SqlRunStore(db, owns_db=False)
    reg = JobRegistry(runs_dir=tmp_path / "live", db=db, limits=LiveLimits(), settings=world.settings, store=store)
    job = reg.start(QUESTION, "tools", "quick")
    assert isinstance(job, Job)
    rr = finish(reg, job).result
    assert rr is not None
    row = store.run(rr.run_id)
    assert row is not None and row.status == rr.status and row.question == QUESTION
    stored = store.result(rr.run_id)
    assert stored is not None and stored.findings == rr.findings and any(f.quote == QUOTE for f in stored.findings)
    timeline = load_timeline(rr, None, store)
    assert timeline.origin == "run store"
    assert sum(e.kind == "model" for e in timeline.entries) == rr.usage.model_calls
    assert {e.step for e in timeline.entries} >= {"plan", "worker"}


# -- extractive runs: no model, no key, no dollars -----------------------------------------------------------------

def no_key_registry(tmp_path: Path, research_fn: Callable[..., RunResult] = research, **limits: Any) -> JobRegistry:
    corpus = qdrant_corpus(tmp_path / "corpus")
    return JobRegistry(runs_dir=tmp_path / "live", db=state_db(tmp_path),
                       limits=LiveLimits(**limits), research_fn=research_fn,
                       settings=lambda: Settings(search_provider="corpus", corpus_dir=str(corpus)))


def test_without_a_model_key_only_extractive_is_offered_and_it_runs_for_nothing(tmp_path: Path) -> None:
    reg = no_key_registry(tmp_path, daily_usd=0.0)  # no dollars at all today: an extractive run needs none
    offer = reg.offer()
    assert offer.modes == ("extractive",) and offer.problem is None
    assert offer.note == NO_MODEL_KEY and NO_KEY_SENTENCE in offer.note and "ANTHROPIC_API_KEY" in offer.note
    for mode in ("fixed", "tools"):
        refused = reg.start(QUESTION, mode, "quick")
        assert isinstance(refused, Refused) and refused.reason == "config" and refused.message == NO_MODEL_KEY
    job = reg.start(QUESTION, "extractive", "quick")
    assert isinstance(job, Job)
    finish(reg, job)
    p = job.progress()
    assert p.status == "finished" and p.findings >= 1 and p.searches >= 1 and p.fetches >= 1
    assert p.model_calls == 0 and p.cost_usd == 0.0 and any(line.startswith("search:") for line in p.recent)
    quick = PRESETS["quick"].limits
    assert (p.limits.searches, p.limits.fetches) == (quick.searches, quick.fetches)  # the preset still bounds these
    assert (p.limits.model_calls, p.limits.cost_usd) == (0, 0.0)
    rr = load_run_file(tmp_path / "live", job.run_id)
    assert rr is not None and rr == job.result and rr.mode == "extractive" and rr.status == "complete"
    assert rr.models == {"lead": "none", "worker": "none"} and rr.usage.model_calls == 0 and rr.usage.cost_usd == 0
    assert [f.quote for f in rr.findings] == [QUOTE] and rr.budget.limits.cost_usd == 0.0
    assert reg.ledger.today() == 0.0 and reg.running() == 0


def test_with_a_model_key_every_mode_is_offered(tmp_path: Path, world: World) -> None:
    offer = registry(tmp_path, world).offer()
    assert offer.modes == ("fixed", "tools", "extractive") == tuple(MODES) and offer.note is None


def test_no_mode_is_offered_when_the_corpus_does_not_open(tmp_path: Path) -> None:
    reg = JobRegistry(runs_dir=tmp_path / "live", db=state_db(tmp_path), limits=LiveLimits(),
                      settings=lambda: Settings(search_provider="corpus", corpus_dir=str(tmp_path / "missing")))
    offer = reg.offer()
    assert offer.modes == () and offer.problem is not None and "RESEARCH_CORPUS_DIR" in offer.problem
    refused = reg.start(QUESTION, "extractive", "quick")
    assert isinstance(refused, Refused) and refused.reason == "config" and "RESEARCH_CORPUS_DIR" in refused.message


def test_extractive_runs_pass_the_spend_ceiling_reserve_nothing_and_work_with_live_search(tmp_path: Path,
                                                                                        world: World) -> None:
    reg = registry(tmp_path, world, daily_usd=0.30)
    held = reg.start(QUESTION, "fixed", "standard")  # holds all of today's dollars until it settles
    assert isinstance(held, Job)
    refused = reg.start(QUESTION, "fixed", "quick")
    assert isinstance(refused, Refused) and refused.reason == "spend" and "extractive" in refused.message
    job = reg.start(QUESTION, "extractive", "thorough")
    assert isinstance(job, Job) and job.limits.cost_usd == 0.0
    assert reg.ledger.today() == pytest.approx(0.30)  # nothing reserved for it
    finish(reg, job)
    finish(reg, held)
    rr = job.result
    assert rr is not None and rr.mode == "extractive" and [f.quote for f in rr.findings] == [QUOTE]
    assert rr.usage.cost_usd == 0.0 and rr.usage.model_calls == 0 and world.search.requests
    assert held.result is not None and reg.ledger.today() == pytest.approx(held.result.usage.cost_usd)


def test_a_running_extractive_run_counts_against_the_concurrency_limit(tmp_path: Path) -> None:
    gate = threading.Event()

    def held_research(*args: object, **kwargs: object) -> RunResult:
        assert gate.wait(30)
        return research(*args, **kwargs)  # type: ignore[arg-type]

    reg = no_key_registry(tmp_path, research_fn=held_research, max_concurrent=1)
    first = reg.start(QUESTION, "extractive", "quick")
    assert isinstance(first, Job)
    second = reg.start(QUESTION, "extractive", "quick")
    assert isinstance(second, Refused) and second.reason == "concurrency" and "limit is 1" in second.message
    gate.set()
    finish(reg, first)
    third = reg.start(QUESTION, "extractive", "quick")
    assert isinstance(third, Job)
    finish(reg, third)


def test_budget_presets_name_dollars_for_model_runs_and_searches_for_extractive_runs() -> None:
    assert preset_label("quick", "fixed") == PRESETS["quick"].label and "$0.25" in preset_label("quick", "tools")
    assert preset_label("quick", "extractive") == "Quick (8 searches, 10 fetches, $0)"


def held_registry(tmp_path: Path, gate: threading.Event, **kw: Any) -> JobRegistry:
    """A registry whose extractive runs wait at `gate` before they start researching."""
    def held_research(*args: object, **kwargs: object) -> RunResult:
        assert gate.wait(30)
        return research(*args, **kwargs)  # type: ignore[arg-type]

    corpus = qdrant_corpus(tmp_path / "corpus")
    return JobRegistry(runs_dir=tmp_path / "live", db=state_db(tmp_path), limits=LiveLimits(),
                       research_fn=held_research,
                       settings=lambda: Settings(search_provider="corpus", corpus_dir=str(corpus)), **kw)


def test_a_run_whose_own_beats_are_late_is_not_taken_for_dead_by_its_own_instance(tmp_path: Path) -> None:
    gate = threading.Event()
    reg = held_registry(tmp_path, gate, stale_after=0.3, beat_every=5.0)  # beats far apart: the row looks stale
    job = reg.start(QUESTION, "extractive", "quick")
    assert isinstance(job, Job)
    time.sleep(0.5)
    assert reg.interrupted() == [] and not job.lost and not job.cancel_requested
    gate.set()
    finish(reg, job)
    assert job.result is not None and job.result.status == "complete"


def test_an_instance_taken_for_dead_stops_its_run_and_leaves_it_to_the_others(tmp_path: Path) -> None:
    gate = threading.Event()
    slow = held_registry(tmp_path, gate, stale_after=0.3, beat_every=1.0, instance="slow-instance")
    other = held_registry(tmp_path, gate, stale_after=0.3, beat_every=1.0, instance="other-instance")
    job = slow.start(QUESTION, "extractive", "quick")
    assert isinstance(job, Job)
    time.sleep(0.5)  # the slow instance's next beat is not due yet: to the other one it looks dead
    assert [row.run_id for row in other.interrupted()] == [job.run_id]
    deadline = time.monotonic() + 5
    while not job.lost and time.monotonic() < deadline:  # its next beat finds the run is not its own any more
        time.sleep(0.05)
    assert job.lost and job.cancel_requested
    gate.set()
    finish(slow, job)
    row = other.live.get(job.run_id)
    assert row is not None and row.status == "interrupted"  # the lost instance wrote no end over the others' view
