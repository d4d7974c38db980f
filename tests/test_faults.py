"""The fault matrix: a model fault at every step of a run, in both researcher modes, each cell asserting that

- the status is honest: a step that failed for good leaves the run "partial" ("failed" when no model call worked),
  a fault that a retry cleared leaves it "complete" with no problem;
- the problem is named: RunResult.problems holds the step's own kind, at that step, saying what failed, and the
  run store holds the model_error event of that kind;
- nothing recorded is lost: findings kept before the fault are in the RunResult and in the run store;
- retries are bounded and a cleared fault costs only its retry: the model requests are the no-fault run's plus one.

Rows (steps), told apart the way tests/fakes/research_brain.py recognises requests (`step_of`): plan, plan_judge
(two plan candidates), worker (tools; after its first finding) or analyst (fixed; the call reading the second page,
which reads the first with it), support_judge,
writer, sentence_judge (the review), and all (every call). Columns (faults): HTTP 429, 529 and 500 on every try and
once, a hang past RESEARCH_MODEL_TIMEOUT every time and once, a 200 whose body is not JSON, and a reply that does
not match its schema (the writer: an empty report) every time and once. Cells are `mode-step-fault`, so
`pytest tests/test_faults*.py -q` counts them. The other columns are in tests/test_faults_web.py (search outage;
slow, huge and mislabelled pages), test_faults_store.py (the run store full or read-only), test_faults_kill.py
(SIGKILL at each step, then resume) and test_faults_cli.py (what the command line shows: no traceback, the
documented exit code).
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import re
import subprocess
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import certifi
import httpx
import pytest

from pipeline.config import Settings
from pipeline.core.events import EventSink
from pipeline.core.schema import RunOptions, RunResult
from pipeline.models.anthropic import LLM
from pipeline.models.replies import REPAIR_INTRO
from pipeline.research import resume as resumption
from pipeline.research.context import RunContext
from pipeline.research.orchestrator import build_context, research
from pipeline.store.sql import SqliteRunStore
from pipeline.web.search.base import default_http_client
from pipeline.web.search.service import make_provider
from tests.fakes.anthropic_api import FakeAnthropic, FakeReply, MessagesRequest, reply_json, reply_text
from tests.fakes.research_brain import ResearchBrain
from tests.fakes.search_apis import FakeSearchApi, Hit
from tests.fakes.web_server import Route, WebServer
from tests.test_e2e import page

API_KEY = "sk-ant-fault-matrix-key"
QUESTION = "What does Qdrant Cloud pricing start at?"
QUOTE_A = "Qdrant Cloud pricing starts at 25 dollars per month for the smallest cluster."
QUOTE_B = "Qdrant Cloud pricing for the hybrid plan starts at 99 dollars per month."
PAGES = {"/a": page("Qdrant pricing", QUOTE_A), "/b": page("Qdrant plans", QUOTE_B)}
MODES = ("fixed", "tools")
HANG_TIMEOUT = 0.5  # RESEARCH_MODEL_TIMEOUT in the cells whose fault is a hang: short, yet far above a fake answer


# -- which step a model request belongs to ---------------------------------------------------------------------------
def step_of(req: MessagesRequest) -> str | None:
    """The step of a request, read from the tags of its first user message as ResearchBrain.__call__ reads them
    (the first message, not the last: a repair request after an invalid reply belongs to the step it repairs)."""
    first = req.user_texts[0] if req.user_texts else ""
    if req.has_tool("record_finding"):
        return "worker"
    if "<max_sub_questions>" in first:
        return "plan"
    if "<plan>" in first:
        return "plan_judge"
    if "<sentence" in first:
        return "sentence_judge"
    if "<findings>" in first:  # before the support judge: a writer request holds <claim> and <quote> too
        return "writer"
    if "<claim>" in first and "<quote" in first:
        return "support_judge"
    if "<sub_question" in first and "untrusted_page" in first:
        return "analyst"
    return None


def is_step(name: str) -> Callable[[MessagesRequest], bool]:
    return lambda r: step_of(r) == name


# Where in its step a fault strikes: the worker after it recorded its first finding, the analyst on the call that reads
# the second page (batched with the first: RunOptions.batch_calls)
# only (so each keeps findings from before the fault); every other step on each of its requests.
TARGET: dict[str, Callable[[MessagesRequest], bool]] = {
    "worker": lambda r: step_of(r) == "worker" and r.contains("RECORDED F"),
    "analyst": lambda r: step_of(r) == "analyst" and 'source="S2"' in r.user_texts[0],
}


def target(step: str) -> Callable[[MessagesRequest], bool]:
    return TARGET.get(step) or ((lambda _r: True) if step == "all" else is_step(step))


# The Problem each step's persistent failure must produce: (kind, step). "all": every model call fails.
NAMED = {"all": ("model_unavailable", "run"), "plan": ("plan_fallback", "plan"),
         "plan_judge": ("plan_judge_unavailable", "plan"), "worker": ("worker_failed", "research"),
         "analyst": ("analyst_unavailable", "analyse"), "support_judge": ("judge_unavailable", "analyse"),
         "writer": ("writer_unavailable", "write"), "sentence_judge": ("judge_unavailable", "review")}
STEPS = {"fixed": ("plan", "plan_judge", "analyst", "support_judge", "writer", "sentence_judge", "all"),
         "tools": ("plan", "plan_judge", "worker", "support_judge", "writer", "sentence_judge", "all")}
STRUCTURED = frozenset({"plan", "plan_judge", "analyst", "support_judge", "sentence_judge"})


def invalid_reply(req: MessagesRequest) -> FakeReply:
    """A well-formed answer that is wrong for its step: JSON of another shape, or (the writer) no report at all."""
    return reply_json({"unexpected": "shape"}) if req.output_schema else reply_text("")


@dataclass(frozen=True)
class Fault:
    """One column of the matrix: how the fake fails the targeted requests, and what the run must then say."""

    name: str
    kind: str  # FakeAnthropic.fault kind
    status: int = 500
    times: int | None = None  # None: every matching request (persistent); 1: once (transient)
    says: tuple[str, ...] = ()  # the problem's message names the cause with one of these
    error_kind: str | None = None  # the model_error event's kind
    paid_retry: bool = False  # the retry is a paid call (the repair after an invalid reply)

    @property
    def transient(self) -> bool:
        return self.times is not None

    def inject(self, fake: FakeAnthropic, predicate: Callable[[MessagesRequest], bool]) -> None:
        if self.kind == "reply":
            fake.fault(predicate, kind="reply", reply=invalid_reply, times=self.times)
        else:
            fake.fault(predicate, kind=self.kind, status=self.status, times=self.times)  # type: ignore[arg-type]


FAULTS = [
    Fault("429", "status", 429, says=("HTTP 429",), error_kind="rate_limited"),
    Fault("529", "status", 529, says=("HTTP 529",), error_kind="overloaded"),
    Fault("500", "status", 500, says=("HTTP 500",), error_kind="server"),
    Fault("429-once", "status", 429, times=1),
    Fault("529-once", "status", 529, times=1),
    Fault("500-once", "status", 500, times=1),
    Fault("timeout", "hang", says=("timed out",), error_kind="timeout"),
    Fault("timeout-once", "hang", times=1),
    Fault("malformed", "malformed_json", says=("not valid JSON",), error_kind="malformed"),
    Fault("invalid", "reply", says=("did not match", "empty report"), error_kind="malformed"),
    Fault("invalid-once", "reply", times=1, paid_retry=True),
]


def applies(step: str, fault: Fault) -> bool:
    """A worker turn has no schema to break (a bad tool call is the tools' business); only a structured reply is
    repaired, so the writer has no transient invalid reply to recover from. When every call fails, no retry can
    help, and a hang or a wrong reply is each step's own cell."""
    if step == "all":
        return fault.kind in ("status", "malformed_json") and not fault.transient
    if fault.kind == "reply":
        return step != "worker" and (not fault.transient or step in STRUCTURED)
    return True


def _cell(mode: str, step: str, fault: Fault) -> Any:
    return pytest.param(mode, step, fault, id=f"{mode}-{step}-{fault.name}")


CELLS = [_cell(mode, step, fault) for mode in MODES for step in STEPS[mode] for fault in FAULTS if applies(step, fault)]


# -- the world: a fake model, search API and pages, and a run store --------------------------------------------------
@dataclass
class Servers:
    """The loopback stand-ins, started once per test module and reset for each test."""

    fake: FakeAnthropic
    search: FakeSearchApi
    web: WebServer
    brain: ResearchBrain
    http: httpx.Client  # the search provider's client, as in production, made once

    def reset(self, routes: dict[str, Route]) -> None:
        """Serve `routes` (found by search in this order) and nothing else; no fault, no request recorded."""
        self.web.reset(routes)
        self.search.reset([Hit(title=p.strip("/"), url=self.web.url(p), snippet="snippet") for p in routes])
        self.fake.reset()
        self.fake.rule(lambda r: REPAIR_INTRO in r.last_user_text, repair_with_the_brain(self.brain))


def repair_with_the_brain(brain: ResearchBrain) -> Callable[[MessagesRequest], FakeReply]:
    """A repair request is answered as its first message would be (the brain reads the tags of the last user turn,
    which in a repair is the request to try again)."""
    return lambda r: brain(dataclasses.replace(r, messages=r.messages[:1]))


def two_drafts(world: World) -> None:
    """Planner answers that differ in their premise analysis only, so with two plan candidates the plan judge scores
    both (identical drafts are not judged) and either choice researches the same sub-questions."""
    drafts = itertools.count()

    def planner(r: MessagesRequest) -> FakeReply:
        plan = json.loads(world.servers.brain(r).content[0]["text"])
        return reply_json({**plan, "premise_analysis": f"Draft {next(drafts)}: no questionable premise."})

    world.fake.rule(lambda r: "<max_sub_questions>" in r.last_user_text, planner)


@contextmanager
def start_servers() -> Iterator[Servers]:
    brain = ResearchBrain()
    with ExitStack() as stack:
        web = stack.enter_context(WebServer())
        search = stack.enter_context(FakeSearchApi("brave", api_key="brave-key"))
        fake = stack.enter_context(FakeAnthropic(brain, hang_seconds=5.0))
        http = stack.enter_context(default_http_client())
        yield Servers(fake, search, web, brain, http)


@dataclass
class World:
    """One test's view of the servers, with its own run store (RESEARCH_DB)."""

    servers: Servers
    store: SqliteRunStore
    db: Path
    sleeps: list[float] = field(default_factory=list)

    @property
    def fake(self) -> FakeAnthropic:
        return self.servers.fake

    @property
    def search(self) -> FakeSearchApi:
        return self.servers.search

    @property
    def web(self) -> WebServer:
        return self.servers.web

    def settings(self, **overrides: Any) -> Settings:
        fields: dict[str, Any] = {
            "anthropic_api_key": API_KEY, "anthropic_base_url": self.fake.base_url,
            "search_provider": "brave", "brave_api_key": "brave-key", "search_base_url": self.search.base_url,
            "fetch_allow_raw": self.web.host_port, "model_max_retries": 1, "model_timeout": 10.0,
            "db_path": str(self.db), **overrides}
        return Settings(**fields)

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a CLI run in this world."""
        return {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": self.fake.base_url,
                "RESEARCH_SEARCH_PROVIDER": "brave", "BRAVE_API_KEY": "brave-key",
                "RESEARCH_SEARCH_BASE_URL": self.search.base_url, "RESEARCH_FETCH_ALLOW": self.web.host_port,
                "RESEARCH_DB": str(self.db), "RESEARCH_MODEL_MAX_RETRIES": "1", **extra}

    def run(self, mode: str, question: str = QUESTION, *, quick_retries: bool = False, candidates: int = 1,
            **overrides: Any) -> RunResult:
        """One recorded run in this process (search retries sleep no time); with `quick_retries` the SDK waits at
        most 10 ms between retries (an error with retry-after-ms waits that; a timeout would wait about 0.5 s)."""
        settings = self.settings(**overrides)
        provider = make_provider(settings, http=self.servers.http, sleep=self.sleeps.append)

        def context(s: Settings, o: RunOptions, e: EventSink, **kw: Any) -> RunContext:
            ctx = build_context(s, o, e, provider=provider, **kw)
            if quick_retries:
                ctx.llm = LLM(s, ctx.budget, e, max_retry_wait=0.01)
            return ctx

        options = RunOptions(mode=mode, review_rounds=1, plan_candidates=candidates)  # type: ignore[arg-type]
        return research(question, settings, options=options, store=self.store, context=context)

    def resume(self, run_id: str, **overrides: Any) -> RunResult:
        """Resume `run_id` in this process, as `python -m pipeline resume` does once the run's process is gone (its
        row is given a dead process's id: in these tests the process that ran it is this one)."""
        assert self.store.db.execute("UPDATE runs SET pid = ? WHERE id = ?", (dead_pid(), run_id)).rowcount == 1
        ready = resumption.prepare(self.store, run_id, self.settings(**overrides))
        provider = make_provider(ready.settings, http=self.servers.http, sleep=self.sleeps.append)
        return resumption.resume(self.store, ready, context=lambda s, o, e, **kw: build_context(
            s, o, e, provider=provider, **kw))

    def counts(self) -> dict[str | None, int]:
        """Model requests received (faulted ones included) per step."""
        steps = [step_of(r) for r in self.fake.message_requests]
        return {step: steps.count(step) for step in dict.fromkeys(steps)}


def dead_pid() -> int:
    """The id of a process that has ended."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def once(callback: Callable[[], None]) -> Callable[[], None]:
    """`callback`, run the first time only, however many threads call."""
    lock, done = threading.Lock(), []

    def run() -> None:
        with lock:
            if done:
                return
            done.append(True)
        callback()

    return run


@contextmanager
def open_world(servers: Servers, folder: Path, routes: dict[str, Route] | None = None) -> Iterator[World]:
    """The servers reset to serve `routes` (default: the two Qdrant pages), and a new run store in `folder`."""
    servers.reset(PAGES if routes is None else routes)
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "runs.sqlite"
    with SqliteRunStore(db) as store:
        yield World(servers, store, db)


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with start_servers() as started:
        yield started


@pytest.fixture()
def world(servers: Servers, tmp_path: Path) -> Iterator[World]:
    with open_world(servers, tmp_path) as w:
        yield w


@pytest.fixture(autouse=True)
def _one_certificate(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every run builds TLS contexts (the SDK's, the fetcher's) that loopback HTTP never uses; loading the whole CA
    bundle into each takes 35 ms, a third of a run here. SSL_CERT_FILE, which both read, names a one-certificate
    bundle instead."""
    bundle = tmp_path_factory.getbasetemp() / "one-certificate.pem"
    if not bundle.exists():
        pem = Path(certifi.where()).read_text()
        end = "-----END CERTIFICATE-----"
        bundle.write_text(pem[pem.index("-----BEGIN CERTIFICATE-----"):pem.index(end) + len(end)] + "\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))


@dataclass(frozen=True)
class Baseline:
    """A no-fault run of one mode: model requests per step, paid calls, the findings' quotes."""

    counts: dict[str | None, int]
    model_calls: int
    quotes: frozenset[str]


_BASELINES: dict[tuple[str, int], Baseline] = {}
_BASELINE_LOCK = threading.Lock()


def baseline(mode: str, candidates: int, folder: Path) -> Baseline:
    """The no-fault run of `mode` with `candidates` plans, made once per session on servers of its own."""
    with _BASELINE_LOCK:
        if (mode, candidates) not in _BASELINES:
            with start_servers() as servers, open_world(servers, folder) as clean:
                if candidates > 1:
                    two_drafts(clean)
                result = clean.run(mode, candidates=candidates)
                assert result.status == "complete" and not result.problems, result.problems
                _BASELINES[mode, candidates] = Baseline(clean.counts(), result.usage.model_calls,
                                                        frozenset(f.quote for f in result.findings))
        return _BASELINES[mode, candidates]


# -- the cells -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("mode", "step", "fault"), CELLS)
def test_model_fault(world: World, mode: str, step: str, fault: Fault, tmp_path_factory: pytest.TempPathFactory
                     ) -> None:
    candidates = 2 if step == "plan_judge" else 1
    base = baseline(mode, candidates, tmp_path_factory.mktemp(f"baseline-{mode}"))
    if candidates > 1:
        two_drafts(world)
    fault.inject(world.fake, target(step))
    hang = {"model_timeout": HANG_TIMEOUT, "quick_retries": True} if fault.kind == "hang" else {}
    result = world.run(mode, candidates=candidates, **hang)
    counts = world.counts()
    assert not world.fake.handler_errors
    assert all(p.kind != "internal_error" for p in result.problems), result.problems

    # Nothing recorded is lost: every finding the store recorded is in the result, which the store holds too.
    assert world.store.result(result.run_id) == result
    recorded = {e.payload["id"] for e in world.store.events(result.run_id, ["finding"])}
    assert recorded == {f.id for f in result.findings}
    quotes = {f.quote for f in result.findings}

    if fault.transient:  # retried, and only the retry was added
        assert (result.status, result.problems) == ("complete", [])
        assert counts == {**base.counts, step: base.counts[step] + 1}
        assert result.usage.model_calls == base.model_calls + (1 if fault.paid_retry else 0)
        assert quotes == base.quotes
        return

    # A step that failed for good: the run says so, names the step and the cause, and keeps what it had.
    # An analyst reply that fails its schema twice is no outage: code selects that page's sentences instead.
    fallback = (step, fault.name) == ("analyst", "invalid")
    kind, where = ("analyst_fallback", "analyse") if fallback else NAMED[step]
    assert result.status == ("failed" if step == "all" else "partial"), result.problems
    named = [p for p in result.problems if (p.kind, p.step) == (kind, where)]
    assert named, result.problems
    if step not in ("plan", "all"):  # the plan's fallback does not say why (test_a_planner_failure_names_its_cause)
        assert any(s in p.message for p in named for s in fault.says), named
    if not (step == "writer" and fault.kind == "reply"):  # an empty report is a reply, not a failed call
        errors = world.store.events(result.run_id, ["model_error"])
        assert fault.error_kind in {e.payload["kind"] for e in errors}
    # Bounded: a call the API failed is sent twice (RESEARCH_MODEL_MAX_RETRIES=1); one answered with a broken body
    # or a wrong reply is not sent again (the wrong reply is asked once to be repaired, a request of its own).
    sent = Counter(r.recorded.raw for r in world.fake.message_requests if target(step)(r))
    assert set(sent.values()) == {1 if fault.kind in ("reply", "malformed_json") else 2}, sent.values()
    if step == "all":
        assert quotes == set() and result.usage.model_calls == 0
    elif step == "worker":
        assert QUOTE_A in quotes  # recorded before the fault
    elif fallback:  # both pages of the failed call read by code, whose findings say so and are listed in the problem
        assert QUOTE_A in quotes and QUOTE_B in quotes
        by_code = {f.id for f in result.findings if f.selected_by_code}
        assert by_code == {f.id for f in result.findings if f.source in ("S1", "S2")} != set()
        assert by_code == {i for p in named for i in re.findall(r"F\d+", p.message)}
    elif step == "analyst":
        assert QUOTE_A not in quotes and QUOTE_B not in quotes  # the one call reading S1 and S2 failed
    elif step != "plan":
        assert quotes == base.quotes


def test_a_planner_failure_names_its_cause(world: World) -> None:
    world.fake.fault(is_step("plan"), status=529, times=None)
    result = world.run("fixed")
    [problem] = [p for p in result.problems if p.kind == "plan_fallback"]
    assert "529" in problem.message or "overloaded" in problem.message, problem.message
