"""The MCP server (`python -m pipeline mcp`) driven as a subprocess over stdio by the `mcp` SDK's own client, against
the local stand-ins: a page server, a Brave-shaped search API and the fake Anthropic API.

Two servers per module: one with no model key (extractive runs work, fixed runs are refused naming the key) and one
with a key on the fake model and a dollar cap (RESEARCH_MCP_MAX_USD) below the presets'. Both record in one run store.
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent

from pipeline.config import ConfigError, Settings
from pipeline.core.schema import BudgetLimits
from pipeline.mcp.limits import PRESETS, McpSettings, limits_for, within
from pipeline.mcp.server import Tools
from pipeline.store.sql import SqliteRunStore
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.research_brain import ResearchBrain
from tests.fakes.search_apis import FakeSearchApi, Hit
from tests.fakes.web_server import Route, WebServer

ROOT = Path(__file__).resolve().parents[1]
MODEL_KEY = "sk-ant-mcp-secret-model-key"
SEARCH_KEY = "brave-mcp-secret-search-key"
CAP_USD = 0.5
TOOLS = {"research", "fetch_page", "search", "list_runs", "get_run", "list_documents"}
QUESTION = "What does Qdrant Cloud pricing start at?"
PARAGRAPHS = {
    "/qdrant": ("Qdrant pricing", ["Qdrant is an open-source vector database with many GitHub stars.",
                                   "Qdrant Cloud pricing starts at 25 dollars per month for the smallest cluster."]),
    "/milvus": ("Milvus pricing", ["Milvus is an open-source vector database with the most GitHub stars.",
                                   "Zilliz Cloud pricing for Milvus starts at 65 dollars per month."]),
}


def _page(title: str, paragraphs: list[str]) -> Route:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return Route.html(f"<html><head><title>{title}</title><meta property='article:published_time' "
                      f"content='2025-01-15'></head><body><article><h1>{title}</h1>{body}</article></body></html>")


class Client:
    """An MCP client session with one server subprocess, used synchronously (the SDK's async client runs in a
    blocking portal's event loop thread)."""

    def __init__(self, env: dict[str, str], errlog: Path) -> None:
        self._stack = ExitStack()
        self.errlog = errlog
        try:
            self.portal: BlockingPortal = self._stack.enter_context(start_blocking_portal())
            params = StdioServerParameters(command=sys.executable, args=["-m", "pipeline", "mcp"], env=env,
                                           cwd=str(ROOT))
            log = self._stack.enter_context(errlog.open("w", encoding="utf-8"))
            read, write = self._stack.enter_context(
                self.portal.wrap_async_context_manager(stdio_client(params, errlog=log)))
            self.session = self._stack.enter_context(
                self.portal.wrap_async_context_manager(ClientSession(read, write)))
            self.portal.call(self.session.initialize)
        except BaseException:
            self._stack.close()
            raise

    def close(self) -> None:
        self._stack.close()

    def tools(self) -> dict[str, Any]:
        listed = self.portal.call(self.session.list_tools)
        return {t.name: t for t in listed.tools}

    def call(self, name: str, args: dict[str, Any], *, progress: bool = False
             ) -> tuple[CallToolResult, list[tuple[float, float | None, str | None]]]:
        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            seen.append((value, total, message))

        async def go() -> CallToolResult:
            return await self.session.call_tool(name, args, read_timeout_seconds=60,
                                                progress_callback=on_progress if progress else None)

        return self.portal.call(go), seen


def text_of(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


@dataclass
class World:
    web: WebServer
    search: FakeSearchApi
    model: FakeAnthropic
    db: Path
    tmp: Path

    def env(self, *, key: bool, **extra: str) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "RESEARCH_"))}
        env = {**base, "RESEARCH_SEARCH_PROVIDER": "brave", "BRAVE_API_KEY": SEARCH_KEY,
               "RESEARCH_SEARCH_BASE_URL": self.search.base_url, "RESEARCH_FETCH_ALLOW": self.web.host_port,
               "RESEARCH_DB": str(self.db), "RESEARCH_MODEL_MAX_RETRIES": "1", **extra}
        if key:
            env |= {"ANTHROPIC_API_KEY": MODEL_KEY, "ANTHROPIC_BASE_URL": self.model.base_url}
        return env


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("mcp")
    with ExitStack() as stack:
        web = stack.enter_context(WebServer({path: _page(t, ps) for path, (t, ps) in PARAGRAPHS.items()}))
        hits = [Hit(title=t, url=web.url(path), snippet="pricing", published=None)
                for path, (t, _) in PARAGRAPHS.items()]
        search = stack.enter_context(FakeSearchApi("brave", hits, api_key=SEARCH_KEY))
        model = stack.enter_context(FakeAnthropic(ResearchBrain(), api_key=MODEL_KEY))
        yield World(web, search, model, tmp / "runs.sqlite", tmp)


@pytest.fixture(scope="module")
def nokey(world: World) -> Iterator[Client]:
    """A server with no model key."""
    client = Client(world.env(key=False), world.tmp / "nokey.log")
    yield client
    client.close()


@pytest.fixture(scope="module")
def keyed(world: World) -> Iterator[Client]:
    """A server with a key on the fake model, and a dollar cap below the standard and large presets."""
    client = Client(world.env(key=True, RESEARCH_MCP_MAX_USD=str(CAP_USD)), world.tmp / "keyed.log")
    yield client
    client.close()


@pytest.fixture(scope="module")
def extractive(nokey: Client) -> tuple[dict[str, Any], list[tuple[float, float | None, str | None]]]:
    """One extractive research on the server without a key, with progress requested."""
    result, progress = nokey.call("research", {"question": QUESTION, "mode": "extractive", "budget": "small"},
                                  progress=True)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content, progress


@pytest.fixture(scope="module")
def fixed(keyed: Client) -> tuple[dict[str, Any], list[tuple[float, float | None, str | None]], str]:
    """One fixed research on the fake model with the large preset, with progress requested."""
    result, progress = keyed.call("research", {"question": QUESTION, "mode": "fixed", "budget": "large"},
                                  progress=True)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content, progress, text_of(result)


def _page_texts() -> str:
    return " ".join(p for _, ps in PARAGRAPHS.values() for p in ps)


def _answered(answer: dict[str, Any], world: World) -> None:
    """A research answer: report, findings whose quotes are in the served pages, their sources, a run id."""
    assert answer["status"] == "complete" and len(answer["run_id"]) == 12
    assert answer["findings"] and answer["sources"] and "[F1]" in answer["report"]
    served = {world.web.url(path) for path in PARAGRAPHS}
    assert {s["final_url"] for s in answer["sources"]} <= served
    ids = {s["id"] for s in answer["sources"]}
    for f in answer["findings"]:
        assert f["quote"] in _page_texts() and f["source"] in ids and f["url"] in served
    assert any("25 dollars" in f["quote"] for f in answer["findings"])


# -- tools and schemas -------------------------------------------------------------------------------------------------

def test_the_tools_are_listed_with_their_schemas(nokey: Client) -> None:
    tools = nokey.tools()
    assert set(tools) == TOOLS
    research = tools["research"].input_schema
    assert set(research["properties"]) == {"question", "mode", "budget", "docs"}
    assert research["required"] == ["question"]
    assert research["properties"]["mode"]["enum"] == ["fixed", "tools", "extractive"]
    assert research["properties"]["budget"]["enum"] == ["small", "standard", "large"]
    assert research["properties"]["question"]["maxLength"] == 2000
    assert set(tools["fetch_page"].input_schema["properties"]) == {"url"}
    assert set(tools["search"].input_schema["properties"]) == {"query", "n"}
    assert set(tools["list_runs"].input_schema["properties"]) == {"limit"}
    assert set(tools["get_run"].input_schema["properties"]) == {"run_id"}
    assert set(tools["list_documents"].input_schema["properties"]) == {"folder"}
    out = tools["research"].output_schema
    assert out is not None and {"run_id", "report", "findings", "sources", "status", "limits"} <= set(out["properties"])
    assert "small: up to" in (tools["research"].description or "")
    for tool in tools.values():  # no tool takes a setting, a limit or a policy
        assert not set(tool.input_schema["properties"]) & {"limits", "settings", "cost_usd", "allow", "max_usd"}


# -- research ----------------------------------------------------------------------------------------------------------

def test_extractive_research_needs_no_key_and_reports_progress(
        extractive: tuple[dict[str, Any], list[tuple[float, float | None, str | None]]], world: World) -> None:
    answer, progress = extractive
    _answered(answer, world)
    assert answer["mode"] == "extractive" and answer["usage"]["model_calls"] == 0
    assert answer["limits"]["model_calls"] == 0 and answer["limits"]["cost_usd"] == 0.0
    messages = [m or "" for _, _, m in progress]
    assert messages[0].startswith(f"run {answer['run_id']} started")
    assert any(m.startswith("search ") for m in messages) and any(m.startswith("fetch ") for m in messages)
    assert messages[-1].startswith(f"run {answer['run_id']} complete")
    values = [v for v, _, _ in progress]
    assert values == sorted(values) and len(set(values)) == len(values)  # progress only increases


def test_fixed_research_without_a_key_is_refused_naming_the_key(nokey: Client) -> None:
    result, _ = nokey.call("research", {"question": QUESTION, "mode": "fixed"})
    assert result.is_error and "ANTHROPIC_API_KEY" in text_of(result) and "extractive" in text_of(result)
    result, _ = nokey.call("research", {"question": QUESTION, "mode": "tools"})
    assert result.is_error and "ANTHROPIC_API_KEY" in text_of(result)


def test_fixed_research_on_the_model_returns_quotes_and_progress(
        fixed: tuple[dict[str, Any], list[tuple[float, float | None, str | None]], str], world: World) -> None:
    answer, progress, text = fixed
    _answered(answer, world)
    assert answer["mode"] == "fixed" and answer["usage"]["model_calls"] > 0
    messages = [m or "" for _, _, m in progress]
    assert messages[0].startswith(f"run {answer['run_id']} started") and any(m.startswith("model ") for m in messages)
    assert json.loads(text)["run_id"] == answer["run_id"]  # the text content is the same answer, as JSON
    everything = json.dumps(answer) + text + json.dumps(progress) + (world.tmp / "keyed.log").read_text()
    assert MODEL_KEY not in everything and SEARCH_KEY not in everything


def test_list_runs_and_get_run_see_the_research_runs(
        nokey: Client, extractive: tuple[dict[str, Any], Any],
        fixed: tuple[dict[str, Any], Any, str]) -> None:
    ids = {extractive[0]["run_id"]: "extractive", fixed[0]["run_id"]: "fixed"}
    result, _ = nokey.call("list_runs", {})
    assert not result.is_error and result.structured_content is not None
    listed = {r["id"]: r for r in result.structured_content["runs"]}
    assert {i: listed[i]["mode"] for i in ids} == ids and all(listed[i]["status"] == "complete" for i in ids)
    for run_id, mode in ids.items():
        detail, _ = nokey.call("get_run", {"run_id": run_id})
        assert not detail.is_error and detail.structured_content is not None
        got = detail.structured_content
        assert got["id"] == run_id and got["mode"] == mode and got["status"] == "complete"
        assert got["answer"]["findings"] and got["answer"]["report"] == (extractive if mode == "extractive"
                                                                         else fixed)[0]["report"]
    one, _ = nokey.call("list_runs", {"limit": 1})
    assert one.structured_content is not None and len(one.structured_content["runs"]) == 1


# -- the budget cap ----------------------------------------------------------------------------------------------------

def test_recorded_limits_never_exceed_the_server_cap(keyed: Client, world: World,
                                                     fixed: tuple[dict[str, Any], Any, str]) -> None:
    cap = McpSettings(max_usd=CAP_USD).cap()
    run_ids = [fixed[0]["run_id"]]
    # A caller sending limits or settings besides a preset changes nothing.
    result, _ = keyed.call("research", {"question": QUESTION, "mode": "extractive", "budget": "large",
                                        "limits": {"searches": 10_000, "cost_usd": 1_000},
                                        "max_usd": 1_000, "settings": {"RESEARCH_FETCH_ALLOW": "*"}})
    assert not result.is_error and result.structured_content is not None
    run_ids.append(result.structured_content["run_id"])
    with SqliteRunStore(world.db) as store:
        for run_id in run_ids:
            row = store.require_run(run_id)
            assert within(row.limits, cap), row.limits
            assert row.limits == limits_for("large", row.mode, cap)  # type: ignore[arg-type]
    assert fixed[0]["limits"]["cost_usd"] == CAP_USD < PRESETS["large"].cost_usd


@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("mode", ["fixed", "tools", "extractive"])
@pytest.mark.parametrize("max_usd", [0.0, 0.1, 0.5, 2.0, 50.0])
def test_every_preset_is_capped(preset: str, mode: str, max_usd: float) -> None:
    cap = McpSettings(max_usd=max_usd).cap()
    limits = limits_for(preset, mode, cap)  # type: ignore[arg-type]
    assert within(limits, cap) and within(limits, BudgetLimits()) and limits.cost_usd <= max_usd
    assert within(limits, PRESETS[preset])  # type: ignore[index]


def test_an_invalid_cap_stops_the_server_before_it_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCH_MCP_MAX_USD", "-1")
    with pytest.raises(ConfigError, match="RESEARCH_MCP_MAX_USD"):
        McpSettings.from_env()
    proc = subprocess.run([sys.executable, "-m", "pipeline", "mcp"], input="", capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={**os.environ, "RESEARCH_MCP_MAX_USD": "lots"})
    assert proc.returncode == 2 and "RESEARCH_MCP_MAX_USD" in proc.stderr and proc.stdout == ""
    assert "Traceback" not in proc.stderr


def test_a_research_beyond_the_servers_concurrency_is_refused(tmp_path: Path) -> None:
    settings = Settings(search_provider="brave", brave_api_key="brave-key", db_path=str(tmp_path / "runs.sqlite"))
    tools = Tools(settings, McpSettings(max_concurrent=1))
    said: list[str | None] = []

    class Ctx:
        async def report_progress(self, progress: float, total: float | None = None, message: str | None = None
                                  ) -> None:
            said.append(message)

    with tools._slot(), pytest.raises(ToolError, match="already runs 1 research run at a time"):  # one run is going
        anyio.run(functools.partial(tools.research, Ctx(), QUESTION, mode="extractive"))  # type: ignore[arg-type]
    assert said == [] and tools._running == 0 and not (tmp_path / "runs.sqlite").exists()  # nothing was started


# -- fetch and search --------------------------------------------------------------------------------------------------

def test_fetch_page_of_a_local_page(nokey: Client, world: World) -> None:
    result, _ = nokey.call("fetch_page", {"url": world.web.url("/qdrant")})
    assert not result.is_error, text_of(result)
    page = result.structured_content
    assert page is not None and page["ok"] and page["title"] == "Qdrant pricing"
    assert "starts at 25 dollars per month" in page["text"] and page["text_chars"] == len(page["text"])


@pytest.mark.parametrize("url", ["file:///etc/passwd", "http://169.254.169.254/latest/meta-data/",
                                 "http://10.0.0.7/admin", "http://192.168.1.1/", "http://[::1]:8080/",
                                 "http://metadata.google.internal/computeMetadata/v1/", "gopher://example.com/"])
def test_fetch_page_refuses_what_the_guard_refuses(nokey: Client, world: World, url: str) -> None:
    before = world.web.count()
    result, _ = nokey.call("fetch_page", {"url": url})
    assert result.is_error
    assert result.structured_content is not None and result.structured_content["error_kind"] == "blocked"
    assert text_of(result).startswith("fetch_page failed (blocked): ")
    assert world.web.count() == before
    assert not nokey.call("list_runs", {})[0].is_error  # still serving


def test_a_loopback_port_not_allowed_is_refused(nokey: Client, world: World) -> None:
    port = int(world.web.host_port.rsplit(":", 1)[1])
    result, _ = nokey.call("fetch_page", {"url": f"http://127.0.0.1:{port + 1 if port < 65535 else port - 1}/"})
    assert result.is_error and result.structured_content is not None
    assert result.structured_content["error_kind"] == "blocked"


def test_the_servers_secrets_never_reach_a_result(nokey: Client, world: World) -> None:
    world.web.route("/reflect", _page("Keys", [f"A page that happens to hold the key {SEARCH_KEY} in its text."]))
    result, _ = nokey.call("fetch_page", {"url": world.web.url("/reflect")})
    assert not result.is_error and result.structured_content is not None
    assert "hold the key [redacted] in its text" in result.structured_content["text"]
    assert SEARCH_KEY not in text_of(result) + json.dumps(result.structured_content)


def test_search(nokey: Client, world: World) -> None:
    result, _ = nokey.call("search", {"query": "qdrant pricing", "n": 1})
    assert not result.is_error, text_of(result)
    found = result.structured_content
    assert found is not None and found["provider"] == "brave"
    assert [r["url"] for r in found["results"]] == [world.web.url("/qdrant")]
    assert SEARCH_KEY not in text_of(result)


# -- bad input ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("tool", "args", "says"), [
    ("research", {"question": "x" * 1_000_000}, "1,000,000 characters long; the limit is 2,000"),
    ("research", {"question": " \n\t "}, "the question is empty"),
    ("research", {"question": QUESTION, "budget": -1}, "'small', 'standard' or 'large'"),
    ("research", {"question": QUESTION, "budget": "unlimited"}, "'small', 'standard' or 'large'"),
    ("research", {"question": QUESTION, "mode": "magic"}, "'fixed', 'tools' or 'extractive'"),
    ("research", {"question": ["not", "text"]}, "question"),
    ("research", {}, "question"),
    ("get_run", {"run_id": "0123456789ab"}, "there is no run '0123456789ab'"),
    ("get_run", {"run_id": "../../etc/passwd"}, "is not a run id"),
    ("get_run", {"run_id": "r" * 1_000_000}, "is not a run id"),
    ("fetch_page", {"url": "http://example.com/" + "a" * 1_000_000}, "the limit is 2,048"),
    ("search", {"query": "q" * 1_000_000}, "the limit is 400"),
    ("search", {"query": "qdrant", "n": -3}, "greater than or equal to 1"),
    ("list_runs", {"limit": 10**9}, "less than or equal to 100"),
    ("no_such_tool", {}, "no_such_tool"),
])
def test_bad_input_is_a_tool_error_and_the_server_goes_on(nokey: Client, tool: str, args: dict[str, Any],
                                                          says: str) -> None:
    result, _ = nokey.call(tool, args)
    assert result.is_error and says in text_of(result), text_of(result)
    assert len(text_of(result)) < 2_000  # the message says what is wrong; it does not echo a megabyte back
    after, _ = nokey.call("list_runs", {"limit": 1})
    assert not after.is_error


def test_stdout_carries_only_the_protocol(world: World) -> None:
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "fetch_page",
                                                                       "arguments": {"url": "file:///etc/passwd"}}},
    ]
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=world.env(key=False))
    watchdog = threading.Timer(60, proc.kill)
    watchdog.start()
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
        proc.stdin.flush()
        lines = []
        while not any(m.get("id") == 2 for m in lines) and (line := proc.stdout.readline()):
            lines.append(json.loads(line))  # every line on stdout is a JSON-RPC message
        proc.stdin.close()
        rest = proc.stdout.read()
        err = proc.stderr.read() if proc.stderr is not None else ""
        proc.wait(timeout=30)
    finally:
        watchdog.cancel()
    lines += [json.loads(line) for line in rest.splitlines()]
    assert lines and all(m.get("jsonrpc") == "2.0" for m in lines)
    assert any(m.get("id") == 2 and m["result"]["isError"] for m in lines), lines
    assert proc.returncode == 0 and "Traceback" not in err


def test_the_models_server_side_search_spends_from_one_budget_for_the_servers_lifetime() -> None:
    from pydantic import SecretStr

    from tests.fakes.anthropic_api import reply_web_search

    def brain(req: Any) -> Any:
        return reply_web_search("q", [{"url": "https://a.example/", "title": "A", "snippet": "Qdrant pricing."}])

    with FakeAnthropic(brain) as fake:
        settings = Settings(anthropic_api_key=SecretStr("sk-ant-mcp-test"), anthropic_base_url=fake.base_url,
                            search_provider="anthropic", model_max_retries=0)
        tools = Tools(settings, McpSettings())
        cap = limits_for("small", "fixed", tools.cap).model_calls
        refused = 0
        for i in range(cap + 5):  # each a new query: no cache, every one asks the model
            try:
                tools.search(f"qdrant pricing {i}")
            except ToolError:
                refused += 1
        assert 0 < fake.count() <= cap and refused >= 5
