"""The OpenAI-compatible adapter (pipeline/models/openai.py), driven through the real `openai` SDK against the loopback
fake of the Chat Completions API: requests, structured output and its fallbacks, tool conversations, usage and cost,
errors that name the setting to fix, and whole runs against servers that lack a capability."""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from pydantic import BaseModel

from pipeline.cli.main import main
from pipeline.config import ConfigError, Settings
from pipeline.core.budget import Budget
from pipeline.core.events import ListSink
from pipeline.core.schema import BudgetLimits, ModelPrice
from pipeline.models.base import UNPARSED_ARGUMENTS, LLMError, ModelReply, OutputInvalid, ToolResult, ToolResults
from pipeline.models.factory import model_client
from pipeline.models.openai import PROBE_TOKENS, SCHEMA_IN_PROMPT, TOOLS_PROBE, OpenAIChat, max_tokens_key
from pipeline.research.preflight import require_run_access
from pipeline.research.steps.worker import NUDGE_PROSE, PAGE_READ
from pipeline.research.tools.toolbox import TOOLS
from tests.fakes.anthropic_api import FakeReply, reply_json, reply_text, reply_tool_use
from tests.fakes.openai_api import LEAD_MODEL, WORKER_MODEL, FakeOpenAI, reply_tool_call
from tests.fakes.research_brain import ResearchBrain
from tests.fakes.search_apis import FakeSearchApi
from tests.fakes.web_server import WebServer
from tests.test_e2e import OPENAI_KEY, VECTOR_PAGES, World, serve

CLOSED_PORT = "http://127.0.0.1:9/v1"  # nothing listens on the discard port: the connection is refused at once
QUESTION = "What does Qdrant Cloud pricing start at?"


class Answer(BaseModel):
    answer: str
    score: int


def openai_settings(base_url: str, **fields: Any) -> Settings:
    return Settings.model_validate({"model_provider": "openai", "openai_api_key": OPENAI_KEY,
                                    "openai_base_url": base_url, "lead_model": "gpt-4.1",
                                    "worker_model": "gpt-4.1-mini", "model_max_retries": 1, "model_timeout": 5,
                                    **fields})


def client(base_url: str, sink: ListSink | None = None, **fields: Any) -> tuple[OpenAIChat, Budget]:
    settings = openai_settings(base_url, **fields)
    budget = Budget(BudgetLimits(), settings.price)
    chat = model_client(settings, budget, sink if sink is not None else ListSink())
    assert isinstance(chat, OpenAIChat)
    return chat, budget


def ask(chat: OpenAIChat, text: str = "hello", **kw: Any) -> ModelReply:
    return chat.call(model="gpt-4.1", system="Be brief.", messages=[{"role": "user", "content": text}],
                     max_tokens=200, purpose="test", **kw)


@pytest.fixture()
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(api_key=OPENAI_KEY, models={LEAD_MODEL, WORKER_MODEL}) as f:
        yield f


# -- requests, usage and cost ----------------------------------------------------------------------------------------
def test_a_turn_sends_system_then_messages_and_charges_the_reported_usage(fake: FakeOpenAI) -> None:
    fake.rule(lambda r: True, reply_text("Qdrant starts at 25 dollars."))
    chat, budget = client(fake.base_url)
    reply = ask(chat)
    assert (reply.text, reply.stop_reason, reply.tool_uses) == ("Qdrant starts at 25 dollars.", "end_turn", [])
    body = fake.requests[0].body
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["max_tokens"] == 200 and "max_completion_tokens" not in body  # a local server's name for it
    assert "cache_control" not in json.dumps(body)  # these servers cache prefixes on their own
    usage = fake.requests[0].response["usage"]  # type: ignore[index]
    assert reply.usage.input_tokens == usage["prompt_tokens"]
    assert reply.usage.output_tokens == usage["completion_tokens"]
    price = ModelPrice(input=2.0, output=8.0, cache_write=2.0, cache_read=0.5)
    expected = (usage["prompt_tokens"] * price.input + usage["completion_tokens"] * price.output) / 1e6
    assert budget.used().cost_usd == pytest.approx(expected) and budget.used().model_calls == 1


def test_openai_itself_gets_max_completion_tokens() -> None:
    assert max_tokens_key(Settings(model_provider="openai")) == "max_completion_tokens"
    assert max_tokens_key(Settings(model_provider="openai", openai_base_url="https://api.openai.com/v1")) == \
        "max_completion_tokens"
    assert max_tokens_key(Settings(model_provider="openai", openai_base_url="http://localhost:11434/v1")) == \
        "max_tokens"


def test_cached_prefix_tokens_are_charged_at_the_cached_price() -> None:
    with FakeOpenAI(min_cache_tokens=64, cache_increment=16) as fake:
        chat, budget = client(fake.base_url)
        long = "Qdrant Cloud pricing notes. " * 80
        first = ask(chat, long + "First question?")
        second = ask(chat, long + "Second question?")
    assert first.usage.cache_read_input_tokens == 0
    cached = fake.requests[1].cached_tokens
    assert cached and second.usage.cache_read_input_tokens == cached
    assert second.usage.input_tokens == fake.requests[1].response["usage"]["prompt_tokens"] - cached  # type: ignore[index]
    assert budget.used().cache_read_input_tokens == cached


def test_a_local_model_with_an_explicit_zero_price_costs_nothing_and_an_unpriced_one_is_refused() -> None:
    free = json.dumps({"llama3.1:8b": {"input": 0, "output": 0, "cache_write": 0, "cache_read": 0}})
    with FakeOpenAI() as fake:
        settings = Settings(model_provider="openai", openai_base_url=fake.base_url, lead_model="llama3.1:8b",
                            worker_model="llama3.1:8b", prices_raw=free)
        settings.require_model_access()  # no key needed for a local server
        budget = Budget(BudgetLimits(), settings.price)
        reply = model_client(settings, budget).call(model="llama3.1:8b", system="", purpose="t", max_tokens=50,
                                                     messages=[{"role": "user", "content": "hi"}])
        assert reply.usage.input_tokens > 0 and budget.used().cost_usd == 0 and budget.used().model_calls == 1
        assert fake.requests[0].headers["authorization"] == "Bearer no-key-set"
    with pytest.raises(ConfigError, match="RESEARCH_PRICES"):
        Settings(model_provider="openai", openai_base_url="http://127.0.0.1:9/v1", lead_model="mystery",
                 worker_model="mystery").require_model_access()


@pytest.mark.parametrize(("fields", "names"), [
    ({}, "OPENAI_API_KEY"),
    ({"openai_api_key": "sk-x"}, "RESEARCH_LEAD_MODEL and RESEARCH_WORKER_MODEL"),
    ({"openai_api_key": "sk-x", "lead_model": "gpt-4.1"}, "RESEARCH_WORKER_MODEL"),
    ({"openai_base_url": "localhost:11434/v1", "lead_model": "m", "worker_model": "m"}, "OPENAI_BASE_URL must be"),
])
def test_missing_openai_settings_are_named_before_a_run(fields: dict[str, str], names: str) -> None:
    with pytest.raises(ConfigError, match=names):
        Settings.model_validate({"model_provider": "openai", **fields}).require_model_access()


def test_anthropic_server_side_search_is_refused_with_the_openai_provider() -> None:
    settings = openai_settings(CLOSED_PORT, search_provider="anthropic")
    with pytest.raises(ConfigError, match="RESEARCH_SEARCH_PROVIDER=anthropic .* brave, tavily, searxng or corpus"):
        require_run_access(settings, "fixed")


# -- structured output -----------------------------------------------------------------------------------------------
def test_structured_output_asks_for_a_strict_json_schema(fake: FakeOpenAI) -> None:
    fake.rule(lambda r: True, reply_json({"answer": "yes", "score": 3}))
    chat, _ = client(fake.base_url)
    value = chat.structured(model="gpt-4.1-mini", system="Judge.", messages="Is it?", output=Answer, max_tokens=100,
                            purpose="judge")
    assert value == Answer(answer="yes", score=3)
    fmt = fake.requests[0].body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["name"] == "Answer" and fmt["json_schema"]["schema"]["additionalProperties"] is False


@pytest.mark.parametrize(("json_mode", "level", "purpose"), [(True, "json_object", "judge:json_mode"),
                                                             (False, None, "judge:json_text")])
def test_a_server_without_schemas_is_asked_for_json_another_way(json_mode: bool, level: str | None,
                                                                purpose: str) -> None:
    sink = ListSink()
    with FakeOpenAI(supports_schema=False, supports_json_mode=json_mode) as fake:
        fake.rule(lambda r: True, reply_json({"answer": "yes", "score": 3}))
        chat, budget = client(fake.base_url, sink)
        for _ in range(2):
            assert chat.structured(model="gpt-4.1-mini", system="Judge.", messages="Is it?", output=Answer,
                                   max_tokens=100, purpose="judge").score == 3
    refused = [r for r in fake.requests if r.status == 400]
    answered = [r for r in fake.requests if r.status == 200]
    # Every call starts at the strongest level (what a call asks never depends on another call): a refused level
    # costs each call one unbilled round trip.
    assert len(refused) == 2 * (1 if json_mode else 2) and len(answered) == 2
    for r in answered:
        assert (r.body.get("response_format") or {}).get("type") == level
        assert SCHEMA_IN_PROMPT in r.body["messages"][0]["content"] and '"score"' in r.body["messages"][0]["content"]
    assert budget.used().model_calls == 2  # a refused request is not billed
    assert {e.payload["kind"] for e in sink.of("model_error")} == {"schema_unsupported"}
    assert [e.payload["purpose"] for e in sink.of("model_response")] == [purpose, purpose]


def test_a_reply_that_fails_its_schema_is_repaired_once_then_refused(fake: FakeOpenAI) -> None:
    fake.fault(kind="reply", reply=reply_text("not json at all"), times=None)
    chat, _ = client(fake.base_url)
    with pytest.raises(OutputInvalid, match="did not match Answer after one repair attempt"):
        chat.structured(model="gpt-4.1-mini", system="Judge.", messages="Is it?", output=Answer, max_tokens=100,
                        purpose="judge")
    assert len(fake.requests) == 2
    repair = fake.requests[1].body["messages"]
    assert repair[-2] == {"role": "assistant", "content": "not json at all"}
    assert "did not match the required JSON schema" in repair[-1]["content"]


# -- tool conversations ----------------------------------------------------------------------------------------------
def test_a_tool_conversation_sends_each_call_back_unchanged_with_one_result_each(fake: FakeOpenAI) -> None:
    calls = FakeReply([{"type": "text", "text": "Searching."},
                       {"type": "tool_use", "id": "call_a", "name": "web_search", "input": {"query": "qdrant"}},
                       {"type": "tool_use", "id": "call_b", "name": "web_search", "input": {"query": "milvus"}}],
                      "tool_use")
    fake.rule(lambda r: not r.tool_results, calls)
    fake.rule(lambda r: True, reply_text("Done."))
    chat, _ = client(fake.base_url)
    first = chat.tool_turn(model="gpt-4.1-mini", system="Research.", turns=["Find prices."], tools=TOOLS,
                           max_tokens=300, purpose="worker:Q1")
    assert first.stop_reason == "tool_use" and [u.input for u in first.tool_uses] == [{"query": "qdrant"},
                                                                                      {"query": "milvus"}]
    results = ToolResults([ToolResult("call_a", "SEARCH_RESULTS a"), ToolResult("call_b", "NO_RESULTS", True)],
                          note="Be brief.")
    second = chat.tool_turn(model="gpt-4.1-mini", system="Research.", turns=["Find prices.", first, results],
                            tools=TOOLS, max_tokens=300, purpose="worker:Q1")
    assert second.text == "Done."
    sent = fake.requests[1].body["messages"]
    said = fake.requests[0].response["choices"][0]["message"]  # type: ignore[index]
    assert sent[2] == {"role": "assistant", "content": "Searching.", "tool_calls": said["tool_calls"]}
    assert sent[3:] == [{"role": "tool", "tool_call_id": "call_a", "content": "SEARCH_RESULTS a"},
                        {"role": "tool", "tool_call_id": "call_b", "content": "NO_RESULTS"},
                        {"role": "user", "content": "Be brief."}]
    # The tools are functions with the neutral input schema as parameters, the same bytes on every turn.
    assert [t["function"]["name"] for t in fake.requests[0].body["tools"]] == [t["name"] for t in TOOLS]
    assert fake.requests[0].field_bytes("tools") == fake.requests[1].field_bytes("tools")


def test_tool_arguments_that_are_not_json_reach_the_tool_as_text(fake: FakeOpenAI) -> None:
    fake.fault(kind="reply", reply=reply_tool_call("web_search", "{query: qdrant"))
    chat, _ = client(fake.base_url)
    reply = chat.tool_turn(model="gpt-4.1-mini", system="s", turns=["go"], tools=TOOLS, max_tokens=100, purpose="w")
    assert reply.tool_uses[0].input == {UNPARSED_ARGUMENTS: "{query: qdrant"}
    again = chat.tool_turn(model="gpt-4.1-mini", system="s", purpose="w", max_tokens=100, tools=TOOLS,
                           turns=["go", reply, ToolResults([ToolResult(reply.tool_uses[0].id, "BAD_ARGUMENTS")])])
    assert again.text == "ok"
    assert fake.requests[1].body["messages"][2]["tool_calls"][0]["function"]["arguments"] == "{query: qdrant"


def test_check_tools_is_one_small_request_per_model_and_names_the_modes_that_work(fake: FakeOpenAI) -> None:
    fake.rule(lambda r: r.last_user_text == TOOLS_PROBE, reply_tool_use("calculate", {"expression": "1+1"}))
    chat, budget = client(fake.base_url)
    chat.check_tools(model="gpt-4.1-mini", tools=TOOLS)
    chat.check_tools(model="gpt-4.1-mini", tools=TOOLS)
    assert len(fake.requests) == 1 and fake.requests[0].body["max_tokens"] == PROBE_TOKENS
    assert budget.used().model_calls == 1
    with FakeOpenAI(supports_tools=False) as plain:
        chat, budget = client(plain.base_url)
        with pytest.raises(LLMError) as err:
            chat.check_tools(model="gpt-4.1-mini", tools=TOOLS)
    assert err.value.kind == "unsupported" and "--mode fixed" in err.value.message
    assert budget.used().model_calls == 0 and budget.used().cost_usd == 0


def test_a_server_that_ignores_tool_definitions_is_refused_and_a_cut_probe_is_not(fake: FakeOpenAI) -> None:
    chat, _ = client(fake.base_url)  # the default brain answers "ok" in text, whatever tools it is given
    with pytest.raises(LLMError) as err:
        chat.check_tools(model="gpt-4.1-mini", tools=TOOLS)
    assert err.value.kind == "unsupported" and "answered in text" in err.value.message
    fake.rule(lambda r: True, reply_text("Let me think about which tool to call first. " * 200))
    chat, _ = client(fake.base_url)
    chat.check_tools(model="gpt-4.1-mini", tools=TOOLS)  # cut at the limit while thinking: no proof either way


@pytest.mark.parametrize(("status", "message", "kind"), [
    (400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set', "unsupported"),
    (500, "tools param requires --jinja flag", "unsupported"),
    (400, "registry.ollama.ai/library/gemma:2b does not support tools", "unsupported"),
    (400, "Invalid schema for function 'record_finding': 'maxLength' is not permitted.", "bad_request"),
])
def test_only_a_server_that_lacks_tool_calling_is_called_one(fake: FakeOpenAI, status: int, message: str,
                                                            kind: str) -> None:
    fake.fault(lambda r: bool(r.tools), status=status, times=None,
               body=json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode())
    chat, _ = client(fake.base_url, model_max_retries=0)
    with pytest.raises(LLMError) as err:
        chat.check_tools(model="gpt-4.1-mini", tools=TOOLS)
    assert err.value.kind == kind and message[:30] in err.value.message


# -- errors name the setting to fix, and never the key ---------------------------------------------------------------
FAULTS = [
    pytest.param({"kind": "status", "status": 401}, "auth", "OPENAI_API_KEY", id="401"),
    pytest.param({"kind": "status", "status": 429, "times": None}, "rate_limited", "HTTP 429", id="429"),
    pytest.param({"kind": "status", "status": 503, "times": None}, "server", "HTTP 503", id="503"),
    pytest.param({"kind": "malformed_json"}, "malformed", "OPENAI_BASE_URL", id="invalid-json"),
    pytest.param({"kind": "html"}, "malformed", "OPENAI_BASE_URL", id="not-openai-compatible"),
    pytest.param({"kind": "not_chat"}, "malformed", "OPENAI_BASE_URL", id="not-a-completion"),
    pytest.param({"kind": "cut", "times": None}, "connection", "OPENAI_BASE_URL", id="cut-mid-way"),
    pytest.param({"kind": "reset", "times": None}, "connection", "OPENAI_BASE_URL", id="reset"),
    pytest.param({"kind": "hang", "times": None}, "timeout", "RESEARCH_MODEL_TIMEOUT", id="hang"),
]


@pytest.mark.parametrize(("fault_kw", "kind", "names"), FAULTS)
def test_each_fault_is_an_llm_error_naming_the_fix(fault_kw: dict[str, Any], kind: str, names: str) -> None:
    sink = ListSink()
    with FakeOpenAI(hang_seconds=2) as fake:
        fake.fault(**fault_kw)
        chat, budget = client(fake.base_url, sink, model_timeout=0.5, openai_api_key=OPENAI_KEY)
        with pytest.raises(LLMError) as err:
            ask(chat)
    assert err.value.kind == kind and names in err.value.message, err.value.message
    assert OPENAI_KEY not in err.value.message and "\n" not in err.value.message
    assert [e.payload["kind"] for e in sink.of("model_error")] == [kind]
    assert budget.used().model_calls == 0 and budget.used().cost_usd == 0  # a failed call is not billed


def test_a_wrong_base_url_an_unknown_model_and_a_long_prompt_are_named(fake: FakeOpenAI) -> None:
    chat, _ = client(CLOSED_PORT, model_max_retries=0)
    with pytest.raises(LLMError, match="cannot reach http://127.0.0.1:9/v1.*OPENAI_BASE_URL") as err:
        ask(chat)
    assert err.value.kind == "connection"
    chat, _ = client(fake.base_url, prices_raw=json.dumps({"gpt-9": {"input": 1, "output": 1, "cache_write": 1,
                                                                    "cache_read": 1}}))
    with pytest.raises(LLMError, match="404 for model 'gpt-9'.*RESEARCH_LEAD_MODEL and RESEARCH_WORKER_MODEL"):
        chat.call(model="gpt-9", system="", messages=[{"role": "user", "content": "x"}], max_tokens=10, purpose="p")
    fake.fault(status=400, body=json.dumps({"error": {"message": "This model's maximum context length is 8192 tokens",
                                                      "code": "context_length_exceeded"}}).encode())
    with pytest.raises(LLMError) as err:
        ask(chat)
    assert err.value.kind == "context_window" and "shorten the input" in err.value.message


def test_a_refusal_is_an_error_the_step_can_act_on(fake: FakeOpenAI) -> None:
    fake.rule(lambda r: True, FakeReply([], "refusal", stop_details={"explanation": "I can't help with that."}))
    chat, _ = client(fake.base_url)
    with pytest.raises(LLMError) as err:
        ask(chat)
    assert err.value.kind == "refusal"


# -- whole runs ------------------------------------------------------------------------------------------------------
@pytest.fixture()
def make_world() -> Iterator[Any]:
    """A factory of e2e worlds on an OpenAI-compatible fake with the given capabilities; `think` makes the model put
    its reasoning in `content` before every answer, as Qwen3 on Groq and DeepSeek-R1 do."""
    with ExitStack() as stack:
        def build(think: bool = False, **capabilities: Any) -> World:
            brain = ThinkingBrain(ResearchBrain()) if think else ResearchBrain()
            web = stack.enter_context(WebServer())
            search = stack.enter_context(FakeSearchApi("brave", [], api_key="brave-key"))
            fake = stack.enter_context(FakeOpenAI(brain, api_key=OPENAI_KEY, **capabilities))
            world = World(fake, search, web, getattr(brain, "brain", brain), [])
            serve(world, VECTOR_PAGES)
            return world
        yield build


THOUGHT = "Okay, the user wants pricing. I recall 99 dollars but let me check."


class ThinkingBrain:
    """A Responder that answers as `brain` does, with a <think> block of reasoning first in the message content."""

    def __init__(self, brain: ResearchBrain):
        self.brain = brain

    def __call__(self, req: Any) -> FakeReply:
        reply = self.brain(req)
        return FakeReply([{"type": "text", "text": f"<think>\n{THOUGHT}\n</think>\n\n"}, *reply.content],
                         reply.stop_reason, reply.output_tokens, reply.stop_details)


def test_tools_mode_on_a_server_without_tool_calling_stops_before_any_spend(make_world: Any) -> None:
    world = make_world(supports_tools=False)
    result, sink = world.run(QUESTION, "tools")
    assert result.status == "failed" and result.findings == [] and result.sources == []
    refused = [p for p in result.problems if p.kind == "tools_unsupported"]
    assert refused and "only the fixed and extractive modes work" in refused[0].message
    u = result.usage
    assert (u.model_calls, u.searches, u.fetches, u.cost_usd) == (0, 0, 0, 0)
    assert len(world.fake.requests) == 1 and world.fake.requests[0].status == 400  # the probe only
    fixed, _ = world.run(QUESTION, "fixed")  # the same server serves fixed mode
    assert fixed.status == "complete" and fixed.findings


def test_a_server_without_schemas_still_completes_a_run(make_world: Any) -> None:
    world = make_world(supports_schema=False, supports_json_mode=False)
    result, _ = world.run(QUESTION, "fixed")
    assert result.status == "complete" and result.findings, result.problems


def test_a_worker_that_invents_a_tool_or_sends_broken_arguments_is_told_and_the_run_goes_on(make_world: Any) -> None:
    world = make_world()
    first_turn = lambda r: r.has_tool("record_finding") and len(r.messages) == 1 and r.last_user_text != TOOLS_PROBE  # noqa: E731
    world.fake.fault(first_turn, kind="reply", reply=FakeReply(
        [{"type": "tool_use", "id": "call_x", "name": "delete_everything", "input": {}},
         {"type": "tool_use", "id": "call_y", "name": "web_search", "input": {}, "raw_arguments": "{oops"}],
        "tool_use"))
    result, sink = world.run(QUESTION, "tools")
    # The first tool call is code's own first search; the model's two come next.
    outcomes = {e.payload["name"]: e.payload["outcome"] for e in sink.of("tool_call")[1:3]}
    assert outcomes["delete_everything"].startswith("UNKNOWN_TOOL")
    assert outcomes["web_search"].startswith("BAD_ARGUMENTS") and "JSON object" in outcomes["web_search"]
    # The model was told, in one tool message per call, and its worker went on to finish rather than fail.
    [told] = [r for r in world.fake.chat_requests if len(r.tool_results) == 2]
    assert [b["tool_use_id"] for b in told.tool_results] == ["call_x", "call_y"]
    assert not any(p.kind == "worker_failed" for p in result.problems)
    finished = [e.payload for e in sink.of("step") if e.payload.get("name") == "worker"
                and e.payload.get("status") == "finished"]
    assert finished and finished[0]["ended"] == "done" and finished[0]["steps"] >= 2


def test_an_analyst_that_fails_its_schema_twice_gives_way_to_code(make_world: Any) -> None:
    world = make_world()
    is_analyst = lambda r: "untrusted_page" in (r.user_texts[0] if r.user_texts else "")  # noqa: E731
    world.fake.fault(is_analyst, kind="reply", reply=reply_json({"findings": "none"}), times=None)
    result, _ = world.run(QUESTION, "fixed")
    assert result.findings and all(f.selected_by_code and f.claim == f.quote for f in result.findings)
    fallbacks = [p for p in result.problems if p.kind == "analyst_fallback"]
    assert fallbacks and result.status == "partial"
    assert all("failed its format twice" in p.message for p in fallbacks)
    listed = {i for p in fallbacks for i in re.findall(r"F\d+", p.message)}
    assert listed == {f.id for f in result.findings}


def test_a_model_outage_mid_run_keeps_what_was_gathered(make_world: Any) -> None:
    world = make_world()
    is_writer = lambda r: "<findings>" in (r.user_texts[0] if r.user_texts else "")  # noqa: E731
    world.fake.fault(is_writer, status=500, times=None)
    result, _ = world.run(QUESTION, "fixed")
    assert result.status == "partial" and result.findings and result.sources
    [problem] = [p for p in result.problems if p.kind == "writer_unavailable"]
    assert "HTTP 500" in problem.message and OPENAI_KEY not in problem.message


def test_worker_turns_extend_one_stable_prefix_for_the_servers_cache(make_world: Any) -> None:
    world = make_world()
    world.run(QUESTION, "tools")
    turns = [r for r in world.fake.requests if "record_finding" in json.dumps(r.body.get("tools") or [])
             and len(r.body["messages"]) > 2]
    assert len(turns) >= 3
    removed = 0
    for before, after in zip(turns, turns[1:], strict=False):
        sent_before = (before.field_bytes("messages") or b"")[:-1]  # without the closing bracket
        assert after.field_bytes("tools") == before.field_bytes("tools")
        if (after.field_bytes("messages") or b"").startswith(sent_before):
            continue
        # The one change allowed: a page read in an earlier turn, with a finding recorded from it, taken out.
        old, new = before.body["messages"], after.body["messages"]
        changed = [i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b]
        assert changed and all(old[i]["role"] == "tool" and "<untrusted_page" in old[i]["content"]
                               and PAGE_READ.split("{")[0] in new[i]["content"]
                               and new[i]["content"].split("\n")[0] == old[i]["content"].split("\n")[0]
                               for i in changed)
        removed += len(changed)
    assert removed >= 1


def test_the_cli_names_the_openai_settings_when_they_are_missing(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("RESEARCH_MODEL_PROVIDER", "openai")
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RESEARCH_LEAD_MODEL", "RESEARCH_WORKER_MODEL"):
        monkeypatch.delenv(name, raising=False)
    assert main(["run", QUESTION, "--mode", "fixed"]) == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err



# -- what real servers send --------------------------------------------------------------------------------------
def completion(message: dict[str, Any], finish: str = "stop", usage: Any = None) -> bytes:
    """A chat completion body as a server might send it."""
    body: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4.1",
                            "choices": [{"index": 0, "message": {"role": "assistant", **message},
                                         "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body).encode()


def test_a_tool_call_cut_at_the_limit_is_a_cut_reply_not_a_call(fake: FakeOpenAI) -> None:
    cut = {"content": None, "tool_calls": [{"id": "call_1", "type": "function",
                                            "function": {"name": "web_search", "arguments": '{"query": "qdr'}}]}
    fake.fault(kind="not_chat", body=completion(cut, "length", {"prompt_tokens": 10, "completion_tokens": 5}))
    chat, _ = client(fake.base_url)
    reply = chat.tool_turn(model="gpt-4.1-mini", system="s", turns=["go"], tools=TOOLS, max_tokens=5, purpose="w")
    assert reply.stop_reason == "max_tokens"  # the worker is told to be brief, not given a result for a half call


@pytest.mark.parametrize(("error", "kind"), [({"code": 429, "message": "Rate limit exceeded upstream"}, "rate_limited"),
                                             ({"code": 502, "message": "Provider returned error"}, "server"),
                                             ({"message": "no code at all"}, "server")])
def test_an_error_relayed_in_a_200_body_is_classified_by_its_code(fake: FakeOpenAI, error: dict[str, Any],
                                                                 kind: str) -> None:
    fake.fault(kind="not_chat", body=json.dumps({"error": error}).encode())
    chat, budget = client(fake.base_url)
    with pytest.raises(LLMError) as err:
        ask(chat)
    assert err.value.kind == kind and error["message"] in err.value.message and budget.used().model_calls == 0


def test_a_choice_that_ended_in_error_is_a_server_error(fake: FakeOpenAI) -> None:
    fake.fault(kind="not_chat", body=completion({"content": ""}, "error"))
    chat, _ = client(fake.base_url)
    with pytest.raises(LLMError) as err:
        ask(chat)
    assert err.value.kind == "server"


@pytest.mark.parametrize("message", [{"content": "x", "tool_calls": [{"id": 7, "type": "function",
                                                                       "function": {"name": "a", "arguments": "{}"}}]},
                                     {"content": 42}])
def test_a_message_of_the_wrong_shape_is_malformed_not_a_crash(fake: FakeOpenAI, message: dict[str, Any]) -> None:
    fake.fault(kind="not_chat", body=completion(message))
    chat, _ = client(fake.base_url)
    with pytest.raises(LLMError) as err:
        ask(chat)
    assert err.value.kind == "malformed" and "OPENAI_BASE_URL" in err.value.message


@pytest.mark.parametrize("usage", [None, {"prompt_tokens": "many", "completion_tokens": 3}, {"prompt_tokens": 5}])
def test_a_server_that_reports_no_usable_usage_is_charged_an_estimate(fake: FakeOpenAI, usage: Any) -> None:
    fake.fault(kind="not_chat", body=completion({"content": "Qdrant starts at 25 dollars."}, usage=usage))
    chat, budget = client(fake.base_url)
    reply = ask(chat, "x" * 400)
    assert reply.usage.input_tokens >= 100 and reply.usage.output_tokens > 0
    assert budget.used().cost_usd > 0 and budget.used().model_calls == 1


def test_reasoning_details_go_back_with_their_turn_and_nothing_else_a_server_added(fake: FakeOpenAI) -> None:
    said = {"content": None, "reasoning_details": [{"type": "reasoning.encrypted", "data": "abc"}],
            "reasoning_content": "thinking...", "annotations": [],
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "web_search", "arguments": '{"query": "qdrant"}'}}]}
    fake.fault(kind="not_chat", body=completion(said, "tool_calls", {"prompt_tokens": 9, "completion_tokens": 9}))
    chat, _ = client(fake.base_url)
    first = chat.tool_turn(model="gpt-4.1-mini", system="s", turns=["go"], tools=TOOLS, max_tokens=50, purpose="w")
    chat.tool_turn(model="gpt-4.1-mini", system="s", tools=TOOLS, max_tokens=50, purpose="w",
                   turns=["go", first, ToolResults([ToolResult("call_1", "NO_RESULTS")])])
    sent = fake.requests[1].body["messages"][2]
    assert sent == {"role": "assistant", "content": None, "tool_calls": said["tool_calls"],
                    "reasoning_details": said["reasoning_details"]}


def test_the_repair_of_a_reply_that_ignored_response_format_shows_the_schema(fake: FakeOpenAI) -> None:
    fake.fault(kind="reply", reply=reply_text("Sure! The answer is yes."))
    fake.rule(lambda r: True, reply_json({"answer": "yes", "score": 1}))
    chat, _ = client(fake.base_url)
    assert chat.structured(model="gpt-4.1-mini", system="Judge.", messages="Is it?", output=Answer, max_tokens=100,
                           purpose="judge").answer == "yes"
    ask_again = fake.requests[1].body["messages"][-1]["content"]
    assert SCHEMA_IN_PROMPT in ask_again and '"score"' in ask_again


def test_a_proxy_that_wants_the_other_output_limit_field_gets_it_once_and_from_then_on(fake: FakeOpenAI) -> None:
    fake.fault(lambda r: "max_tokens" in (r.recorded.body or {}), status=400, times=None, body=json.dumps({"error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                   "'max_completion_tokens' instead.", "type": "invalid_request_error"}}).encode())
    chat, budget = client(fake.base_url)
    assert ask(chat).text and ask(chat).text
    assert [("max_tokens" in r.body, r.status) for r in fake.requests] == [(True, 400), (False, 200), (False, 200)]
    assert budget.used().model_calls == 2


def test_credentials_in_the_base_url_stay_out_of_messages_and_records(tmp_path: Any) -> None:
    from pipeline.store.sql import settings_secrets

    settings = openai_settings("http://bob:s3cr%40t-pw@127.0.0.1:9/v1", model_max_retries=0)
    assert {"s3cr%40t-pw", "s3cr@t-pw"} <= set(settings_secrets(settings))
    chat = model_client(settings, Budget(BudgetLimits(), settings.price), ListSink())
    with pytest.raises(LLMError) as err:
        ask(chat)  # type: ignore[arg-type]
    assert "bob" not in err.value.message and "s3cr" not in err.value.message
    assert "http://127.0.0.1:9/v1" in err.value.message


@pytest.mark.parametrize(("status", "message", "kind"), [
    (404, "No endpoints found that support tool use. To learn more about provider routing, visit: ...",
     "unsupported"),
    (400, "the request exceeds the available context size, try increasing it", "context_window"),
])
def test_what_openrouter_and_llama_cpp_say(fake: FakeOpenAI, status: int, message: str, kind: str) -> None:
    fake.fault(status=status, times=None,
               body=json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode())
    chat, _ = client(fake.base_url, model_max_retries=0)
    with pytest.raises(LLMError) as err:
        chat.tool_turn(model="gpt-4.1-mini", system="s", turns=["go"], tools=TOOLS, max_tokens=50, purpose="w")
    assert err.value.kind == kind


def test_a_run_recorded_on_a_server_without_schemas_replays_in_any_thread_order(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.core.schema import RunOptions, RunResult
    from pipeline.research.orchestrator import build_context, research
    from pipeline.web.search.service import make_provider
    from tests.fakes.stores import open_test_store

    db = str(tmp_path / "runs.sqlite")
    with ExitStack() as stack:
        brain = ResearchBrain(latency=0.01)
        web = stack.enter_context(WebServer())
        search = stack.enter_context(FakeSearchApi("brave", [], api_key="brave-key"))
        fake = stack.enter_context(FakeOpenAI(brain, supports_schema=False))
        world = World(fake, search, web, brain, [])
        serve(world, VECTOR_PAGES)
        settings = world.settings().model_copy(update={"db_path": db})
        provider = make_provider(settings, sleep=lambda _s: None)
        with open_test_store(db) as store:  # four plan drafts at once: parallel structured calls, each refused first
            original = research(QUESTION, settings, options=RunOptions(mode="fixed", plan_candidates=4), store=store,
                                context=lambda s, o, e, **kw: build_context(s, o, e, provider=provider, **kw))
    assert original.status == "complete" and sum(r.status == 400 for r in fake.requests) >= 4
    monkeypatch.setenv("RESEARCH_DB", db)
    for name in ("RESEARCH_MODEL_PROVIDER", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "replay.json"
    assert main(["replay", original.run_id, "--json", str(out), "--quiet"]) == 0  # the fakes are shut down
    replayed = RunResult.model_validate_json(out.read_text())
    assert replayed.report.markdown == original.report.markdown and replayed.usage == original.usage
    assert replayed.findings == original.findings


# -- what servers spell their own way --------------------------------------------------------------------------------
@pytest.mark.parametrize(("finish", "stop"), [("", "end_turn"), (None, "end_turn"), ("eos", "end_turn"),
                                              ("eos_token", "end_turn"), ("STOP", "end_turn"),
                                              ("model_length", "max_tokens"), ("length", "max_tokens"),
                                              ("something_new", "something_new")])
def test_finish_reasons_as_servers_spell_them_become_the_stop_reasons_steps_act_on(
        fake: FakeOpenAI, finish: str | None, stop: str) -> None:
    fake.fault(kind="not_chat", body=completion({"content": "Qdrant starts at 25 dollars."}, finish))  # type: ignore[arg-type]
    chat, _ = client(fake.base_url)
    assert ask(chat).stop_reason == stop


def test_a_worker_on_a_server_that_sends_an_empty_finish_reason_is_nudged_once_not_ended(make_world: Any) -> None:
    world = make_world(finish_words={"stop": ""})  # Snowflake sends "" on every normal completion
    first_turn = lambda r: r.has_tool("record_finding") and len(r.messages) == 1 and r.last_user_text != TOOLS_PROBE  # noqa: E731
    world.fake.fault(first_turn, kind="reply", reply=reply_text(
        'I will search for the pricing page now: web_search(query="qdrant cloud pricing")'))
    result, _ = world.run(QUESTION, "tools")
    nudged = [r for r in world.fake.chat_requests if r.last_user_text == NUDGE_PROSE]
    assert len(nudged) == 1, "the worker ended at the first prose turn instead of being nudged"
    assert result.status == "complete" and result.findings, result.problems
    finishes = {r.response["choices"][0]["finish_reason"] for r in world.fake.requests  # type: ignore[index]
                if r.status == 200 and isinstance(r.response, dict) and "choices" in r.response}
    assert "" in finishes and "stop" not in finishes


@pytest.mark.parametrize(("usage", "read", "written"), [
    ({"prompt_tokens": 1000, "completion_tokens": 10, "num_cached_tokens": 800}, 800, 0),  # Mistral
    ({"prompt_tokens": 1000, "completion_tokens": 10, "prompt_cache_hit_tokens": 600,
      "prompt_cache_miss_tokens": 400}, 600, 0),  # DeepSeek
    ({"prompt_tokens": 1000, "completion_tokens": 10, "cached_tokens": 300}, 300, 0),  # Moonshot
    ({"prompt_tokens": 1000, "completion_tokens": 10,
      "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 900}}, 0, 900),  # OpenRouter, a write
    ({"prompt_tokens": 1000, "completion_tokens": 10, "cache_read_input_tokens": 500,
      "cache_creation_input_tokens": 200}, 500, 200),  # LiteLLM's proxy
    ({"prompt_tokens": 100, "completion_tokens": 10, "num_cached_tokens": 5000}, 100, 0),  # never above the prompt
    ({"prompt_tokens": 1000, "completion_tokens": 10, "prompt_tokens_details": None, "num_cached_tokens": -3}, 0, 0),
])
def test_each_servers_cache_fields_are_priced_as_cache_reads_and_writes(fake: FakeOpenAI, usage: dict[str, Any],
                                                                        read: int, written: int) -> None:
    fake.fault(kind="not_chat", body=completion({"content": "Qdrant starts at 25 dollars."}, usage=usage))
    prices = json.dumps({"gpt-4.1": {"input": 2.0, "output": 8.0, "cache_write": 2.5, "cache_read": 0.2}})
    chat, budget = client(fake.base_url, prices_raw=prices)
    reply = ask(chat)
    u = reply.usage
    assert (u.cache_read_input_tokens, u.cache_creation_input_tokens) == (read, written)
    assert u.input_tokens == usage["prompt_tokens"] - read - written and u.output_tokens == 10
    expected = (u.input_tokens * 2.0 + read * 0.2 + written * 2.5 + 10 * 8.0) / 1e6
    assert budget.used().cost_usd == pytest.approx(expected)


OPENROUTER_429 = {"error": {"message": "Provider returned error", "code": 429, "metadata": {
    "raw": "google/gemini-2.0-flash-exp:free is temporarily rate-limited upstream. Please retry shortly, or add "
           "your own key to accumulate your rate limits: https://openrouter.ai/settings/integrations",
    "provider_name": "Google AI Studio"}}}


@pytest.mark.parametrize("status", [429, 200])
def test_the_upstream_reason_a_relay_keeps_in_its_metadata_reaches_the_user(fake: FakeOpenAI, status: int) -> None:
    fake.fault(status=status, kind="not_chat" if status == 200 else None, times=None,  # type: ignore[arg-type]
               body=json.dumps(OPENROUTER_429).encode())
    chat, _ = client(fake.base_url, model_max_retries=0)
    with pytest.raises(LLMError) as err:
        ask(chat)
    assert err.value.kind == "rate_limited"
    assert "Provider returned error" in err.value.message
    upstream = "Google AI Studio: google/gemini-2.0-flash-exp:free is temporarily rate-limited upstream"
    assert upstream in err.value.message


def test_a_think_block_before_structured_output_is_dropped_before_parsing(fake: FakeOpenAI) -> None:
    fake.rule(lambda r: True, reply_text('<think>\nThe user asks whether. Yes, score 1.\n</think>\n\n'
                                         '{"answer": "yes", "score": 1}'))
    chat, _ = client(fake.base_url)
    got = chat.structured(model="gpt-4.1-mini", system="Judge.", messages="Is it?", output=Answer, max_tokens=100,
                          purpose="judge")
    assert got == Answer(answer="yes", score=1) and len(fake.requests) == 1  # no repair was needed


@pytest.mark.parametrize(("content", "text"), [
    ("<think>a\nb</think>\n\nThe answer.", "The answer."),
    ("  <think>only thinking, cut at the limit", ""),
    ("reasoning whose opening tag was in the template</think>The answer.", "The answer."),
    ("The answer mentions <think> and </think> tags.", "The answer mentions <think> and </think> tags."),
    ("No reasoning at all.", "No reasoning at all."),
])
def test_only_a_leading_reasoning_block_is_taken_out_of_a_reply(fake: FakeOpenAI, content: str, text: str) -> None:
    fake.fault(kind="not_chat", body=completion({"content": content}))
    chat, _ = client(fake.base_url)
    assert ask(chat).text == text


@pytest.mark.parametrize("mode", ["fixed", "tools"])
def test_a_reasoning_model_that_thinks_in_its_content_completes_runs_and_its_thoughts_stay_out(
        make_world: Any, mode: str) -> None:
    world = make_world(think=True)
    result, _ = world.run(QUESTION, mode)
    assert result.status == "complete" and result.findings, result.problems
    assert "OutputInvalid" not in json.dumps([p.model_dump() for p in result.problems])
    everything = result.model_dump_json()
    assert "<think>" not in everything and THOUGHT not in everything and "99 dollars" not in everything
