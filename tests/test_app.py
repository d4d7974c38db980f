"""The Streamlit app through AppTest: every page, the access-code gate, live runs against the local fakes, and
extractive runs (no model) on a server with no model key."""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import lxml.html
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from pipeline.bench.saved import SUMMARY, BenchSummary
from pipeline.bench.summary import grade_suite
from pipeline.core.event_types import FetchEvent, ModelResponseEvent, SearchEvent, StepEvent
from pipeline.core.schema import Finding, Plan, Problem, Report, RunOptions, RunResult, Source, SubQuestion, Usage
from pipeline.store import migrated_database
from pipeline.store.files import save_run_file
from pipeline.store.sql import SqliteRunStore, SqlRunStore
from pipeline.store.timeline import load_timeline
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.corpora import qdrant_corpus
from tests.fakes.postgres_server import PASSWORD, postgres_server
from tests.fakes.research_brain import ResearchBrain
from tests.fakes.search_apis import FakeSearchApi, Hit
from tests.fakes.secret_manager import FakeSecretManager
from tests.fakes.web_server import Route, WebServer
from tests.test_scoreboard import LEAD, MISSING, QUESTIONS, WORKER, saved_suite
from ui.config import AppConfig
from ui.jobs import MODES, PRESETS
from ui.ledger import SpendLedger
from ui.library import (
    RunLibrary,
    is_extractive,
    load_saved_runs,
    mode_label,
    models_label,
    report_path,
    run_header,
    summarise,
)
from ui.live_runs import LiveRunTable
from ui.progress import ProgressSink

ROOT = Path(__file__).resolve().parents[1]
APP_VARS = ["RESEARCH_BENCHMARK_DIR", "ACCESS_CODE", "ACCESS_CODE_SECRET", "ACCESS_CODE_FILE",
            "RESEARCH_SECRET_MANAGER_URL", "RESEARCH_ACCESS_CODE_TTL", "RESEARCH_ACCESS_MAX_ATTEMPTS",
            "RESEARCH_ACCESS_GLOBAL_ATTEMPTS", "RESEARCH_ACCESS_WINDOW_SECONDS", "RESEARCH_TRUSTED_PROXIES",
            "RESEARCH_LIVE_MAX_CONCURRENT", "RESEARCH_LIVE_DAILY_USD", "RESEARCH_LIVE_MAX_RUN_USD"]
QUOTE = "Qdrant Cloud pricing starts at 25 dollars per month for the smallest cluster."
QUESTION = "What does Qdrant Cloud pricing start at?"
CODE = "open-sesame-42"
NO_KEY_SENTENCE = ("No model key is configured on this server, so only the extractive mode — no model, sentences "
                   "selected by code — can run")


def make_run(run_id: str, *, mode: str = "fixed", cost: float = 0.01, problems: int = 0,
             answered: bool = True, lead: str = "claude-sonnet-5-5") -> RunResult:
    src = Source(id="S1", url="https://qdrant.example/pricing", final_url="https://qdrant.example/pricing",
                 title="Qdrant pricing", published="2025-01-15", fetched_at=f"2025-02-0{1 + len(run_id) % 8}T10:00:00",
                 sha256="0" * 64, chars=300)
    findings = [Finding(id="F1", sub_question="Q1", source="S1", claim="It starts at 25 dollars.", quote=QUOTE,
                        start=0, end=len(QUOTE), support="supported", confidence="high")] if answered else []
    return RunResult(
        run_id=run_id, question=f"Question {run_id}: what does Qdrant cost?", mode=mode, status="partial"
        if problems else "complete", models={"lead": lead, "worker": "claude-haiku-5-5"},
        plan=Plan(sub_questions=[SubQuestion(id="Q1", question="Price?"), SubQuestion(id="Q2", question="Tiers?")]),
        sources=[src], findings=findings,
        report=Report(markdown=f"# Qdrant pricing {run_id}\n\n_Machine-assisted research report._\n\n"
                               "Qdrant Cloud starts at 25 dollars per month [F1]. Tiers are not known [G1].\n",
                      gaps=["Tiers?"]),
        problems=[Problem(kind="uncited", message=f"problem {i}") for i in range(problems)],
        usage=Usage(cost_usd=cost, model_calls=3), timings={"plan": 1.0, "research": 2.0})


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in APP_VARS:
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "bench").mkdir()
    monkeypatch.setenv("RESEARCH_BENCHMARK_DIR", str(tmp_path / "bench"))
    monkeypatch.setenv("RESEARCH_DB", str(tmp_path / "state" / "research.sqlite"))
    return tmp_path


def app() -> AppTest:
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)


def page(name: str, **query: str) -> AppTest:
    at = app().run()
    if name != "benchmarks":
        at.switch_page(f"ui/pages/{name}.py")
    at.query_params.update(query)
    return at.run()


def texts(at: AppTest, kind: str) -> str:
    return " ".join(str(e.value).replace("\\", "") for e in getattr(at, kind))


# -- saved runs -------------------------------------------------------------------------------------------------------

def test_library_reads_suites_reports_bad_files_and_rereads_only_changed_files(tmp_path: Path) -> None:
    (tmp_path / "smoke").mkdir()
    save_run_file(tmp_path / "smoke", make_run("r1", mode="tools", problems=1))
    save_run_file(tmp_path, make_run("r2", answered=False))
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "other.json").write_text('{"hello": 1}')
    lib = RunLibrary(tmp_path)
    rows, errors = lib.refresh()
    by_id = {r.run_id: r for r in rows}
    assert set(by_id) == {"r1", "r2"} and sorted(n for n, _ in errors) == ["broken.json", "other.json"]
    r1 = by_id["r1"]
    assert (r1.suite, r1.mode, r1.findings, r1.answered, r1.planned, r1.problems, r1.seconds) == \
        ("smoke", "tools", 1, 1, 2, 1, 3.0)
    assert r1.models == "claude-sonnet-5-5 / claude-haiku-5-5" and by_id["r2"].suite == "default"
    assert by_id["r2"].answered == 0
    save_run_file(tmp_path / "smoke", make_run("r1", mode="tools", cost=0.5))
    assert {r.run_id: r.cost_usd for r in lib.refresh()[0]}["r1"] == 0.5  # a changed file is read again
    (tmp_path / "r2.json").unlink()
    assert [r.run_id for r in lib.refresh()[0]] == ["r1"] and lib.load("r2") is None
    assert lib.load("r1") == make_run("r1", mode="tools", cost=0.5)
    assert load_saved_runs(tmp_path / "missing") == ([], [])


def test_timeline_falls_back_to_step_times(tmp_path: Path) -> None:
    rr = make_run("r1")
    timeline = load_timeline(rr, tmp_path)
    assert timeline.origin == "timings" and [(e.step, e.ms) for e in timeline.entries] == [("plan", 1000.0),
                                                                                           ("research", 2000.0)]


# -- public pages -----------------------------------------------------------------------------------------------------

def test_benchmarks_empty_state_says_how_to_produce_runs(env: Path) -> None:
    at = page("benchmarks")
    assert not at.exception
    assert "python -m pipeline run" in texts(at, "info")


def test_benchmarks_table_filters_and_mode_comparison(env: Path) -> None:
    (env / "bench" / "smoke").mkdir()
    save_run_file(env / "bench" / "smoke", make_run("f1", mode="fixed", cost=0.02))
    save_run_file(env / "bench" / "smoke", make_run("t1", mode="tools", cost=0.06, answered=False))
    save_run_file(env / "bench", make_run("t2", mode="tools", cost=0.10, lead="claude-opus-5-5"))
    (env / "bench" / "junk.json").write_text("[]")
    at = page("benchmarks")
    assert not at.exception
    table = at.dataframe[0].value
    assert sorted(table.run_id if "run_id" in table else table.report) == \
        ["/report?run=f1", "/report?run=t1", "/report?run=t2"]
    assert {"question", "suite", "mode", "models", "date", "status", "findings", "rejected", "covered", "problems",
            "cost_usd", "seconds"} <= set(table.columns)
    assert sorted(table.covered) == ["0 / 2", "1 / 2", "1 / 2"]
    assert "junk.json was skipped" in texts(at, "warning")
    means = at.dataframe[1].value.set_index("mode")
    assert means.loc["tools", "runs"] == 2 and means.loc["tools", "cost_usd"] == pytest.approx(0.08)
    assert means.loc["tools", "coverage"] == pytest.approx(0.25) and means.loc["fixed", "coverage"] == 0.5
    [chart] = at.get("vega_lite_chart")  # the three measures, a panel each
    assert [panel["encoding"]["x"]["field"] for panel in json.loads(chart.proto.spec)["hconcat"]] == [
        "cost_usd", "coverage", "seconds"]
    at.multiselect[1].set_value(["tools"]).run()
    assert sorted(at.dataframe[0].value.report) == ["/report?run=t1", "/report?run=t2"]
    at.multiselect[2].set_value(["claude-opus-5-5 / claude-haiku-5-5"]).run()
    assert list(at.dataframe[0].value.report) == ["/report?run=t2"]
    at.multiselect[0].set_value(["smoke"]).run()
    assert at.dataframe[0].value.empty and "No runs match" in texts(at, "markdown")


def test_report_opens_from_its_link_with_citations_checks_and_downloads(env: Path) -> None:
    save_run_file(env / "bench", make_run("r1", problems=2))
    at = page("report", run="r1")
    assert not at.exception
    assert "Qdrant pricing r1" in texts(at, "title")
    body = at.html[0].value
    assert 'data-cite="F1"' in body and QUOTE in body and "#:~:text=Qdrant%20Cloud" in body
    assert "2 problems remain" in texts(at, "warning") and "Machine-assisted" in texts(at, "info")
    assert "problem 1" in at.html[1].value and "Tiers?" in at.html[1].value
    assert len(at.get("download_button")) == 2
    assert at.text_input(key="report-link").value.endswith("/report?run=r1")


def test_report_with_unknown_or_hostile_id_says_so(env: Path) -> None:
    save_run_file(env / "bench", make_run("r1"))
    at = page("report", run="../../etc/passwd")
    assert not at.exception and "No saved run has the id" in texts(at, "error")
    assert at.selectbox[0].options == ["Question r1: what does Qdrant cost? (fixed, 2025-02-03 10:00:00)"]
    at.selectbox[0].set_value("r1").run()
    assert at.query_params["run"] == "r1" and "Qdrant pricing r1" in texts(at, "title")


def record(db: Path, rr: RunResult) -> None:
    """`rr` and a few calls in the run store, as `python -m pipeline run` records them."""
    with SqliteRunStore(db) as store:
        rec = store.recorder(rr.run_id)
        rec.start(question=rr.question, options=RunOptions(), models=rr.models, prompt_version="p1")
        rec.emit(StepEvent(name="plan", status="started"))
        rec.emit(ModelResponseEvent(purpose="planner:0", response={}, cost_usd=0.0123), tokens=321, ms=40.0)
        rec.emit(StepEvent(name="research", status="started"))
        rec.emit(SearchEvent(query="qdrant pricing", count=3, message=None), ms=12.0)
        rec.emit(FetchEvent(url="https://qdrant.example/pricing", ok=True), ms=30.0)
        rec.finish(rr)


def assert_store_timeline(at: AppTest) -> None:
    calls = at.dataframe[-1].value
    assert list(calls.kind) == ["model", "search", "fetch"] and list(calls.step) == ["plan", "research", "research"]
    assert calls.tokens.sum() == 321 and calls.cost_usd.sum() == pytest.approx(0.0123)


def test_report_opens_a_run_that_only_the_run_store_holds_with_its_timeline(env: Path) -> None:
    record(env / "state" / "research.sqlite", make_run("cli01"))
    at = page("report", run="cli01")
    assert not at.exception and QUOTE in at.html[0].value
    assert_store_timeline(at)


def test_a_benchmark_file_gets_its_timeline_from_the_run_store(env: Path) -> None:
    rr = make_run("cli02")
    record(env / "state" / "research.sqlite", rr)
    save_run_file(env / "bench", rr)  # `run --json benchmark_runs/...`: the file, with the call log in the store
    at = page("report", run="cli02")
    assert not at.exception and QUOTE in at.html[0].value
    assert_store_timeline(at)


def test_every_listed_run_opens_and_a_run_id_no_link_can_open_is_skipped(env: Path) -> None:
    save_run_file(env / "bench", make_run("ok.1_a-b"))
    (env / "bench" / "spaced.json").write_text(make_run("a b&c=d").model_dump_json())
    at = page("benchmarks")
    assert not at.exception
    assert "spaced.json was skipped: its run id 'a b&c=d' is not a plain id" in texts(at, "warning")
    links = list(at.dataframe[0].value.report)
    assert links == ["/report?run=ok.1_a-b"]
    for link in links:
        opened = page("report", run=parse_qs(urlsplit(link).query)["run"][0])
        assert not opened.exception and not opened.error and QUOTE in opened.html[0].value
    assert report_path("a b&c=d/é") == "/report?run=a%20b%26c%3Dd%2F%C3%A9"


@pytest.mark.parametrize("name,value", [("RESEARCH_LIVE_MAX_CONCURRENT", "sk-not-a-number"),
                                        ("RESEARCH_FETCH_DEADLINE", "sk-not-a-number")])
@pytest.mark.parametrize("name_of_page", ["benchmarks", "report", "live"])
def test_an_invalid_setting_shows_one_clear_error_on_every_page(env: Path, monkeypatch: pytest.MonkeyPatch,
                                                               name_of_page: str, name: str, value: str) -> None:
    save_run_file(env / "bench", make_run("r1"))
    monkeypatch.setenv("ACCESS_CODE", CODE)
    monkeypatch.setenv(name, value)
    at = page(name_of_page, run="r1")
    assert not at.exception and len(at.error) == 1
    message = texts(at, "error")
    assert name in message and "settings are invalid" in message and value not in message
    assert not at.dataframe and not at.html and not at.text_input


def test_about_page(env: Path) -> None:
    at = page("about")
    assert not at.exception and "What they do not prove" in texts(at, "markdown")


# -- the gate ---------------------------------------------------------------------------------------------------------

def test_live_page_is_off_without_a_code(env: Path) -> None:
    at = page("live")
    assert not at.exception
    assert "Live runs are off" in texts(at, "warning") and not at.text_input


def unlock(at: AppTest, code: str) -> AppTest:
    at.text_input(key="access_code").input(code)
    return at.button[0].click().run()


def test_wrong_codes_lock_the_visitor_out_until_the_window_passes(env: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCESS_CODE", "open-sésame-42")
    monkeypatch.setenv("RESEARCH_ACCESS_WINDOW_SECONDS", "3")
    at = page("live")
    for code in ("wrong", "open-sesame-42", "ÖPEN", "🔑", "open-sésame-42!"):
        unlock(at, code)
        assert "That code is not right" in texts(at, "error") and "live_unlocked" not in at.session_state
    unlock(at, "open-sésame-42")
    assert "Too many wrong codes" in texts(at, "error") and "live_unlocked" not in at.session_state
    reloaded = page("live")  # a reload is a new session: the count is kept on the server
    unlock(reloaded, "open-sésame-42")
    assert "Too many wrong codes" in texts(reloaded, "error")
    time.sleep(3.2)  # the window counts from the last wrong code, however slowly the page ran before it
    unlock(reloaded, "open-sésame-42")
    assert not reloaded.exception and reloaded.session_state["live_unlocked"] is True
    assert not reloaded.text_input and not reloaded.query_params  # the form is gone; nothing in the URL


def test_the_right_code_unlocks_this_session_only(live: ResearchBrain) -> None:
    at = unlock(page("live"), CODE)
    assert not at.exception and at.session_state["live_unlocked"] is True
    assert at.radio(key="mode").options == [MODES["fixed"], MODES["tools"], MODES["extractive"]]
    assert at.radio(key="mode").value == "fixed" and NO_KEY_SENTENCE not in texts(at, "info")
    assert "access_code" not in str(dict(at.query_params)) and not at.query_params
    assert page("live").text_input(key="access_code") is not None  # another session is still locked


def test_secret_manager_code_unlocks_and_a_missing_secret_keeps_runs_off(env: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    name = "projects/demo/secrets/access/versions/latest"
    with FakeSecretManager({name: b"from-secret-manager\n"}) as sm:
        monkeypatch.setenv("RESEARCH_SECRET_MANAGER_URL", sm.base_url)
        monkeypatch.setenv("ACCESS_CODE", "local-code-42")
        monkeypatch.setenv("ACCESS_CODE_SECRET", name)
        at = unlock(page("live"), "local-code-42")
        assert "That code is not right" in texts(at, "error")
        at = unlock(at, "from-secret-manager")
        assert at.session_state["live_unlocked"] is True
        assert len(sm.requests) == 1  # cached across reruns and sessions
        monkeypatch.setenv("ACCESS_CODE_SECRET", "projects/demo/secrets/gone/versions/latest")
        at = page("live")
        assert "Live runs are off" in texts(at, "warning") and "not found" in texts(at, "warning")
        assert not at.text_input


def test_a_mounted_code_file_comes_first_and_a_missing_one_keeps_runs_off(env: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    mounted = env / "secrets" / "access-code"
    mounted.parent.mkdir()
    mounted.write_text("from-the-mounted-secret\n", encoding="utf-8")
    monkeypatch.setenv("ACCESS_CODE", "local-code-42")
    monkeypatch.setenv("ACCESS_CODE_SECRET", "projects/demo/secrets/unused/versions/latest")
    monkeypatch.setenv("ACCESS_CODE_FILE", str(mounted))
    at = unlock(page("live"), "local-code-42")
    assert "That code is not right" in texts(at, "error")
    at = unlock(at, "from-the-mounted-secret")
    assert at.session_state["live_unlocked"] is True
    monkeypatch.setenv("ACCESS_CODE_FILE", str(env / "secrets" / "not-mounted"))
    at = page("live")
    assert "Live runs are off" in texts(at, "warning") and "ACCESS_CODE_FILE" in texts(at, "warning")
    assert not at.text_input and str(env) not in texts(at, "warning")


def test_an_unreachable_database_is_named_and_the_saved_runs_stay_readable(env: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    save_run_file(env / "bench" / "suite", make_run("saved1"))
    monkeypatch.setenv("ACCESS_CODE", CODE)
    monkeypatch.setenv("RESEARCH_DB", f"postgresql://verbatim:{PASSWORD}@127.0.0.1:9/verbatim")
    masked = "RESEARCH_DB (postgresql://verbatim:***@127.0.0.1:9/verbatim)"
    at = unlock(page("live"), CODE)
    shown = texts(at, "error").replace("\u200b", "")  # md_text breaks links with zero-width spaces
    assert not at.exception and "Live runs are unavailable" in shown and masked in shown
    report = page("report", run="abcdef123456")
    shown = texts(report, "error").replace("\u200b", "")
    assert not report.exception and "run store cannot be read" in shown and masked in shown
    saved = page("report", run="saved1")  # a saved run's file needs no database
    assert not saved.exception and not saved.error
    for page_shown in (at, report, saved):
        assert PASSWORD not in str(page_shown)


def test_a_database_that_goes_away_during_a_session_is_one_clear_message(env: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    with postgres_server() as server, server.database() as url:
        monkeypatch.setenv("ACCESS_CODE", CODE)
        monkeypatch.setenv("RESEARCH_DB", url)
        at = unlock(page("live"), CODE)
        assert not at.exception and at.session_state["live_unlocked"] is True and at.radio(key="mode")
        server.stop()  # the session is unlocked and the page was built; then the database goes away
        try:
            at.run()
        finally:
            server.start()
        shown = texts(at, "error").replace("\u200b", "")
        assert not at.exception and "Live runs are unavailable" in shown and "RESEARCH_DB (postgresql://" in shown
        assert PASSWORD not in str(at)


def test_a_short_access_code_keeps_live_runs_off(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCESS_CODE", "open-sesame")  # 11 characters
    at = page("live")
    assert not at.exception and not at.text_input
    assert "Live runs are off" in texts(at, "warning") and "ACCESS_CODE" in texts(at, "warning")
    assert "12 characters" in texts(at, "warning") and "open-sesame" not in texts(at, "warning")


def test_without_a_proxy_the_forwarded_header_is_not_trusted(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("K_SERVICE", raising=False)
    assert AppConfig().trusted_proxies == 0
    monkeypatch.setenv("K_SERVICE", "verbatim")  # Cloud Run sets it, and its front end appends one hop
    assert AppConfig().trusted_proxies == 1
    monkeypatch.setenv("RESEARCH_TRUSTED_PROXIES", "2")
    assert AppConfig().trusted_proxies == 2


# -- live runs against the fakes ---------------------------------------------------------------------------------------

@pytest.fixture()
def live(env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ResearchBrain]:
    brain = ResearchBrain()
    with ExitStack() as stack:
        web = stack.enter_context(WebServer({"/qdrant": Route.html(
            "<html><head><title>Qdrant pricing</title></head><body><article><h1>Qdrant pricing</h1>"
            f"<p>{QUOTE}</p></article></body></html>")}))
        search = stack.enter_context(FakeSearchApi("brave", [Hit(title="Qdrant", url=web.url("/qdrant"),
                                                                 snippet="pricing", published=None)],
                                                   api_key="brave-key"))
        fake = stack.enter_context(FakeAnthropic(brain))
        for k, v in {"ACCESS_CODE": CODE, "ANTHROPIC_API_KEY": "sk-ant-app-test",
                     "ANTHROPIC_BASE_URL": fake.base_url, "RESEARCH_SEARCH_PROVIDER": "brave",
                     "BRAVE_API_KEY": "brave-key", "RESEARCH_SEARCH_BASE_URL": search.base_url,
                     "RESEARCH_FETCH_ALLOW": web.host_port}.items():
            monkeypatch.setenv(k, v)
        yield brain


def ask(at: AppTest, question: str = QUESTION, mode: str = "fixed") -> AppTest:
    at.text_area(key="question").input(question)
    at.radio(key="mode").set_value(mode)
    return at.button[0].click().run()


def wait_done(at: AppTest, timeout: float = 60) -> AppTest:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if at.success or (at.error and "run" in at.query_params):
            return at
        time.sleep(0.3)
        at.run()
    raise AssertionError("the live run did not finish in time")


def test_an_interrupted_run_is_listed_its_spend_released_and_resumed(live: ResearchBrain, env: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCH_HEARTBEAT_STALE", "1")
    db = migrated_database(str(env / "state" / "research.sqlite"))
    limits = PRESETS["quick"].limits
    store = SqlRunStore(db, owns_db=False)
    rec = store.recorder("dead0run0001")  # a run whose instance died before any step finished
    rec.start(question=QUESTION, options=RunOptions(mode="fixed", limits=limits),
              models={"lead": "claude-sonnet-5-5", "worker": "claude-haiku-5-5"}, prompt_version="v")
    rec.stop()
    long_ago = time.time() - 30
    db.execute("UPDATE runs SET host = 'gone-host', heartbeat = ? WHERE id = 'dead0run0001'", (long_ago,))
    LiveRunTable(db, instance="gone-instance", clock=lambda: long_ago).add("dead0run0001", QUESTION, "fixed", limits,
                                                                          5)
    ledger = SpendLedger(db)
    assert ledger.reserve("dead0run0001", 0.25, 5.0, 0.05) == 0.25
    report = page("report", run="dead0run0001")  # the public report link says what became of it
    assert not report.exception and "stopped before it finished" in texts(report, "warning")
    at = unlock(page("live"), CODE)
    assert not at.exception and "Interrupted runs (1)" in [e.label for e in at.expander]
    assert ledger.today() == 0.0  # it spent nothing before it died: its reservation is released
    at = at.button(key="resume_dead0run0001").click().run()
    assert not at.exception and at.query_params["run"] == "dead0run0001"
    at = wait_done(at)
    assert "Finished: complete" in texts(at, "success") and QUOTE in at.html[0].value
    row = store.run("dead0run0001")
    assert row is not None and row.status == "complete"
    result = store.result("dead0run0001")
    assert result is not None and ledger.today() == pytest.approx(result.usage.cost_usd)
    again = page("live")  # a new session, unlocked: nothing is left to resume
    again = unlock(again, CODE)
    assert "Interrupted runs" not in " ".join(e.label for e in again.expander)


def test_a_live_run_shows_progress_then_its_report(live: ResearchBrain, env: Path) -> None:
    live.latency = 0.15
    at = ask(unlock(page("live"), CODE), mode="tools")
    assert not at.exception and "Running" in texts(at, "subheader")
    bars = " ".join(p.proto.text for p in at.get("progress"))
    assert "Searches:" in bars and "of 8" in bars and "Cost:" in bars
    at = wait_done(at)
    assert not at.exception and "Finished: complete" in texts(at, "success")
    assert QUOTE in at.html[0].value
    (run_file,) = [p for p in (env / "state" / "live").glob("*.json") if not p.name.endswith(".timeline.json")]
    report = page("report", run=run_file.stem)
    assert not report.exception and QUOTE in report.html[0].value
    assert "search" in set(report.dataframe[-1].value.kind)  # the timeline of the live run
    at.button[-1].click().run()
    assert at.text_area(key="question") is not None  # ready for another question


def test_concurrency_limit_refuses_a_second_run_with_its_message(live: ResearchBrain,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCH_LIVE_MAX_CONCURRENT", "1")
    live.latency = 0.3
    first = ask(unlock(page("live"), CODE))
    assert "Running" in texts(first, "subheader")
    second = ask(unlock(page("live"), CODE), "A second question about Qdrant?")
    assert "already in progress" in texts(second, "error") and "limit is 1" in texts(second, "error")
    wait_done(first)


def test_spend_ceiling_counts_todays_spend_from_the_shared_ledger(live: ResearchBrain, env: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCH_LIVE_DAILY_USD", "1.00")
    ledger = SpendLedger(migrated_database(str(env / "state" / "research.sqlite")))  # what every session shares
    assert ledger.reserve("earlier", 1.0, ceiling=1.0, minimum=0.0) == 1.0
    ledger.settle("earlier", 0.97)
    at = ask(unlock(page("live"), CODE))
    assert "$0.97 of $1.00 spent or reserved today" in texts(at, "caption")
    assert "spending limit for live runs ($1.00" in texts(at, "error") and "live_job" not in at.session_state
    ledger.settle("earlier", 0.90)  # 0.10 left: the run starts with its budget lowered to that
    live.latency = 0.3
    at = ask(unlock(page("live"), CODE))
    assert "Running" in texts(at, "subheader")
    assert "Cost: $0.0000 of $0.10" in " ".join(p.proto.text.replace("\\", "") for p in at.get("progress"))
    wait_done(at)


def test_cancel_button_stops_the_run(live: ResearchBrain) -> None:
    live.latency = 0.4
    at = ask(unlock(page("live"), CODE), mode="tools")
    at.button(key="cancel").click().run()
    at = wait_done(at, timeout=20)
    assert "Finished:" in texts(at, "success") and "cancelled" in at.html[-1].value


def test_a_question_that_contains_the_access_code_is_refused(live: ResearchBrain, env: Path) -> None:
    at = ask(unlock(page("live"), CODE), f"What does Qdrant cost? My code is {CODE}.")
    assert not at.exception and "contains the access code" in texts(at, "error") and "live_job" not in at.session_state
    at = ask(at, f"What does Qdrant cost?{CODE.upper()}")  # case does not matter
    assert "contains the access code" in texts(at, "error") and "live_job" not in at.session_state
    assert not (env / "state" / "live").exists() and SqliteRunStore(env / "state" / "research.sqlite").runs() == []


def test_the_access_code_is_not_scrubbed_out_of_stored_evidence(live: ResearchBrain, env: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCESS_CODE", "smallest cluster")  # a code that happens to be in the page
    at = wait_done(ask(unlock(page("live"), "smallest cluster")))
    assert "Finished: complete" in texts(at, "success")
    (run_file,) = [p for p in (env / "state" / "live").glob("*.json") if not p.name.endswith(".timeline.json")]
    stored = SqliteRunStore(env / "state" / "research.sqlite").result(run_file.stem)
    assert stored is not None and QUOTE in [f.quote for f in stored.findings]


# -- extractive runs: no model key ----------------------------------------------------------------------------------

@pytest.fixture()
def no_key(env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The access code set, no ANTHROPIC_API_KEY (conftest removes it), and a small frozen web to search."""
    monkeypatch.setenv("ACCESS_CODE", CODE)
    monkeypatch.setenv("RESEARCH_SEARCH_PROVIDER", "corpus")
    monkeypatch.setenv("RESEARCH_CORPUS_DIR", str(qdrant_corpus(env / "corpus")))
    return env


def live_runs(env: Path) -> list[Path]:
    return [p for p in (env / "state" / "live").glob("*.json") if not p.name.endswith(".timeline.json")]


def test_without_a_model_key_only_extractive_is_offered_and_the_page_says_why(no_key: Path) -> None:
    at = unlock(page("live"), CODE)
    assert not at.exception and not at.error
    assert at.radio(key="mode").options == [MODES["extractive"]] and at.radio(key="mode").value == "extractive"
    assert NO_KEY_SENTENCE in texts(at, "info") and "ANTHROPIC_API_KEY" in texts(at, "info")
    assert at.text_area(key="question") is not None
    assert at.selectbox(key="preset").options == ["Quick (8 searches, 10 fetches, $0)",
                                                  "Standard (16 searches, 20 fetches, $0)",
                                                  "Thorough (30 searches, 40 fetches, $0)"]


def test_extractive_runs_still_need_the_access_code(no_key: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = page("live")
    assert not at.exception and at.text_input(key="access_code") is not None
    assert not at.text_area and not at.radio and [b.label for b in at.button] == ["Unlock"]
    at = unlock(at, "not-the-code-42")
    assert "That code is not right" in texts(at, "error") and not at.text_area and not at.radio
    monkeypatch.delenv("ACCESS_CODE")  # no code on the server: live runs are off, even those that cost nothing
    at = page("live")
    assert "Live runs are off" in texts(at, "warning") and not at.text_input and not at.text_area and not at.radio
    assert not (no_key / "state" / "live").exists()


def test_an_extractive_run_with_no_key_shows_progress_then_opens_its_report(no_key: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    held, release = threading.Event(), threading.Event()
    emit = ProgressSink.emit

    def held_emit(self: ProgressSink, event: object, **kw: float) -> None:
        emit(self, event, **kw)  # type: ignore[arg-type]
        if isinstance(event, FetchEvent):  # hold the run after its page is read, so the page shows it in flight
            held.set()
            assert release.wait(30)

    monkeypatch.setattr(ProgressSink, "emit", held_emit)
    at = ask(unlock(page("live"), CODE), mode="extractive")
    assert not at.exception and "Running" in texts(at, "subheader")
    assert held.wait(30)
    at.run()
    assert "Running" in texts(at, "subheader")
    assert "extractive (no model)" in texts(at, "markdown")
    bars = " ".join(p.proto.text for p in at.get("progress"))
    assert "Searches: 3 of 8" in bars and "Fetches: 1 of 10" in bars
    assert "Model calls" not in bars and "Cost" not in bars and "no model calls and no cost" in texts(at, "caption")
    assert "fetch: https://qdrant.example/pricing (ok)" in " ".join(c.value for c in at.code)
    release.set()
    at = wait_done(at)
    assert not at.exception and "Finished: complete, 1 finding, no model, $0." in texts(at, "success")
    assert QUOTE in at.html[0].value and 'data-cite="F1"' in at.html[0].value
    assert "Extractive · no model" in texts(at, "caption")
    (run_file,) = live_runs(no_key)
    report = page("report", run=run_file.stem)
    assert not report.exception and "Extractive · no model" in texts(report, "caption")
    assert 'data-cite="F1"' in report.html[0].value and QUOTE in report.html[0].value
    assert list(report.dataframe[0].value.quote) == [QUOTE]  # the verified findings
    assert "search" in set(report.dataframe[-1].value.kind)  # the timeline of the live run
    assert SpendLedger(migrated_database(str(no_key / "state" / "research.sqlite"))).today() == 0.0


def test_on_a_fresh_clone_an_extractive_run_searches_the_shipped_news_corpus(env: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCESS_CODE", CODE)  # and nothing else: no key, no search provider, no corpus setting
    at = unlock(page("live"), CODE)
    assert at.radio(key="mode").options == [MODES["extractive"]] and NO_KEY_SENTENCE in texts(at, "info")
    at = wait_done(ask(at, "How many school districts closed because of the Indiana teachers' rally?",
                       mode="extractive"))
    assert not at.exception and "Finished: complete" in texts(at, "success")
    assert "Nearly 300 school districts closed because of the rally" in at.html[0].value


# -- saved extractive runs ------------------------------------------------------------------------------------------

def extractive_run(run_id: str) -> RunResult:
    return make_run(run_id, mode="extractive", cost=0.0).model_copy(
        update={"models": {"lead": "none", "worker": "none"}, "usage": Usage()})


def test_extractive_runs_are_labelled_no_model_without_streamlit() -> None:
    rr = extractive_run("x1")
    assert summarise(rr, file="x1.json", suite="default").models == "no model"
    assert models_label(rr.mode, rr.models) == "no model" and run_header(rr) == "Extractive · no model"
    assert is_extractive("fixed", {"lead": "none", "worker": "none"})  # "none" recorded for every model
    assert mode_label("extractive") == "extractive (no model)" and mode_label("tools") == "tools"
    fixed = make_run("f1")
    assert models_label(fixed.mode, fixed.models) == "claude-sonnet-5-5 / claude-haiku-5-5"
    assert run_header(fixed) == "fixed mode · claude-sonnet-5-5 / claude-haiku-5-5"


def test_benchmarks_and_report_pages_show_no_model_for_an_extractive_run(env: Path) -> None:
    save_run_file(env / "bench", extractive_run("x1"))
    save_run_file(env / "bench", make_run("f1"))
    at = page("benchmarks")
    assert not at.exception
    table = at.dataframe[0].value.set_index("report")
    assert table.loc["/report?run=x1", "models"] == "no model" and table.loc["/report?run=x1", "mode"] == "extractive"
    assert table.loc["/report?run=f1", "models"] == "claude-sonnet-5-5 / claude-haiku-5-5"
    assert "no model" in at.multiselect[2].options and "none / none" not in at.multiselect[2].options
    assert not [w for w in at.selectbox if w.label == "Open a report"]  # the table's links open the reports
    assert set(at.dataframe[1].value["mode"]) == {"extractive (no model)", "fixed"}
    at.multiselect[2].set_value(["no model"]).run()
    assert list(at.dataframe[0].value.report) == ["/report?run=x1"]
    report = page("report", run="x1")
    assert not report.exception
    header = texts(report, "caption")
    assert "Extractive · no model" in header and "none" not in header.replace("no model", "")
    assert "no model wrote or judged anything" in texts(report, "info") and "checked by a model" not in texts(
        report, "info")
    assert ("Cost", "$0") in facts(report.html[0].value)
    assert QUOTE in report.html[0].value
    chooser = page("report", run="missing")
    assert any("(extractive (no model)," in o for o in chooser.selectbox[0].options)


def test_md_text_leaves_no_markdown_syntax_or_autolink() -> None:
    from ui.components import md_text

    out = md_text("![x](http://a.example/?q=1) [c](javascript:x) <b> :red[x] $x$ www.a.example me@a.example\n#h")
    assert "\n" not in out
    unescaped = [c for i, c in enumerate(out) if c in "![]()<>:$#@." and (i == 0 or out[i - 1] != "\\")]
    assert unescaped == []
    assert "http\\:\u200b\\/\\/" in out and "www\u200b\\." in out and "me\u200b\\@" in out
    assert md_text("\u202eexe.txt\u202c \u2067x\u2069\u200f") == "exe\\.txt x"


def test_run_time_and_date_come_from_timings_not_from_the_timestamp() -> None:
    from ui.library import summarise

    rr = RunResult(run_id="t1", question="q?", mode="fixed", status="complete",
                   timings={"started_at": 1_764_460_800.0, "plan": 1.0, "research": 2.0, "total": 3.5})
    row = summarise(rr, file="t1.json", suite="default")
    assert row.seconds == 3.5 and row.date == "2025-11-30 00:00:00"
    older = rr.model_copy(update={"timings": {"plan": 1.0, "research": 2.0}})
    assert summarise(older, file="t1.json", suite="default").seconds == 3.0


# -- the scoreboard: graded suites (summary.json) ----------------------------------------------------------------------

def frames(at: AppTest, column: str) -> list[pd.DataFrame]:
    """The tables shown that have `column` (st.dataframe keeps no key unless it is selectable)."""
    return [d.value for d in at.dataframe if column in d.value.columns]


def test_the_scoreboard_shows_each_mode_side_by_side_and_every_question_with_what_failed(env: Path) -> None:
    saved_suite(env / "bench")
    save_run_file(env / "bench" / "adhoc", make_run("a1"))  # a suite with no summary: listed as before
    at = page("benchmarks")
    assert not at.exception and not at.warning  # summary.json is not a bad run file
    assert "Scoreboard" in texts(at, "header") and at.selectbox(key="suite").options == \
        ["smoke (version 1, corpus news, 2 questions)"]
    splits, board = frames(at, "metric")  # dev and test side by side, then every figure per mode
    assert "dev: answer recall" in splits.columns and list(splits.metric) == ["fixed", "tools", "extractive (no model)"]
    metrics = board.set_index("metric")
    assert list(metrics.columns) == ["fixed", "tools", "extractive (no model)"]
    assert metrics.loc["lead model"].tolist() == [LEAD, LEAD, "no model"]
    assert metrics.loc["worker model"].tolist() == [WORKER, WORKER, "no model"]
    assert metrics.loc["pass rate"].tolist() == ["100%", "100%", "50%"]
    assert metrics.loc["expectation: answer", "extractive (no model)"] == "50%"
    for name in ("pass^1 (every repeat passes)", "citation precision", "gold-page recall", "answer recall",
                 "sentences cited", "numbers in quotes", "cost", "cost per question", "tokens (in / out)",
                 "tokens per question", "model calls", "model calls per question", "wall time per question"):
        assert name in metrics.index
    assert metrics.loc["dates (UTC)"].tolist() == ["2025-11-30", "2025-11-30", "2025-12-01"]
    assert "Compared at equal budget" in texts(at, "markdown")
    questions = frames(at, "extractive (no model) run")[0].set_index("question")
    q2 = questions.loc[f"q2: {QUESTIONS['q2']}"]
    assert (q2["fixed"], q2["tools"], q2["extractive (no model)"]) == ("pass", "pass", "fail: answer")
    assert q2["extractive (no model) report"] == "/report?run=smoke-q2-extractive"
    assert "1 of 2 questions fail" in texts(at, "markdown")
    at.toggle(key="failing-smoke").set_value(True).run()
    assert list(frames(at, "extractive (no model) run")[0].question) == [f"q2: {QUESTIONS['q2']}"]
    at.selectbox(key="question-smoke").set_value("q2").run()
    assert not at.exception and "**extractive (no model)**: :red[fail: answer]" in texts(at, "markdown")
    detail = frames(at, "expectation")[-1]  # fixed, tools, then extractive
    assert detail.set_index("expectation").loc["answer"].tolist() == ["no", MISSING]
    links = {link.proto.label: link.proto.page for link in at.get("page_link")}
    assert links["Open its extractive report"].endswith("report")
    runs = frames(at, "grade")[0].set_index("report")
    assert runs.loc["/report?run=smoke-q2-extractive", "grade"] == "fail: answer"
    assert runs.loc["/report?run=smoke-q2-extractive", "models"] == "no model"
    assert runs.loc["/report?run=a1", "grade"] == "" and runs.loc["/report?run=a1", "suite"] == "adhoc"
    assert "Not graded (no summary.json), listed with every saved run below: adhoc" in texts(at, "caption")


def test_a_suite_stopped_by_its_ceiling_says_so_and_untrusted_text_is_escaped(env: Path) -> None:
    saved_suite(env / "bench", stopped="the $1.00 ceiling was reached [x](javascript:alert(1))",
                description="<b>bold</b> ![i](http://attacker.example/x.png)")
    at = page("benchmarks")
    assert not at.exception
    (warning,) = [w.value for w in at.warning]
    assert warning.startswith("This bench stopped before every run was made: the \\$1\\.00 ceiling was reached")
    assert "\\[x\\]\\(javascript\\:alert\\(1\\)\\)" in warning and "The figures cover only" in warning
    assert "\\<b\\>bold\\<\\/b\\> \\!\\[i\\]" in " ".join(c.value for c in at.caption)


def test_a_suite_stopped_before_any_run_was_graded_says_so(env: Path) -> None:
    (env / "bench" / "early").mkdir()
    (env / "bench" / "early" / SUMMARY).write_text(BenchSummary(
        suite="early", version="1", corpus="news", graded_at="2025-12-01T09:00:00+00:00", code_version="0.1.0",
        stopped="interrupted after 0 of 9 runs", summary=grade_suite([], 1)).model_dump_json())
    at = page("benchmarks")
    assert not at.exception and not at.dataframe
    assert "stopped before every run was made: interrupted after 0 of 9 runs" in texts(at, "warning")
    assert "No run of this suite has been graded yet." in texts(at, "info")


def test_a_report_of_a_graded_run_shows_its_grading(env: Path) -> None:
    saved_suite(env / "bench")
    at = page("report", run="smoke-q2-extractive")
    assert not at.exception and "Extractive · no model" in texts(at, "caption")
    grading = lxml.html.fromstring(at.html[-1].value)
    assert grading.findtext(".//h3") == "Benchmark grading"
    assert grading.find(".//div[@class='vb-fail']").text_content() == "Failed: answer."
    caption = grading.find(".//p[@class='vb-caption']").text_content()
    assert f"question q2: {QUESTIONS['q2']}" in caption and "repeat 1" in caption
    expectations_html, measures_html = grading.findall(".//table")
    expectations = {row[0]: row[1:] for row in html_rows(expectations_html)}
    assert expectations["answer"] == ["no", MISSING] and expectations["citations_verified"][0] == "yes"
    measures = {row[0]: row[1] for row in html_rows(measures_html)}
    assert measures["Answer recall"] == "0%" and measures["Citation precision"] == "100%"
    assert measures["Gold-page recall"] == "100%" and measures["Model calls"] == "0"
    assert measures["Wall time"] == "2.00 s" and measures["Tokens"] == "0"
    passed = page("report", run="smoke-q1-fixed")
    assert 'class="vb-pass" role="status">Passed: every expectation' in passed.html[-1].value
    assert 'class="vb-fail"' not in passed.html[-1].value
    save_run_file(env / "bench" / "adhoc", make_run("a1"))
    ungraded = page("report", run="a1")
    assert not ungraded.exception and not [h for h in ungraded.html if "Benchmark grading" in h.value]


def html_rows(table: lxml.html.HtmlElement) -> list[list[str]]:
    """The body rows of an HTML table, as the text of their cells."""
    return [[td.text_content() for td in tr.findall("td")] for tr in table.findall(".//tr") if tr.findall("td")]


def facts(html: str) -> list[tuple[str, str]]:
    """The report's figures (label, value) above its body."""
    return [(f.findtext("span[@class='vb-fact-label']"), f.findtext("span[@class='vb-fact-value']"))
            for f in lxml.html.fromstring(html).findall(".//div[@class='vb-fact']")]


def test_the_suite_with_the_most_graded_runs_opens_first(env: Path) -> None:
    small = saved_suite(env / "bench", suite="aaa")
    saved_suite(env / "bench", suite="zzz")
    summary = BenchSummary.model_validate_json((small / SUMMARY).read_text())
    fewer = summary.grades[:2]
    (small / SUMMARY).write_text(summary.model_copy(update={"grades": fewer,
                                                            "summary": grade_suite(fewer, 1)}).model_dump_json())
    at = page("benchmarks")
    assert not at.exception
    assert [o.split(" ")[0] for o in at.selectbox(key="suite").options] == ["zzz", "aaa"]
