"""The tools-mode worker loop: the real SDK against the loopback fake Messages API, a Brave-shaped search API and
local pages; the fake model decides each turn by reading the request it receives."""
from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from pipeline.core.events import ListSink
from pipeline.core.schema import BudgetLimits, Plan, RunOptions, SubQuestion
from pipeline.models.anthropic import WARM_ASK
from pipeline.research.context import RunContext
from pipeline.research.prompts import load
from pipeline.research.steps.worker import (
    NOTE_BUDGET,
    NOTE_WRAP_UP,
    NUDGE_BRIEF,
    NUDGE_PROSE,
    PAGE_READ,
    describes_tool_call,
    first_message,
    research_tools,
)
from pipeline.research.tools.toolbox import TOOL_ORDER
from tests.fakes.anthropic_api import (
    FakeAnthropic,
    FakeReply,
    MessagesRequest,
    reply_text,
    reply_tool_use,
    tool_use_block,
)
from tests.fakes.context import make_context
from tests.fakes.search_apis import FakeSearchApi, Hit
from tests.fakes.web_server import Route, WebServer

PAGES = {
    "/q1": ("River report", ["The river report was published on 12 March 2024 by the regional water agency.",
                             "It covers forty monitoring stations."]),
    "/q2": ("Ferry timetable", ["The new ferry timetable adds two crossings on weekday evenings from June.",
                                "Tickets are sold at the harbour."]),
    "/q3": ("Library hours", ["The central library opens at nine in the morning on every weekday.",
                              "It closes early on public holidays."]),
}
SUBS = [SubQuestion(id=f"Q{i}", question=q, success_criterion=c, queries=[k, k + " official"])
        for i, (q, c, k) in enumerate([
            ("When was the river report published?", "A source states the publication date.", "river report date"),
            ("What does the new ferry timetable change?", "A source lists the changes.", "ferry timetable changes"),
            ("When does the central library open?", "A source gives the opening hour.", "library opening hours"),
        ], 1)]
_PAGE = re.compile(r'<untrusted_page id="(\w+)" source="(S\d+)"[^>]*>\n(.*?)\n</untrusted_page id="\1">', re.S)


def article(title: str, paragraphs: list[str]) -> str:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return f"<html><head><title>{title}</title></head><body><article><h1>{title}</h1>{body}</article></body></html>"


# -- reading a request, as the fake model does ----------------------------------------------------------------
def sub_question_id(req: MessagesRequest) -> str:
    m = re.search(r'<sub_question id="(Q\d+)">', req.user_texts[0] if req.user_texts else "")
    return m.group(1) if m else "?"


def result_texts(req: MessagesRequest) -> list[str]:
    out = []
    for block in req.tool_results:
        content = block.get("content")
        out.append(content if isinstance(content, str) else "".join(c.get("text", "") for c in content or []))
    return out


def calls_so_far(req: MessagesRequest) -> list[dict[str, Any]]:
    return [b for m in req.messages if m.get("role") == "assistant" for b in m.get("content", [])
            if isinstance(b, dict) and b.get("type") == "tool_use"]


def pages_seen(req: MessagesRequest) -> list[tuple[str, str]]:
    """(source id, longest line) of every page shown to the model so far."""
    seen = []
    for m in req.messages:
        for b in m.get("content", []) if isinstance(m.get("content"), list) else []:
            if isinstance(b, dict) and b.get("type") == "tool_result" and isinstance(b.get("content"), str):
                for _, sid, body in _PAGE.findall(b["content"]):
                    seen.append((sid, max(body.splitlines(), key=len)))
    return seen


@dataclass
class Brain:
    """A careful worker model: search, fetch the result for its sub-question, quote the page's key line, finish.

    `always_search` makes it search with a new query every turn until told to wrap up or stop; `latency` delays
    each answer; every answer's (sub-question, start, end) is logged.
    """

    always_search: bool = False
    latency: float = 0.0
    overrides: list[Callable[[MessagesRequest], FakeReply | None]] = field(default_factory=list)
    log: list[tuple[str, float, float]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, req: MessagesRequest) -> FakeReply:
        start = time.monotonic()
        if self.latency:
            time.sleep(self.latency)
        reply = self.decide(req)
        with self._lock:
            self.log.append((sub_question_id(req), start, time.monotonic()))
        return reply

    def decide(self, req: MessagesRequest) -> FakeReply:
        if req.user_texts == [WARM_ASK]:
            return reply_text("ready")
        for override in self.overrides:
            reply = override(req)
            if reply is not None:
                return reply
        sq = sub_question_id(req)
        last_text, results = req.last_user_text, result_texts(req)
        calls = calls_so_far(req)
        if NOTE_WRAP_UP in last_text or NOTE_BUDGET in last_text:
            return self.record_or_finish(req, final=True)
        if self.always_search:
            if len(calls) == 1 and results and results[0].startswith("SEARCH_RESULTS"):
                return reply_tool_use("fetch_page", {"url": self.url_for(sq, results[0]), "focus": "date"})
            return reply_tool_use("web_search", {"query": f"{sq} attempt {len(calls)}"})
        if not calls and "<search_results>" in req.user_texts[0]:  # code ran the first search
            return reply_tool_use("fetch_page", {"url": self.url_for(sq, req.user_texts[0]), "focus": "key facts"})
        if not calls:
            return reply_tool_use("web_search", {"query": re.search(
                r"<suggested_queries>\n(.*?)\n", req.user_texts[0])[1]})
        last = results[-1] if results else ""
        if last.startswith("SEARCH_RESULTS"):
            return reply_tool_use("fetch_page", {"url": self.url_for(sq, last), "focus": "key facts"})
        if last.startswith("PAGE"):
            return self.record_or_finish(req, final=False)
        return reply_text(f"Summary for {sq}: I recorded what the page supports.")

    @staticmethod
    def url_for(sq: str, search_text: str) -> str:
        urls = re.findall(r"^   url: (\S+)$", search_text, re.M)
        return next(u for u in urls if u.endswith("/" + sq.lower()))

    @staticmethod
    def record_or_finish(req: MessagesRequest, final: bool) -> FakeReply:
        seen = pages_seen(req)
        if not seen:
            return reply_text("Nothing to record.")
        sid, line = seen[-1]
        record = tool_use_block("record_finding", {"source_id": sid, "claim": line, "quote": line,
                                                   "confidence": "high"})
        if final:  # a last turn that still tries to search: that call must be refused, the finding saved
            return FakeReply([tool_use_block("web_search", {"query": "one more search"}), record], "tool_use")
        return FakeReply([record], "tool_use")


@dataclass
class World:
    fake: FakeAnthropic
    web: WebServer
    api: FakeSearchApi

    def context(self, limits: BudgetLimits | None = None) -> RunContext:
        return make_context(self.fake, search_base_url=self.api.base_url, fetch_allow_raw=self.web.host_port,
                            limits=limits)

    def requests_of(self, sq: str) -> list[MessagesRequest]:
        return [r for r in self.fake.message_requests if sub_question_id(r) == sq]


@pytest.fixture
def brain() -> Brain:
    return Brain()


@pytest.fixture
def world(brain: Brain) -> Iterator[World]:
    with WebServer({path: Route.html(article(*page)) for path, page in PAGES.items()}) as web:
        hits = [Hit(title, web.url(path), f"About {title.lower()}.") for path, (title, _) in PAGES.items()]
        with FakeSearchApi("brave", hits, api_key="k") as api, FakeAnthropic(brain) as fake:
            yield World(fake, web, api)
            assert fake.handler_errors == []


def finished(ctx: RunContext) -> dict[str, dict[str, Any]]:
    assert isinstance(ctx.events, ListSink)
    return {e.payload["sub_question"]: e.payload for e in ctx.events.of("step")
            if e.payload.get("name") == "worker" and e.payload["status"] == "finished"}


def options(**kw: Any) -> RunOptions:
    return RunOptions(mode="tools", **kw)


# -- the happy path ------------------------------------------------------------------------------------------
def test_a_worker_searches_fetches_and_records_a_verified_finding(world: World) -> None:
    ctx = world.context()
    assert research_tools(Plan(sub_questions=[SUBS[0]]), ctx, options()) == []
    [finding] = ctx.notebook.findings()
    assert (finding.sub_question, finding.source, finding.quote) == ("Q1", "S1", PAGES["/q1"][1][0])
    assert ctx.notebook.text("S1")[finding.start:finding.end] == finding.quote
    reqs = world.fake.message_requests
    assert len(reqs) == 4 and all(r.recorded.status == 200 for r in reqs)
    assert reqs[0].user_texts[0] == (
        '<sub_question id="Q1">When was the river report published?</sub_question>\n'
        "<success_criterion>A source states the publication date.</success_criterion>\n"
        "<suggested_queries>\nriver report date\nriver report date official\n</suggested_queries>")
    assert world.api.requests[0].params["q"] == "river report date"
    # The static prefix is the same bytes on every turn, so it is cached.
    assert {r.recorded.field_bytes("tools") for r in reqs} == {reqs[0].recorded.field_bytes("tools")}
    assert {r.recorded.field_bytes("system") for r in reqs} == {reqs[0].recorded.field_bytes("system")}
    assert reqs[0].tool_names == TOOL_ORDER and reqs[0].system_text == load("worker")
    assert all(r.model == ctx.worker_model for r in reqs)
    assert ctx.budget.used().cache_read_input_tokens > 0
    for r in reqs:  # one moving breakpoint, on the newest turn: history is read from the cache on the next turn
        marked = [(i, j) for i, m in enumerate(r.messages) for j, b in enumerate(m["content"]) if "cache_control" in b]
        assert marked == [(len(r.messages) - 1, len(r.messages[-1]["content"]) - 1)]
    assert finished(ctx)["Q1"] == {"name": "worker", "sub_question": "Q1", "status": "finished", "steps": 4,
                                   "ended": "done", "findings": 1}
    assert ctx.stats.snapshot().findings_recorded == 1


def test_the_first_message_escapes_what_it_quotes() -> None:
    sq = SubQuestion(id="Q1", question="Is <b>A & B</b> > C?", success_criterion='"x" < y', queries=["a  &  b", " "])
    assert first_message(sq) == ('<sub_question id="Q1">Is &lt;b&gt;A &amp; B&lt;/b&gt; &gt; C?</sub_question>\n'
                                 '<success_criterion>"x" &lt; y</success_criterion>\n'
                                 "<suggested_queries>\na &amp; b\n</suggested_queries>")


# -- parallel workers ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("brain", [Brain(latency=0.25)])
def test_three_workers_run_at_the_same_time(world: World, brain: Brain) -> None:
    ctx = world.context()
    started = time.monotonic()
    assert research_tools(Plan(sub_questions=SUBS), ctx, options()) == []
    wall = time.monotonic() - started
    assert sorted((f.sub_question, f.quote) for f in ctx.notebook.findings()) == [
        (f"Q{i}", PAGES[f"/q{i}"][1][0]) for i in (1, 2, 3)]
    firsts = {sq: min((s, e) for q, s, e in brain.log if q == sq) for sq in ("Q1", "Q2", "Q3")}
    # All three first turns were in flight at once: each started before any of them had finished.
    assert max(s for s, _ in firsts.values()) < min(e for _, e in firsts.values())
    serial = sum(e - s for _, s, e in brain.log)
    assert len(brain.log) == 12 and wall < 0.6 * serial


# -- tool results ------------------------------------------------------------------------------------------------
def parallel_calls(req: MessagesRequest) -> FakeReply | None:
    if calls_so_far(req):
        return None
    return FakeReply([{"type": "text", "text": "Several things at once."},
                      tool_use_block("web_search", {"query": "river report date"}),
                      tool_use_block("browse", {"url": "http://example.org"}),
                      tool_use_block("fetch_page", {"focus": "no url given"}),
                      tool_use_block("calculate", {"expression": "(26-20)/20*100"})], "tool_use")


@pytest.mark.parametrize("brain", [Brain(overrides=[parallel_calls])])
def test_every_tool_use_gets_exactly_one_result_in_order(world: World) -> None:
    ctx = world.context()
    assert research_tools(Plan(sub_questions=[SUBS[0]]), ctx, options()) == []
    first, second = world.fake.message_requests[:2]
    assert second.recorded.status == 200  # the fake answers 400 when a tool_use has no tool_result
    asked = [b["id"] for b in second.messages[1]["content"] if b["type"] == "tool_use"]
    results = second.tool_results
    assert [r["tool_use_id"] for r in results] == asked and len(asked) == 4
    assert [r.get("is_error", False) for r in results] == [False, True, True, False]
    texts = result_texts(second)
    assert texts[0].startswith("SEARCH_RESULTS") and texts[1].startswith("UNKNOWN_TOOL")
    assert texts[2].startswith("BAD_ARGUMENTS") and texts[3] == "RESULT C1: (26-20)/20*100 = 30"
    assert [b["type"] for b in second.messages[-1]["content"]] == ["tool_result"] * 4
    assert len(world.fake.message_requests) == 2 and ctx.calculations.all()[0].sub_question == "Q1"


# -- prose instead of a call ----------------------------------------------------------------------------------------
def stubborn_prose(req: MessagesRequest) -> FakeReply:
    return reply_text('I will search for the report now: web_search(query="river report date")')


def prose_then_obey(req: MessagesRequest) -> FakeReply | None:
    if calls_so_far(req) or NUDGE_PROSE in req.last_user_text:
        return None
    return reply_text("Let me search for the publication date first.")


@pytest.mark.parametrize("brain", [Brain(overrides=[stubborn_prose])])
def test_a_described_tool_call_is_retried_once_then_the_worker_ends(world: World) -> None:
    ctx = world.context()
    assert research_tools(Plan(sub_questions=[SUBS[0]]), ctx, options()) == []
    reqs = world.fake.message_requests
    assert len(reqs) == 2 and reqs[1].last_user_text == NUDGE_PROSE
    assert finished(ctx)["Q1"]["ended"] == "done"


@pytest.mark.parametrize("brain", [Brain(overrides=[prose_then_obey])])
def test_after_the_nudge_a_real_call_continues_the_loop(world: World) -> None:
    ctx = world.context()
    research_tools(Plan(sub_questions=[SUBS[0]]), ctx, options())
    assert world.fake.message_requests[1].last_user_text == NUDGE_PROSE
    assert len(world.fake.message_requests) == 5 and len(ctx.notebook.findings()) == 1


@pytest.mark.parametrize("brain", [Brain(overrides=[lambda r: reply_text("I searched twice and fetched one page; "
                                                                           "no source gives the date.")])])
def test_a_plain_summary_ends_the_worker_without_a_nudge(world: World) -> None:
    ctx = world.context()
    research_tools(Plan(sub_questions=[SUBS[0]]), ctx, options())
    assert len(world.fake.message_requests) == 1


@pytest.mark.parametrize(("text", "described"), [
    ('web_search(query="x")', True),
    ("Next: fetch_page (url)", True),
    ('{"name": "record_finding", "input": {}}', True),
    ("<invoke name=\"web_search\">", True),
    ("I will search for the 2024 figures.", True),
    ("I'll now fetch the agency's page.", True),
    ("I’m going to use the calculate tool.", True),
    ("Let me look up the official statistics.", True),
    ("I searched for the report and fetched two pages. F1 gives the date.", False),
    ("The agency will search its records next year, the page says.", False),
    ("Findings F1 and F2 answer the sub-question; I could not confirm the 2023 figure.", False),
    ("Let me summarise: the report came out in March 2024 [F1].", False),
])
def test_the_prose_call_detector_is_conservative(text: str, described: bool) -> None:
    assert describes_tool_call(text) is described


# -- output limit -------------------------------------------------------------------------------------------------
def cut_off_once(req: MessagesRequest) -> FakeReply | None:
    if calls_so_far(req) or NUDGE_BRIEF in req.last_user_text:
        return None
    return reply_text("Let me think about this at length " * 3, stop_reason="max_tokens")


@pytest.mark.parametrize("brain", [Brain(overrides=[cut_off_once])])
def test_a_reply_cut_at_max_tokens_continues_with_a_nudge_to_be_brief(world: World) -> None:
    ctx = world.context()
    assert research_tools(Plan(sub_questions=[SUBS[0]]), ctx, options()) == []
    reqs = world.fake.message_requests
    assert reqs[1].last_user_text == NUDGE_BRIEF and len(reqs) == 5
    assert len(ctx.notebook.findings()) == 1


# -- step limit -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("brain", [Brain(always_search=True)])
def test_the_step_limit_is_honoured_with_one_wrap_up_turn(world: World) -> None:
    ctx = world.context()
    assert research_tools(Plan(sub_questions=[SUBS[0]]), ctx, options(worker_max_steps=4)) == []
    reqs = world.fake.message_requests
    assert len(reqs) == 5  # 4 steps + the wrap-up turn
    assert NOTE_WRAP_UP in reqs[-1].last_user_text and all(NOTE_WRAP_UP not in r.last_user_text for r in reqs[:-1])
    # Searches on turns 1, 3 and 4 ran; the wrap-up turn's search was refused, its record_finding saved.
    assert len(world.api.requests) == 3
    [finding] = ctx.notebook.findings()
    assert finding.quote == PAGES["/q1"][1][0]
    assert isinstance(ctx.events, ListSink)
    last_calls = [e.payload["outcome"] for e in ctx.events.of("tool_call")][-2:]
    assert last_calls[0].startswith("REFUSED") and last_calls[1] == "RECORDED F1"
    assert finished(ctx)["Q1"]["steps"] == 5 and finished(ctx)["Q1"]["ended"] == "step_limit"


# -- budget ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("brain", [Brain(always_search=True)])
def test_a_spent_search_budget_gets_one_last_turn_then_ends_every_worker(world: World) -> None:
    ctx = world.context(BudgetLimits(searches=5, reserve=0.0))
    assert research_tools(Plan(sub_questions=SUBS), ctx, options(worker_max_steps=30)) == []
    assert len(world.api.requests) == 5 and ctx.budget.used().searches == 5
    for sq in ("Q1", "Q2", "Q3"):
        reqs = world.requests_of(sq)
        told = [i for i, r in enumerate(reqs) if NOTE_BUDGET in r.last_user_text]
        assert told == [len(reqs) - 1]  # told once, on its last turn
        assert any(t.startswith("BUDGET_EXHAUSTED") for t in result_texts(reqs[-1]))
        assert finished(ctx)[sq]["ended"] == "budget"


@pytest.mark.parametrize("brain", [Brain(always_search=True)])
@pytest.mark.parametrize("limits", [BudgetLimits(model_calls=10, reserve=0.3),
                                    BudgetLimits(cost_usd=0.05, reserve=0.3)], ids=["calls", "dollars"])
def test_a_refused_model_call_ends_the_workers_and_the_shared_budget_is_never_overspent(
        world: World, limits: BudgetLimits) -> None:
    ctx = world.context(limits)
    assert research_tools(Plan(sub_questions=SUBS), ctx, options(worker_max_steps=30)) == []
    used = ctx.budget.used()
    assert used.model_calls == len(world.fake.message_requests)
    assert used.model_calls <= limits.model_calls * (1 - limits.reserve)
    assert used.cost_usd <= limits.cost_usd * (1 - limits.reserve)
    assert {p["ended"] for p in finished(ctx).values()} == {"budget"} and len(finished(ctx)) == 3


# -- failures -------------------------------------------------------------------------------------------------------
def test_a_worker_whose_model_calls_keep_failing_is_a_problem_while_the_others_finish(world: World) -> None:
    world.fake.fault(lambda r: sub_question_id(r) == "Q2" and len(r.messages) > 1, status=500, times=None)
    ctx = world.context()
    problems = research_tools(Plan(sub_questions=SUBS), ctx, options())
    [problem] = problems
    assert (problem.kind, problem.step) == ("worker_failed", "research")
    assert "Q2" in problem.message and "server error" in problem.message and "sk-ant" not in problem.message
    assert sorted(f.sub_question for f in ctx.notebook.findings()) == ["Q1", "Q3"]
    assert finished(ctx)["Q2"] == {"name": "worker", "sub_question": "Q2", "status": "finished", "steps": 1,
                                   "ended": "failed", "findings": 0}
    assert len(world.requests_of("Q2")) == 3  # turn 1, then turn 2 and its one retry


def test_an_empty_plan_runs_no_worker(world: World) -> None:
    ctx = world.context()
    assert research_tools(Plan(), ctx, options()) == [] and world.fake.message_requests == []


# -- page text out of later turns ---------------------------------------------------------------------------------
def every_result(req: MessagesRequest) -> list[str]:
    """The text of every tool result in the conversation, in order."""
    return [str(b.get("content")) for m in req.messages if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"]


def two_pages_then_finish(req: MessagesRequest) -> FakeReply | None:
    """Fetch Q1's page, record from it, fetch Q2's page and record nothing, then finish."""
    names = [c["name"] for c in calls_so_far(req)]
    if names == ["web_search", "fetch_page", "record_finding"]:
        search = "".join(str(b.get("content")) for b in req.messages[2]["content"] if b.get("type") == "tool_result")
        urls = re.findall(r"^   url: (\S+)$", search, re.M)
        return reply_tool_use("fetch_page", {"url": next(u for u in urls if not u.endswith("/q1")), "focus": "other"})
    if len(names) == 4:
        return reply_text("Summary: F1 answers it; the ferry page was not needed.")
    return None


@pytest.mark.parametrize("brain", [Brain(overrides=[two_pages_then_finish])])
def test_a_page_is_taken_out_of_later_turns_once_a_finding_is_recorded_from_it(world: World) -> None:
    ctx = world.context()
    assert research_tools(Plan(sub_questions=[SUBS[0]]), ctx, options()) == []
    reqs = world.fake.message_requests
    assert len(reqs) == 5
    first_page = PAGES["/q1"][1][1]
    s1 = [t for t in every_result(reqs[3]) if t.startswith("PAGE S1")]
    # Turn 3 reads S1 and records F1 from it; from turn 4 on, S1 is its PAGE line and a note naming F1.
    assert first_page in str(reqs[2].messages) and first_page not in str(reqs[3].messages)
    assert len(s1) == 1 and s1[0].split("\n")[1] == PAGE_READ.format(source="S1", findings="F1")
    # S2 had nothing recorded from it, so its text stays for a later turn (the wrap-up) to record from.
    [s2] = [t for t in every_result(reqs[4]) if t.startswith("PAGE S2")]
    assert "<untrusted_page" in s2 and "PAGE_TEXT_REMOVED" not in s2
    # Taken out once: every later request repeats the earlier one's messages unchanged.
    assert reqs[4].messages[:len(reqs[3].messages) - 1] == reqs[3].messages[:-1]


# -- the workers' shared prefix, cached once ---------------------------------------------------------------------
def test_the_workers_prefix_is_written_once_beside_the_plan_and_read_by_every_worker() -> None:
    from pipeline.research.steps.worker import warm_workers
    from tests.fakes.anthropic_api import FakeAnthropic as Fake

    brain = Brain(latency=0.05)
    with WebServer({path: Route.html(article(*page)) for path, page in PAGES.items()}) as web:
        hits = [Hit(title, web.url(path), f"About {title.lower()}.") for path, (title, _) in PAGES.items()]
        with FakeSearchApi("brave", hits, api_key="k") as api, Fake(brain) as fake:
            world = World(fake, web, api)
            ctx = world.context()
            warm_workers(ctx).join()
            assert research_tools(Plan(sub_questions=SUBS), ctx, options()) == []
            usage = [r.response["usage"] for r in fake.requests if "usage" in (r.response or {})]  # type: ignore[index]
    warm, *firsts = usage[:4]
    prefix = warm["cache_creation_input_tokens"]
    assert prefix > 1000 and warm["cache_read_input_tokens"] == 0
    # The three workers start at once and each reads the prefix; none writes it again.
    assert all(u["cache_read_input_tokens"] >= prefix - 100 and u["cache_creation_input_tokens"] < 200
               for u in firsts), usage[:4]


def test_without_warming_workers_that_start_together_each_write_the_prefix(world: World) -> None:
    """The control: the fake's cache is readable only once a request is answered, as the real API's is."""
    world.fake.brain = Brain(latency=0.05)  # type: ignore[assignment]
    ctx = world.context()
    assert research_tools(Plan(sub_questions=SUBS), ctx, options()) == []
    firsts = [r.response["usage"] for r in world.fake.requests if "usage" in (r.response or {})][:3]  # type: ignore[index]
    assert all(u["cache_creation_input_tokens"] > 1000 and u["cache_read_input_tokens"] == 0 for u in firsts)


# -- the first search, run by code; findings judged while the worker goes on ------------------------------------
def test_code_runs_the_first_search_so_the_first_turn_fetches(world: World) -> None:
    ctx = world.context()
    assert research_tools(Plan(sub_questions=[SUBS[0]]), ctx, options(first_search="code")) == []
    [finding] = ctx.notebook.findings()
    assert finding.quote == PAGES["/q1"][1][0]
    reqs = world.fake.message_requests
    first = reqs[0].user_texts[0]
    assert first.startswith(first_message(SUBS[0]))
    assert '<search_results>\nSEARCH_RESULTS for "river report date"' in first
    assert [b["name"] for b in calls_so_far(reqs[-1])] == ["fetch_page", "record_finding"]  # no search turn
    assert len(reqs) == 3 and finished(ctx)["Q1"]["steps"] == 3
    assert [r.params["q"] for r in world.api.requests] == ["river report date"] and ctx.budget.used().searches == 1


def _search_first_again(req: MessagesRequest) -> FakeReply | None:
    if not calls_so_far(req):
        return reply_tool_use("web_search", {"query": "river report date"})
    return None


@pytest.mark.parametrize("brain", [Brain(overrides=[_search_first_again])])
def test_the_model_repeating_the_code_search_gets_repeated_call_and_spends_nothing(world: World) -> None:
    ctx = world.context()
    research_tools(Plan(sub_questions=[SUBS[0]]), ctx, options(first_search="code"))
    assert result_texts(world.fake.message_requests[1])[0].startswith("REPEATED_CALL")
    assert len(world.api.requests) == 1 and ctx.budget.used().searches == 1


def test_with_the_search_budget_spent_before_the_first_search_no_model_call_is_made(world: World) -> None:
    ctx = world.context(limits=BudgetLimits(searches=0))
    assert research_tools(Plan(sub_questions=[SUBS[0]]), ctx, options(first_search="code")) == []
    assert world.fake.message_requests == [] and world.api.requests == []
    assert finished(ctx)["Q1"]["ended"] == "budget" and finished(ctx)["Q1"]["steps"] == 0


def test_without_first_search_code_the_worker_searches_first_as_runs_recorded_before(world: World) -> None:
    ctx = world.context()
    research_tools(Plan(sub_questions=[SUBS[0]]), ctx, options(first_search="model"))
    reqs = world.fake.message_requests
    assert reqs[0].user_texts[0] == first_message(SUBS[0]) and calls_so_far(reqs[1])[0]["name"] == "web_search"


def test_each_finding_is_handed_to_the_judge_while_its_worker_goes_on(world: World) -> None:
    ctx = world.context()
    handed: list[tuple[str, int]] = []  # (finding id, model requests of the run when it was handed in)

    def judge(findings: list[Any]) -> None:
        handed.extend((f.id, len(world.fake.message_requests)) for f in findings)

    assert research_tools(Plan(sub_questions=[SUBS[0]]), ctx, options(), judge=judge) == []
    assert [fid for fid, _ in handed] == [f.id for f in ctx.notebook.findings()] == ["F1"]
    assert handed[0][1] < len(world.fake.message_requests)  # before the worker's last turn was asked for
