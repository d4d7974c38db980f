"""The fixed-mode researcher against a local search API and local web servers: ranking, host diversity, skipped
failures, the fetch budget, one fetch per URL, and source ids that do not depend on thread timing."""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from pipeline.core.schema import BudgetLimits, Plan, RunOptions, SubQuestion
from pipeline.research.context import RunContext
from pipeline.research.steps.research import Candidate, rank, research_fixed
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.context import make_context, static_resolver
from tests.fakes.search_apis import FakeSearchApi, Hit, Request
from tests.fakes.web_server import Route, WebServer

HOSTS = ("alpha.test", "www.alpha.test", "beta.test", "gamma.test")


class QuerySearchApi(FakeSearchApi):
    """The fake Brave API, answering each query with its own hit list (unknown queries: no results)."""

    def __init__(self, by_query: dict[str, list[Hit]]):
        super().__init__("brave", [], api_key="k")
        self.by_query = by_query
        self._answer_lock = threading.Lock()

    def answer(self, request: Request, zero: bool = False) -> tuple[int, dict[str, Any]]:
        with self._answer_lock:
            self.hits = self.by_query.get(request.params.get("q", ""), [])
            return super().answer(request, zero)


def page(title: str, sentence: str) -> Route:
    body = f"<html><head><title>{title}</title></head><body><article><h1>{title}</h1>" + \
           "".join(f"<p>{sentence} Paragraph {i} adds enough words for the extractor to keep it.</p>"
                   for i in range(4)) + "</article></body></html>"
    return Route.html(body)


class Web:
    """One web server reachable under several made-up host names, plus the search API."""

    def __init__(self, stack: ExitStack, routes: dict[str, Route], by_query: dict[str, list[Hit]]):
        self.server = stack.enter_context(WebServer(routes))
        self.search = stack.enter_context(QuerySearchApi(by_query))
        self.fake = stack.enter_context(FakeAnthropic())

    def url(self, host: str, path: str) -> str:
        return self.server.url(path, host=host)

    def context(self, **kw: Any) -> RunContext:
        allow = ",".join(f"{h}:{self.server.port}" for h in HOSTS)
        return make_context(self.fake, search_base_url=self.search.base_url, fetch_allow_raw=allow,
                            resolve=static_resolver(*HOSTS), **kw)


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as s:
        yield s


def hit(web_url: str, title: str = "t") -> Hit:
    return Hit(title, web_url, "snippet")


def test_rank_prefers_best_rank_then_more_queries_then_spreads_hosts() -> None:
    def c(url: str, host: str, best: int, hits: int, first: int) -> Candidate:
        return Candidate(url, url, host, best, hits, first)

    a1, a2, a3 = c("a1", "a", 0, 1, 0), c("a2", "a", 1, 1, 1), c("a3", "a", 0, 1, 3)
    b1, g1 = c("b1", "b", 2, 2, 2), c("g1", "g", 1, 2, 4)
    # By rank: a1 (0), a3 (0), g1 (1, found twice), a2 (1), b1 (2); then one page per host per round.
    assert [x.url for x in rank([a1, a2, b1, a3, g1])] == ["a1", "g1", "b1", "a3", "a2"]


def test_fixed_researcher_ranks_diversifies_skips_a_403_and_fetches_each_url_once(stack: ExitStack) -> None:
    routes = {"/a1": page("A one", "Alpha one."), "/a2": page("A two", "Alpha two."),
              "/a3": page("A three", "Alpha three."), "/b1": page("B one", "Beta one."),
              "/g1": Route.html("<p>Forbidden</p>", status=403)}
    web: Web
    by_query: dict[str, list[Hit]] = {}
    web = Web(stack, routes, by_query)
    a1, a2, a3, b1, g1 = (web.url(h, p) for h, p in (("alpha.test", "/a1"), ("alpha.test", "/a2"),
                                                      ("www.alpha.test", "/a3"), ("beta.test", "/b1"),
                                                      ("gamma.test", "/g1")))
    by_query["first query"] = [hit(a1), hit(a2), hit(b1)]
    # The same page again under a tracking parameter, and b1 again: merged, not fetched twice.
    by_query["second query"] = [hit(a3), hit(g1), hit(b1), hit(a1 + "?utm_source=x")]
    plan = Plan(sub_questions=[SubQuestion(id="Q1", question="q", queries=["first query", "second query"])])
    ctx = web.context()
    out = research_fixed(plan, ctx, RunOptions(results_per_query=5, pages_per_sub_question=3))
    # Wave 1: a1, g1, b1 (one per host; www.alpha.test counts as alpha.test); g1 is 403, so wave 2 tries a3.
    by_id = {s.id: s.url for s in ctx.notebook.sources()}
    assert [by_id[sid] for sid in out["Q1"]] == [a1, b1, a3]
    assert out == {"Q1": ["S1", "S2", "S3"]}
    assert {p: web.server.count(p) for p in routes} == {"/a1": 1, "/a2": 0, "/a3": 1, "/b1": 1, "/g1": 1}
    assert [r.params["q"] for r in web.search.requests] == ["first query", "second query"]
    assert all(r.params["count"] == "5" for r in web.search.requests)
    steps = [e.payload for e in ctx.events.of("step")]  # type: ignore[attr-defined]
    assert [(s["name"], s["status"]) for s in steps] == [("research", "started"), ("research", "finished")]
    assert steps[-1]["budget_stopped"] is False


def test_fetch_budget_is_respected_and_shared_fairly(stack: ExitStack) -> None:
    routes = {f"/{h[0]}{i}": page(f"{h} {i}", f"Page {i} of {h}.") for h in ("alpha", "beta") for i in (1, 2, 3)}
    by_query: dict[str, list[Hit]] = {}
    web = Web(stack, routes, by_query)
    by_query["alpha"] = [hit(web.url("alpha.test", f"/a{i}")) for i in (1, 2, 3)]
    by_query["beta"] = [hit(web.url("beta.test", f"/b{i}")) for i in (1, 2, 3)]
    plan = Plan(sub_questions=[SubQuestion(id="Q1", question="a", queries=["alpha"]),
                               SubQuestion(id="Q2", question="b", queries=["beta"])])
    # 4 fetches with half held in reserve: research may fetch 2 pages.
    ctx = web.context(limits=BudgetLimits(fetches=4, reserve=0.5))
    out = research_fixed(plan, ctx, RunOptions(pages_per_sub_question=3))
    assert out == {"Q1": ["S1"], "Q2": ["S2"]}  # each sub-question gets its best page before any gets a second
    assert ctx.budget.used().fetches == 2 and web.server.count() == 2
    assert web.server.count("/a1") == 1 and web.server.count("/b1") == 1
    # No fetch was even attempted that the budget could not pay: waves are sized to what is left.
    fetches = [e.payload for e in ctx.events.of("fetch")]  # type: ignore[attr-defined]
    assert len(fetches) == 2 and all(p["ok"] for p in fetches)
    assert ctx.events.of("step")[-1].payload["budget_stopped"] is True  # type: ignore[attr-defined]


def test_shared_page_is_fetched_once_and_ids_follow_plan_order_not_timing(stack: ExitStack) -> None:
    slow = page("Slow", "A slow page.")
    routes = {"/slow": Route(status=200, headers=slow.headers, body=slow.body, drip=0.0005),
              "/fast": page("Fast", "A fast page."), "/shared": page("Shared", "A page both need.")}
    by_query: dict[str, list[Hit]] = {}
    web = Web(stack, routes, by_query)
    by_query["one"] = [hit(web.url("alpha.test", "/slow")), hit(web.url("gamma.test", "/shared"))]
    by_query["two"] = [hit(web.url("beta.test", "/fast")), hit(web.url("gamma.test", "/shared"))]
    plan = Plan(sub_questions=[SubQuestion(id="Q1", question="a", queries=["one"]),
                               SubQuestion(id="Q2", question="b", queries=["two"])])
    ctx = web.context()
    out = research_fixed(plan, ctx, RunOptions(pages_per_sub_question=2))
    urls = {s.id: s.url.rsplit("/", 1)[-1] for s in ctx.notebook.sources()}
    # /slow finishes last, yet is S1: sources enter the notebook in plan order once the wave is done.
    assert {k: [urls[s] for s in v] for k, v in out.items()} == {"Q1": ["slow", "shared"], "Q2": ["fast", "shared"]}
    assert out == {"Q1": ["S1", "S2"], "Q2": ["S3", "S2"]}
    assert web.server.count("/shared") == 1 and ctx.budget.used().fetches == 3


def test_no_results_and_failed_searches_leave_an_empty_list(stack: ExitStack) -> None:
    web = Web(stack, {}, {})
    plan = Plan(sub_questions=[SubQuestion(id="Q1", question="a", queries=["nothing matches"])])
    ctx = web.context()
    assert research_fixed(plan, ctx, RunOptions()) == {"Q1": []}
    assert ctx.notebook.sources() == [] and web.server.count() == 0


def test_a_redirect_to_a_page_already_taken_does_not_fill_a_slot(stack: ExitStack) -> None:
    routes = {"/a1": page("A one", "Alpha one."), "/b1": page("B one", "Beta one.")}
    by_query: dict[str, list[Hit]] = {}
    web = Web(stack, routes, by_query)
    a1 = web.url("alpha.test", "/a1")
    web.server.route("/moved", Route.redirect(a1))
    by_query["q"] = [hit(a1), hit(web.url("beta.test", "/moved")), hit(web.url("gamma.test", "/b1"))]
    plan = Plan(sub_questions=[SubQuestion(id="Q1", question="q", queries=["q"])])
    ctx = web.context()
    out = research_fixed(plan, ctx, RunOptions(pages_per_sub_question=2))
    assert [ctx.notebook.resolve_source(s).url.rsplit("/", 1)[-1] for s in out["Q1"]] == ["a1", "b1"]  # type: ignore[union-attr]
    assert web.server.count("/moved") == 1
