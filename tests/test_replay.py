"""Replay: a recorded run re-run from the store with the fakes shut down gives the same RunResult (with either model
provider: each records in its own format); --live-model calls the model but takes searches and fetches from the
store; a call the recording lacks never reaches a network."""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli.main import main
from pipeline.config import Settings
from pipeline.core.budget import Budget
from pipeline.core.events import ListSink, NullSink
from pipeline.core.schema import BudgetLimits, RunOptions, RunResult
from pipeline.models.anthropic import LLM, LLMError
from pipeline.replay.recorded import RecordedModel, RecordedPages, RecordedSearch
from pipeline.replay.tape import Tape, TapeMode
from pipeline.research.orchestrator import build_context, research
from pipeline.store.sql import SqlRunStore
from pipeline.web.fetch import Fetcher, WebPages
from pipeline.web.search.service import SearchService, make_provider
from tests.fakes.anthropic_api import FakeAnthropic, reply_web_search
from tests.fakes.openai_api import FakeOpenAI, openai_env
from tests.fakes.research_brain import ResearchBrain
from tests.fakes.search_apis import FakeSearchApi, Hit
from tests.fakes.stores import open_test_store, store_url
from tests.fakes.web_server import WebServer
from tests.test_e2e import VECTOR_PAGES, page

KEY = "sk-ant-replay-test-key"
OPENAI_KEY = "sk-openai-replay-test-key"
TOPICS = ["Qdrant Cloud smallest cluster pricing", "Zilliz Cloud pricing for Milvus", "Pinecone Standard plan pricing"]
THREE_PARTS = {"premise_analysis": "fine", "sub_questions": [
    {"question": topic, "success_criterion": "stated", "proxy": None, "queries": [topic], "is_premise_check": False}
    for topic in TOPICS]}
PAGES = {**VECTOR_PAGES,
         "/pinecone": page("Pinecone pricing", "Pinecone Standard plan pricing is 50 dollars per month.",
                           "Qdrant Cloud pricing was compared with Pinecone at 70 dollars per month.")}


class Fakes:
    """The local model (of `provider`), search API and web server of one recording; `close()` shuts them all down."""

    def __init__(self, provider: str = "anthropic") -> None:
        self.provider = provider
        self.brain = ResearchBrain(latency=0.01)  # enough for parallel workers to interleave
        self._stack = ExitStack()
        self.web = self._stack.enter_context(WebServer())
        self.search = self._stack.enter_context(FakeSearchApi("brave", [], api_key="brave-key"))
        self.model: FakeAnthropic | FakeOpenAI = self._stack.enter_context(
            FakeOpenAI(self.brain, api_key=OPENAI_KEY) if provider == "openai" else FakeAnthropic(self.brain))
        hits = []
        for path, route in PAGES.items():
            self.web.route(path, route)
            hits.append(Hit(title=path.strip("/"), url=self.web.url(path), snippet="snippet", published=None))
        self.search.hits[:] = hits

    def model_env(self) -> dict[str, str]:
        """The environment that reaches this model (a --live-model replay's, and the recording's settings)."""
        if self.provider == "openai":
            return openai_env(self.model.base_url, OPENAI_KEY)
        return {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": self.model.base_url}

    def settings(self, db: str | Path) -> Settings:
        return Settings.model_validate({**self.model_env(), "search_provider": "brave", "brave_api_key": "brave-key",
                                        "search_base_url": self.search.base_url,
                                        "fetch_allow_raw": self.web.host_port, "model_max_retries": 0,
                                        "model_timeout": 10, "db_path": str(db)})

    def record(self, store: SqlRunStore, question: str, mode: str, **options: Any) -> RunResult:
        settings = self.settings(store_url(store))
        provider = make_provider(settings, sleep=lambda _s: None)
        return research(question, settings, options=RunOptions(mode=mode, **options), store=store,
                        context=lambda s, o, e, **kw: build_context(s, o, e, provider=provider, **kw))

    def close(self) -> None:
        self._stack.close()


def record_with_anthropic_search(db: str | Path) -> tuple[RunResult, FakeAnthropic]:
    """One tools-mode run recorded in `db` (a RESEARCH_DB value) whose searches are Anthropic's server-side web search
    (model calls); its result and the fake model, shut down but still holding the requests it received."""
    with WebServer({"/qdrant": VECTOR_PAGES["/qdrant"]}) as web, FakeAnthropic(ResearchBrain()) as model:
        hit = {"url": web.url("/qdrant"), "title": "Qdrant pricing", "snippet": "Qdrant Cloud pricing starts at 25."}
        model.rule(lambda r: r.has_tool("web_search") and not r.has_tool("record_finding"),
                   lambda r: reply_web_search("q", [hit]))
        settings = Settings(anthropic_api_key=KEY, anthropic_base_url=model.base_url, search_provider="anthropic",
                            fetch_allow_raw=web.host_port, model_max_retries=0, db_path=str(db))
        with open_test_store(str(db)) as store:
            result = research("What does Qdrant Cloud pricing start at?", settings, options=RunOptions(mode="tools"),
                              store=store)
    return result, model


@pytest.fixture()
def fakes() -> Iterator[Fakes]:
    f = Fakes()
    yield f
    f.close()


@pytest.fixture(params=["anthropic", "openai"])
def any_fakes(request: pytest.FixtureRequest) -> Iterator[Fakes]:
    """The fakes of either model provider."""
    f = Fakes(request.param)
    yield f
    f.close()


def _same(a: RunResult, b: RunResult) -> dict[str, Any]:
    """The fields that differ between two RunResults, ignoring the run id and the timings."""
    da, db = a.model_dump(exclude={"run_id", "timings"}), b.model_dump(exclude={"run_id", "timings"})
    return {k: (da[k], db[k]) for k in da if da[k] != db[k]}


def _replay(db: str, run_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> RunResult:
    monkeypatch.setenv("RESEARCH_DB", db)
    out = tmp_path / f"replay-{run_id}.json"
    assert main(["replay", run_id, "--json", str(out), "--quiet", *extra]) == 0
    return RunResult.model_validate_json(out.read_text())


@pytest.mark.parametrize("mode", ["fixed", "tools"])
def test_replay_with_the_fakes_shut_down_gives_the_same_result(any_fakes: Fakes, tmp_path: Path, mode: str,
                                                               db_url: str, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    fakes = any_fakes
    monkeypatch.delenv("RESEARCH_MODEL_PROVIDER", raising=False)  # the recording says which provider it used
    fakes.brain.plans["three parts"] = THREE_PARTS
    with open_test_store(db_url) as store:
        original = fakes.record(store, "Qdrant Cloud pricing in three parts", mode)
    assert original.status == "complete" and len(original.sources) >= 2
    assert len({f.sub_question for f in original.findings}) >= 2  # in tools mode: from parallel workers
    assert original.models.get("provider", "anthropic") == fakes.provider
    fakes.close()  # no model, no search API, no web from here on

    replayed = _replay(db_url, original.run_id, tmp_path, monkeypatch)

    assert replayed.run_id != original.run_id
    assert _same(original, replayed) == {}
    assert replayed.report.markdown == original.report.markdown
    assert replayed.findings == original.findings and replayed.usage == original.usage
    assert "matches the recorded result" in capsys.readouterr().err
    with open_test_store(db_url) as store:
        row = store.run(replayed.run_id)
        assert row is not None and row.replay_of == original.run_id and row.status == "complete"
        assert store.result(replayed.run_id) == replayed
        # Every call was served: nothing was missing from the recording.
        assert not [e for e in store.events(replayed.run_id) if e.payload.get("not_recorded")]
        assert not [e for e in store.events(replayed.run_id, ["model_error"]) if e.payload["kind"] == "not_recorded"]
        # Served responses are reported as the live ones were, stop reason included (each provider its own word).
        stops = {run: sorted((e.payload["purpose"], e.payload.get("stop_reason") or "")
                             for e in store.events(run, ["model_response"]))
                 for run in (original.run_id, replayed.run_id)}
        assert stops[replayed.run_id] == stops[original.run_id] and all(s for _, s in stops[original.run_id])
        # A replay is itself a complete recording: replaying the replay gives the same result again.
    again = _replay(db_url, replayed.run_id, tmp_path, monkeypatch)
    assert _same(original, again) == {}


def test_live_model_replay_calls_the_model_but_takes_the_evidence_from_the_store(
        any_fakes: Fakes, tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fakes = any_fakes
    with open_test_store(db_url) as store:
        original = fakes.record(store, "What does Qdrant Cloud pricing start at?", "tools")
    searches, pages, calls = len(fakes.search.requests), len(fakes.web.requests), len(fakes.model.requests)
    assert original.findings and searches and pages

    for name, value in fakes.model_env().items():
        monkeypatch.setenv(name, value)
    replayed = _replay(db_url, original.run_id, tmp_path, monkeypatch, "--live-model")

    assert len(fakes.model.requests) - calls == replayed.usage.model_calls > 0  # the model was called for real
    assert len(fakes.search.requests) == searches and len(fakes.web.requests) == pages  # the evidence was not
    assert [(f.source, f.quote) for f in replayed.findings] == [(f.source, f.quote) for f in original.findings]
    assert replayed.usage.searches == original.usage.searches and replayed.usage.fetches == original.usage.fetches


def test_a_call_the_recording_lacks_fails_without_any_network(tmp_path: Path) -> None:
    tape = Tape([], TapeMode.REPLAY, run_id="r1")
    settings = Settings(search_provider="brave", brave_api_key="k", search_base_url="http://127.0.0.1:9",
                        fetch_allow_raw="127.0.0.1:9", fetch_ports_raw="9")
    budget = Budget(BudgetLimits(), settings.price)
    sink = ListSink()
    llm = LLM(settings, budget, sink, transport=RecordedModel(tape, budget, sink))  # no key: nothing can be sent
    with pytest.raises(LLMError) as err:
        llm.call(model=settings.lead_model, system="s", messages=[{"role": "user", "content": "hi"}],
                 max_tokens=100, purpose="planner:0")
    assert err.value.kind == "not_recorded" and "--live-model" in err.value.message
    assert sink.of("model_request") == []
    pages = RecordedPages(tape, WebPages(settings, budget=budget), budget)
    page_ = Fetcher(settings, events=sink, loader=pages).fetch("http://127.0.0.1:9/page")
    assert not page_.ok and page_.error_kind == "network" and "recording" in (page_.error or "")
    live = SearchService(make_provider(settings, sleep=lambda _s: None), budget, sink)
    outcome = RecordedSearch(tape, live, budget, sink).search("x y")
    assert not outcome.results and "recording has no search" in (outcome.message or "")
    assert budget.used().fetches == 0 and budget.used().searches == 0 and budget.used().model_calls == 0


def test_an_anthropic_search_the_recording_lacks_is_a_message_not_a_crash() -> None:
    from pipeline.store.sql import StoredEvent

    recorded = StoredEvent(seq=1, kind="search", payload={"query": "recorded query", "provider": "anthropic",
                                                          "n": 10, "results": []})
    tape = Tape([recorded], TapeMode.REPLAY, run_id="r1")
    sink = ListSink()
    ctx = build_context(Settings(search_provider="brave"), RunOptions(), sink, tape=tape)
    assert ctx.search.search("another query").results == []  # the server-side search is a model call: not recorded
    (event,) = sink.of("search")
    assert event.payload["provider"] == "anthropic" and event.payload["message"].startswith("SEARCH_FAILED")
    assert sink.of("model_request") == []


@pytest.mark.parametrize("first", ["https://x.example/a", "http://x.example/a"])
def test_a_page_reached_by_redirect_is_served_by_its_final_url_too_and_charged_once(first: str) -> None:
    """The original run fetched http://x.example/a (redirected to https); a worker asking for the https URL was
    answered from the Fetcher's cache. In a replay that worker may come first."""
    from pipeline.core.schema import FetchResult
    from pipeline.store.sql import StoredEvent

    page_ = FetchResult(ok=True, url="http://x.example/a", final_url="https://x.example/a", status=200,
                        content_type="text/html", title="A", text="Qdrant Cloud pricing starts at 25 dollars.")
    recorded = [StoredEvent(seq=1, kind="fetch", payload={**page_.model_dump(), "cached": False, "charged": True})]
    assert Tape(recorded, TapeMode.REPLAY).fetch("https://x.example/a") is not None
    settings = Settings(fetch_allow_raw="127.0.0.1:9", fetch_ports_raw="9")
    budget = Budget(BudgetLimits(), settings.price)
    pages = RecordedPages(Tape(recorded, TapeMode.REPLAY), WebPages(settings, budget=budget), budget)
    fetcher = Fetcher(settings, events=ListSink(), loader=pages)
    second = "http://x.example/a" if first.startswith("https") else "https://x.example/a"
    for url in (first, second):
        got = fetcher.fetch(url)
        assert got.ok and got.url == url and got.text == page_.text
    assert budget.used().fetches == 1


def test_served_outcomes_are_charged_as_recorded(fakes: Fakes, db_url: str) -> None:
    with open_test_store(db_url) as store:
        original = fakes.record(store, "What does Qdrant Cloud pricing start at?", "fixed")
        tape = Tape.from_store(store, original.run_id, TapeMode.REPLAY)
        row = store.run(original.run_id)
    fakes.close()
    sink = ListSink()
    assert row is not None and row.run_options.batch_calls  # replayed with the choices it was recorded with
    replayed = research(original.question, Settings(search_provider="brave", lead_model=original.models["lead"]),
                        options=row.run_options, events=sink, tape=tape)
    assert replayed.budget == original.budget
    assert tape.summary()["missed"] == 0 and tape.summary()["diverged"] == []
    served = [e for e in sink.of("model_response") if e.payload.get("replayed")]
    assert len(served) == original.usage.model_calls
    assert sum(e.payload["cost_usd"] for e in served) == pytest.approx(original.usage.cost_usd)


def test_export_writes_the_run_result_and_runs_lists_it(fakes: Fakes, tmp_path: Path, db_url: str,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    with open_test_store(db_url) as store:
        original = fakes.record(store, "What does Qdrant Cloud pricing start at?", "fixed")
    monkeypatch.setenv("RESEARCH_DB", db_url)
    out = tmp_path / "exported" / "run.json"
    assert main(["export", original.run_id, str(out)]) == 0
    assert RunResult.model_validate_json(out.read_text()) == original
    capsys.readouterr()
    assert main(["runs", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed == [{"id": original.run_id, "date": listed[0]["date"], "question": original.question,
                       "mode": "fixed", "status": original.status, "cost": original.usage.cost_usd}]
    assert main(["runs"]) == 0
    assert original.run_id in capsys.readouterr().out
    assert main(["export", "no-such-run", str(out)]) == 2
    assert "python -m pipeline runs" in capsys.readouterr().err


def test_replay_of_a_run_searching_through_anthropic_charges_its_search_calls(tmp_path: Path, db_url: str,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Anthropic's server-side search is a model call: a replay serves it as one, so its tokens count again."""
    original, model = record_with_anthropic_search(db_url)
    searches = sum(r.has_tool("web_search") and not r.has_tool("record_finding") for r in model.message_requests)
    assert original.status == "complete" and original.findings and searches >= 1

    replayed = _replay(db_url, original.run_id, tmp_path, monkeypatch)
    assert _same(original, replayed) == {}
    assert replayed.usage.model_calls == original.usage.model_calls == len(model.requests)


def test_a_request_that_changed_since_the_recording_is_reported_but_a_new_page_nonce_is_not() -> None:
    from pipeline.core.untrusted import wrap
    from pipeline.store.sql import StoredEvent

    settings = Settings()
    page_text = wrap("Qdrant Cloud pricing starts at 25 dollars.", source_id="S1")  # a fresh random nonce each time

    def body(text: str) -> dict[str, Any]:
        return {"model": settings.lead_model, "max_tokens": 50, "messages": [{"role": "user", "content": text}]}

    response = {"type": "message", "role": "assistant", "model": settings.lead_model, "stop_reason": "end_turn",
                "content": [{"type": "text", "text": "ok"}], "usage": {"input_tokens": 10, "output_tokens": 2}}
    events = []
    for i, purpose in enumerate(["same", "changed"]):
        request = {"purpose": purpose, "body": body(page_text)}
        answer = {"purpose": purpose, "model": settings.lead_model, "response": response,
                  "usage": {"input_tokens": 10, "output_tokens": 2}}
        events += [StoredEvent(seq=2 * i + 1, kind="model_request", payload=request),
                   StoredEvent(seq=2 * i + 2, kind="model_response", payload=answer)]
    tape = Tape(events, TapeMode.REPLAY)
    budget = Budget(BudgetLimits(), settings.price)
    llm = LLM(settings, budget, transport=RecordedModel(tape, budget, NullSink()))
    fresh = wrap("Qdrant Cloud pricing starts at 25 dollars.", source_id="S1")
    assert fresh != page_text
    for purpose, text in [("same", fresh), ("changed", fresh + " Answer in French.")]:
        reply = llm.call(model=settings.lead_model, system="", messages=[{"role": "user", "content": text}],
                         max_tokens=50, purpose=purpose)
        assert reply.text == "ok" and reply.usage.input_tokens == 10
    assert tape.summary()["diverged"] == ["changed"] and tape.summary()["served"] == 2


def test_the_request_digest_ignores_the_granted_output_limit_under_either_field_name() -> None:
    from pipeline.replay.tape import request_digest

    for field in ("max_tokens", "max_completion_tokens"):  # Anthropic's, and OpenAI's own API's
        asked = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        assert request_digest({**asked, field: 100}) == request_digest({**asked, field: 60})
        assert request_digest({**asked, field: 100}) != request_digest({**asked, "model": "n", field: 100})
