"""Search providers against local fakes of their documented APIs (parsing, retries, faults, keys); the service."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import httpx
import pytest

from pipeline.cli.commands import search_results
from pipeline.config import ConfigError, Settings
from pipeline.core.budget import Budget, Phase
from pipeline.core.events import ListSink
from pipeline.core.schema import BudgetLimits, SearchResult
from pipeline.models.anthropic import LLM
from pipeline.models.base import LLMError
from pipeline.web.search.service import (
    AnthropicWebSearch,
    BraveSearch,
    SearchFailed,
    SearchService,
    SearxngSearch,
    TavilySearch,
    make_provider,
    parse_web_search_blocks,
)
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.search_apis import Canned, FakeSearchApi, Hit, Kind

KEY = "test-key-5f3a9c81d2"
KINDS: list[Kind] = ["brave", "tavily", "searxng"]
HITS = [
    Hit("Europa&#39;s <b>plumes</b>", "https://example.org/europa", "Water <strong>plumes</strong> &amp; vapour",
        "2019-11-18T10:00:00"),
    Hit("Titan map", "https://example.org/titan", "The first <strong>global</strong> map", None),
    Hit("Third", "https://example.org/third", "third snippet", "2019-11-20T00:00:00"),
]


class Sleeps(list[float]):
    """Records the waits a provider asked for instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(trust_env=False, timeout=httpx.Timeout(2.0)) as client:
        yield client


def provider_for(kind: Kind, api: FakeSearchApi, http: httpx.Client, sleep: Callable[[float], None],
                 key: str = KEY, today: Callable[[], date] = date.today) -> Any:
    if kind == "brave":
        return BraveSearch(key, http, base_url=api.base_url, sleep=sleep, today=today)
    if kind == "tavily":
        return TavilySearch(key, http, base_url=api.base_url, sleep=sleep)
    return SearxngSearch(api.base_url, http, sleep=sleep)


@pytest.fixture(params=KINDS)
def fake(request: pytest.FixtureRequest) -> Iterator[FakeSearchApi]:
    kind: Kind = request.param
    with FakeSearchApi(kind, HITS, api_key=None if kind == "searxng" else KEY) as api:
        yield api


def test_results_are_parsed_with_markup_stripped_and_dates_normalised(fake: FakeSearchApi, http: httpx.Client) -> None:
    results = provider_for(fake.kind, fake, http, Sleeps()).search("europa plumes", n=3)
    assert results[0] == SearchResult(title="Europa's plumes", url="https://example.org/europa",
                                      snippet="Water plumes & vapour", published="2019-11-18")
    assert results[1].snippet == "The first global map" and results[1].published is None
    assert [r.url for r in results] == [h.url for h in HITS]
    assert len(fake.requests) == 1


def test_n_limits_the_results(fake: FakeSearchApi, http: httpx.Client) -> None:
    assert len(provider_for(fake.kind, fake, http, Sleeps()).search("q", n=2)) == 2


def test_429_waits_retry_after_then_succeeds(fake: FakeSearchApi, http: httpx.Client) -> None:
    fake.fail_next(Canned.rate_limited(retry_after="7"))
    sleeps = Sleeps()
    results = provider_for(fake.kind, fake, http, sleeps).search("q")
    assert len(results) == 3
    assert sleeps == [7.0]
    assert len(fake.requests) == 2


def test_429_without_retry_after_backs_off(fake: FakeSearchApi, http: httpx.Client) -> None:
    fake.fail_next(Canned.rate_limited(retry_after=None))
    sleeps = Sleeps()
    assert provider_for(fake.kind, fake, http, sleeps).search("q")
    assert sleeps == [1.0]


def test_429_asking_for_too_long_fails_at_once(fake: FakeSearchApi, http: httpx.Client) -> None:
    fake.fail_next(Canned.rate_limited(retry_after="3600"))
    sleeps = Sleeps()
    with pytest.raises(SearchFailed, match="rate-limiting us for 3600 s"):
        provider_for(fake.kind, fake, http, sleeps).search("q")
    assert sleeps == [] and len(fake.requests) == 1


def test_500_twice_then_success(fake: FakeSearchApi, http: httpx.Client) -> None:
    fake.fail_next(Canned.server_error(500), Canned.server_error(502))
    sleeps = Sleeps()
    results = provider_for(fake.kind, fake, http, sleeps).search("q")
    assert [r.url for r in results] == [h.url for h in HITS]
    assert sleeps == [1.0, 2.0]
    assert len(fake.requests) == 3


def test_500_three_times_is_search_failed_for_the_model(fake: FakeSearchApi, http: httpx.Client) -> None:
    fake.fail_next(*[Canned.server_error(503)] * 3)
    sleeps = Sleeps()
    with pytest.raises(SearchFailed) as failed:
        provider_for(fake.kind, fake, http, sleeps).search("q")
    assert str(failed.value) == ("SEARCH_FAILED: the search service is unavailable (HTTP 503 after 3 tries); "
                                 "try again later or use what you have.")
    assert len(fake.requests) == 3 and sleeps == [1.0, 2.0]


def test_connection_reset_is_retried(fake: FakeSearchApi, http: httpx.Client) -> None:
    fake.fail_next(Canned.connection_reset())
    sleeps = Sleeps()
    assert len(provider_for(fake.kind, fake, http, sleeps).search("q")) == 3
    assert sleeps == [1.0] and len(fake.requests) == 2


def test_timeout_is_retried(fake: FakeSearchApi) -> None:
    fake.fail_next(Canned.stall(1.0))
    sleeps = Sleeps()
    with httpx.Client(trust_env=False, timeout=httpx.Timeout(0.3)) as quick:
        assert len(provider_for(fake.kind, fake, quick, sleeps).search("q")) == 3
    assert sleeps == [1.0]


def test_zero_results_is_an_empty_list(fake: FakeSearchApi, http: httpx.Client) -> None:
    fake.fail_next(Canned.zero_results())
    assert provider_for(fake.kind, fake, http, Sleeps()).search("nothing matches this") == []
    assert len(fake.requests) == 1


def test_malformed_json_fails_without_retry(fake: FakeSearchApi, http: httpx.Client) -> None:
    fake.fail_next(Canned.malformed())
    sleeps = Sleeps()
    with pytest.raises(SearchFailed, match="not JSON"):
        provider_for(fake.kind, fake, http, sleeps).search("q")
    assert len(fake.requests) == 1 and sleeps == []


def test_json_of_the_wrong_shape_fails_clearly(fake: FakeSearchApi, http: httpx.Client) -> None:
    fake.fail_next(Canned.wrong_shape())
    with pytest.raises(SearchFailed, match="unexpected shape"):
        provider_for(fake.kind, fake, http, Sleeps()).search("q")


@pytest.mark.parametrize("body", [b'{"status": "ok", "items": []}', b'{}', b'{"type": "news", "web": null}'])
def test_json_from_another_service_is_a_shape_error_naming_the_base_url_not_no_results(
        fake: FakeSearchApi, http: httpx.Client, body: bytes) -> None:
    # A base URL pointing at the wrong service answers 200 with JSON that has no results: that is not "none found".
    fake.fail_next(Canned(status=200, body=body, headers={"Content-Type": "application/json"}))
    with pytest.raises(SearchFailed, match="unexpected shape.*RESEARCH_SEARCH_BASE_URL"):
        provider_for(fake.kind, fake, http, Sleeps()).search("q")


def test_other_4xx_is_not_retried_and_never_echoes_the_key(fake: FakeSearchApi, http: httpx.Client) -> None:
    fake.fail_next(Canned(status=422, body=f'{{"error": "bad query", "token": "{KEY}"}}'.encode(),
                          headers={"Content-Type": "application/json"}))
    sleeps = Sleeps()
    with pytest.raises(SearchFailed, match="HTTP 422") as failed:
        provider_for(fake.kind, fake, http, sleeps).search("q")
    assert "bad query" in str(failed.value)
    if fake.kind != "searxng":  # SearXNG has no key; for the others the echoed key must be scrubbed
        assert KEY not in str(failed.value) and "[redacted]" in str(failed.value)
    assert len(fake.requests) == 1 and sleeps == []


@pytest.mark.parametrize("kind,header,value", [("brave", "x-subscription-token", KEY),
                                               ("tavily", "authorization", f"Bearer {KEY}")])
def test_key_is_sent_as_a_header_and_a_bad_key_says_which_variable(kind: Kind, header: str, value: str,
                                                                   http: httpx.Client) -> None:
    with FakeSearchApi(kind, HITS, api_key=KEY) as api:
        provider_for(kind, api, http, Sleeps()).search("q")
        sent = api.requests[0]
        assert sent.headers[header] == value
        assert KEY not in json.dumps(sent.params) and KEY not in json.dumps(sent.json)
        wrong = "wrong-key-0000000000"
        with pytest.raises(SearchFailed, match="HTTP 401") as failed:
            provider_for(kind, api, http, Sleeps(), key=wrong).search("q")
        assert f"check {kind.upper()}_API_KEY" in str(failed.value)
        assert wrong not in str(failed.value)
        assert len(api.requests) == 2


def test_searxng_403_explains_the_json_format_setting(http: httpx.Client) -> None:
    with FakeSearchApi("searxng", HITS) as api:
        api.fail_next(Canned(status=403, body=b"Forbidden"))
        with pytest.raises(SearchFailed, match=r"enable `json` under search.formats"):
            provider_for("searxng", api, http, Sleeps()).search("q")


def _sent_window(api: FakeSearchApi) -> object:
    last = api.requests[-1]
    if api.kind == "brave":
        return last.params.get("freshness")
    if api.kind == "tavily":
        return (last.json or {}).get("time_range")
    return last.params.get("time_range")


def test_recency_maps_to_each_providers_parameter(fake: FakeSearchApi, http: httpx.Client) -> None:
    provider = provider_for(fake.kind, fake, http, Sleeps(), today=lambda: date(2024, 3, 31))
    seen = []
    for days in (None, 1, 7, 30, 365, 1000):
        provider.search("q", recency_days=days)
        seen.append(_sent_window(fake))
    expected = {
        "brave": [None, "pd", "pw", "pm", "py", "2021-07-05to2024-03-31"],
        "tavily": [None, "day", "week", "month", "year", None],
        "searxng": [None, "day", "week", "month", "year", None],
    }[fake.kind]
    assert seen == expected


def test_requests_carry_query_and_count(http: httpx.Client) -> None:
    with FakeSearchApi("brave", HITS, api_key=KEY) as brave, FakeSearchApi("tavily", HITS, api_key=KEY) as tavily, \
            FakeSearchApi("searxng", HITS) as searxng:
        provider_for("brave", brave, http, Sleeps()).search("moon water", n=50)
        provider_for("tavily", tavily, http, Sleeps()).search("moon water", n=4)
        provider_for("searxng", searxng, http, Sleeps()).search("moon water", n=4)
    assert brave.requests[0].params["q"] == "moon water" and brave.requests[0].params["count"] == "20"
    assert tavily.requests[0].json["query"] == "moon water" and tavily.requests[0].json["max_results"] == 4
    assert searxng.requests[0].params == {"q": "moon water", "format": "json", "pageno": "1"}


# --- make_provider and the CLI entry -----------------------------------------------------------------------

def test_make_provider_needs_the_key_of_the_chosen_provider() -> None:
    with pytest.raises(ConfigError, match="BRAVE_API_KEY"):
        make_provider(Settings(search_provider="brave"))
    with pytest.raises(ConfigError, match="RESEARCH_SEARXNG_URL"):
        make_provider(Settings(search_provider="searxng"))


@pytest.mark.parametrize("kind", KINDS)
def test_make_provider_uses_the_base_url_override(kind: Kind, http: httpx.Client) -> None:
    with FakeSearchApi(kind, HITS, api_key=None if kind == "searxng" else KEY) as api:
        settings = Settings(search_provider=kind, brave_api_key=KEY, tavily_api_key=KEY,
                            searxng_url="http://127.0.0.1:9/unused", search_base_url=api.base_url)
        provider = make_provider(settings, http=http)
        assert provider.name == kind
        assert [r.url for r in provider.search("q")] == [h.url for h in HITS]


def test_search_command_results_with_searxng(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeSearchApi("searxng", HITS) as api:
        monkeypatch.setenv("RESEARCH_SEARCH_PROVIDER", "searxng")
        monkeypatch.setenv("RESEARCH_SEARXNG_URL", api.base_url)
        results = search_results("titan", Settings(), n=2)
    assert [r.title for r in results] == ["Europa's plumes", "Titan map"]


def test_cli_search_json_prints_the_documented_list() -> None:
    root = Path(__file__).resolve().parents[1]
    with FakeSearchApi("searxng", HITS) as api:
        env = {**os.environ, "RESEARCH_SEARCH_PROVIDER": "searxng", "RESEARCH_SEARXNG_URL": api.base_url}
        done = subprocess.run([sys.executable, "-m", "pipeline", "search", "europa", "--json", "-n", "2"],
                              cwd=root, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        {"title": "Europa's plumes", "url": "https://example.org/europa", "snippet": "Water plumes & vapour",
         "published": "2019-11-18"},
        {"title": "Titan map", "url": "https://example.org/titan", "snippet": "The first global map",
         "published": None},
    ]


# --- Anthropic's server-side web search tool ----------------------------------------------------------------

# The documented shape of one turn that used the web_search tool (Messages API content blocks).
ANTHROPIC_TURN: list[dict[str, Any]] = [
    {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "europa plumes"}},
    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": [
        {"type": "web_search_result", "title": "Europa plumes confirmed", "url": "https://example.org/europa",
         "encrypted_content": "EqgfCioIARgBIiQ3YTAw", "page_age": "November 18, 2019"},
        {"type": "web_search_result", "title": "Titan <i>map</i>", "url": "https://example.org/titan",
         "encrypted_content": "Eo8BCioIARgBIiQ4", "page_age": None},
        {"type": "web_search_result", "title": "Europa plumes confirmed", "url": "https://example.org/europa",
         "encrypted_content": "dup", "page_age": None},
    ]},
    {"type": "text", "text": "Plumes were confirmed.", "citations": [
        {"type": "web_search_result_location", "url": "https://example.org/europa", "title": "Europa plumes",
         "encrypted_index": "Eo8BCioIAhgBIiQy", "cited_text": "NASA confirmed water vapour above Europa's surface."},
    ]},
]


def test_parse_web_search_blocks_reads_the_documented_shape() -> None:
    assert parse_web_search_blocks(ANTHROPIC_TURN) == [
        SearchResult(title="Europa plumes confirmed", url="https://example.org/europa",
                     snippet="NASA confirmed water vapour above Europa's surface.", published="2019-11-18"),
        SearchResult(title="Titan map", url="https://example.org/titan", snippet="", published=None),
    ]


def test_an_empty_cited_text_never_becomes_a_snippet() -> None:
    empty_first = {"type": "text", "text": "Cited twice.", "citations": [
        {"type": "web_search_result_location", "url": "https://example.org/titan", "cited_text": "  "},
        {"type": "web_search_result_location", "url": "https://example.org/titan", "cited_text": ""},
        {"type": "web_search_result_location", "url": "https://example.org/titan", "cited_text": "Titan's lakes."},
    ]}
    results = {r.url: r.snippet for r in parse_web_search_blocks([*ANTHROPIC_TURN, empty_first])}
    assert results["https://example.org/titan"] == "Titan's lakes."  # the empty citations did not claim it first
    only_empty = [*ANTHROPIC_TURN[:2], {**empty_first, "citations": empty_first["citations"][:2]}]
    assert {r.url: r.snippet for r in parse_web_search_blocks(only_empty)}["https://example.org/titan"] == ""


def test_parse_web_search_blocks_turns_a_tool_error_into_search_failed() -> None:
    blocks = [{"type": "web_search_tool_result", "tool_use_id": "srvtoolu_02",
               "content": {"type": "web_search_tool_result_error", "error_code": "too_many_requests"}}]
    with pytest.raises(SearchFailed, match="too_many_requests: the search tool is rate-limited"):
        parse_web_search_blocks(blocks)


def test_anthropic_provider_passes_query_n_recency_and_converts_remote_errors() -> None:
    calls: list[tuple[str, int, int | None]] = []

    class RemoteFault(Exception):
        pass

    def server_web_search(query: str, n: int, recency_days: int | None) -> list[dict[str, Any]]:
        calls.append((query, n, recency_days))
        if query == "fail":
            raise RemoteFault("the model service is overloaded (HTTP 529)")
        return ANTHROPIC_TURN

    provider = AnthropicWebSearch(server_web_search, errors=(RemoteFault,))
    assert [r.url for r in provider.search("europa", n=1, recency_days=7)] == ["https://example.org/europa"]
    assert calls == [("europa", 1, 7)]
    with pytest.raises(SearchFailed, match="HTTP 529"):
        provider.search("fail")
    assert make_provider(Settings(search_provider="anthropic", anthropic_api_key="sk-x"),
                         server_web_search=server_web_search).name == "anthropic"


# --- SearchService --------------------------------------------------------------------------------------------

def _service(api: FakeSearchApi, http: httpx.Client, budget: Budget | None, events: ListSink) -> SearchService:
    ticks = iter(range(0, 1000, 2))
    return SearchService(SearxngSearch(api.base_url, http, sleep=Sleeps()), budget, events,
                         clock=lambda: float(next(ticks)))


def test_service_returns_results_spends_budget_and_records_an_event(http: httpx.Client) -> None:
    budget = Budget(BudgetLimits(searches=10), Settings().price)
    events = ListSink()
    with FakeSearchApi("searxng", HITS) as api:
        outcome = _service(api, http, budget, events).search("  europa   plumes ", n=2)
    assert outcome.message is None and [r.title for r in outcome.results] == ["Europa's plumes", "Titan map"]
    assert budget.used().searches == 1
    (event,) = events.of("search")
    assert event.payload["query"] == "europa plumes" and event.payload["provider"] == "searxng"
    assert event.payload["count"] == 2 and event.payload["results"][1]["url"] == "https://example.org/titan"
    assert event.ms == 2000.0


def test_service_budget_refusal_is_a_message_and_no_request(http: httpx.Client) -> None:
    budget = Budget(BudgetLimits(searches=1, reserve=0.0), Settings().price)
    events = ListSink()
    with FakeSearchApi("searxng", HITS) as api:
        service = _service(api, http, budget, events)
        assert service.search("first").results
        refused = service.search("second", phase=Phase.RESEARCH)
        assert len(api.requests) == 1
    assert refused.results == [] and refused.message and refused.message.startswith("BUDGET_EXHAUSTED")
    assert events.of("search")[-1].payload["message"] == refused.message


def test_service_turns_failures_and_empty_answers_into_messages(http: httpx.Client) -> None:
    events = ListSink()
    with FakeSearchApi("searxng", HITS) as api:
        service = _service(api, http, None, events)
        api.fail_next(*[Canned.server_error(500)] * 3)
        failed = service.search("q")
        api.fail_next(Canned.zero_results())
        empty = service.search("zebra quantum")
        blank = service.search("   ")
        assert len(api.requests) == 4
    assert failed.results == [] and failed.message and "HTTP 500 after 3 tries" in failed.message
    assert empty.results == []
    assert empty.message == "NO_RESULTS: the search returned nothing for 'zebra quantum'; try different words."
    assert blank.message and blank.message.startswith("SEARCH_REFUSED")
    assert [e.payload["count"] for e in events.of("search")] == [0, 0, 0]


def test_service_drops_duplicate_urls(http: httpx.Client) -> None:
    twins = [Hit("A", "https://example.org/a?utm_source=x"), Hit("A again", "https://EXAMPLE.org/a/"),
             Hit("B", "https://example.org/b")]
    with FakeSearchApi("searxng", twins) as api:
        outcome = _service(api, http, None, ListSink()).search("a")
    assert [r.title for r in outcome.results] == ["A", "B"]


def test_service_turns_a_failed_anthropic_search_into_a_message() -> None:
    """The run's own server-side search raises LLMError on a remote fault; the model gets a message instead."""
    events = ListSink()
    with FakeAnthropic() as model:
        model.fault(status=500, times=None)
        settings = Settings(search_provider="anthropic", anthropic_api_key="sk-ant-search-test-key",
                            anthropic_base_url=model.base_url, model_max_retries=0)
        budget = Budget(BudgetLimits(), settings.price)
        llm = LLM(settings, budget, events)
        provider = make_provider(settings, server_web_search=llm.server_web_search, model_errors=(LLMError,))
        service = SearchService(provider, budget, events)
        outcome = service.search("europa plumes")
        assert len(model.requests) == 1
    assert outcome.results == [] and outcome.message and outcome.message.startswith("SEARCH_FAILED")
    assert events.of("search")[-1].payload["message"] == outcome.message
