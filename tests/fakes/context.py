"""A RunContext wired to loopback fakes, for tests of the steps.

    with FakeAnthropic(brain) as fake, FakeSearchApi("brave", hits, api_key="k") as api, WebServer(routes) as web:
        ctx = make_context(fake, search_base_url=api.base_url, fetch_allow_raw=web.host_port)
        plan = make_plan("question", ctx, RunOptions())
        ctx.events.of("step")            # events go to a ListSink unless `events=` is given

The real LLM (the anthropic SDK against the fake's base_url), a Brave provider pointed at `search_base_url`
(key "k"), a real Fetcher (pass `resolve=` to map made-up host names such as "alpha.test" to 127.0.0.1, and
list them as host:port in `fetch_allow_raw`), a fresh Notebook and one shared Budget (`limits`). Keyword
arguments not named here are Settings fields (e.g. lead_model=..., model_max_retries=...). Without
`search_base_url`, searches go to a closed loopback port and fail fast. SDK retries default to 1, so a
persistent injected fault costs two requests.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pipeline.config import Settings
from pipeline.core.budget import Budget
from pipeline.core.events import EventSink, ListSink
from pipeline.core.notebook import Notebook
from pipeline.core.schema import BudgetLimits
from pipeline.models.anthropic import LLM
from pipeline.research.context import RunContext
from pipeline.web.fetch import Fetcher
from pipeline.web.guard import default_resolver
from pipeline.web.search.service import SearchService, make_provider

API_KEY = "sk-ant-test"
SEARCH_KEY = "k"
CLOSED_PORT_URL = "http://127.0.0.1:9"  # the discard port: nothing listens, the connection is refused at once


class HasBaseUrl(Protocol):
    @property
    def base_url(self) -> str: ...


def static_resolver(*hosts: str, ip: str = "127.0.0.1") -> Callable[[str, int], Sequence[str]]:
    """A resolver mapping each of `hosts` to `ip` (no real lookup); any other name fails as unknown."""
    known = {h.lower() for h in hosts}

    def resolve(host: str, port: int) -> Sequence[str]:
        if host.lower() in known:
            return [ip]
        raise OSError(f"unknown test host {host!r}")

    return resolve


def make_context(fake: HasBaseUrl, *, search_base_url: str | None = None, limits: BudgetLimits | None = None,
                 events: EventSink | None = None, resolve: Callable[[str, int], Sequence[str]] | None = None,
                 **settings: Any) -> RunContext:
    """A RunContext whose model, search and pages are all local fakes; `settings` override Settings fields."""
    fields: dict[str, Any] = {
        "anthropic_api_key": API_KEY, "anthropic_base_url": fake.base_url, "search_provider": "brave",
        "brave_api_key": SEARCH_KEY, "search_base_url": search_base_url or CLOSED_PORT_URL,
        "model_max_retries": 1, "model_timeout": 10.0, **settings,
    }
    config = Settings(**fields)
    sink = events if events is not None else ListSink()
    budget = Budget(limits or BudgetLimits(), config.price)
    return RunContext(
        settings=config, llm=LLM(config, budget, sink), budget=budget, notebook=Notebook(),
        search=SearchService(make_provider(config, sleep=lambda _s: None), budget, sink),
        fetcher=Fetcher(config, resolve=resolve or default_resolver, budget=budget, events=sink),
        events=sink,
    )
