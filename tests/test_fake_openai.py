"""The fake Chat Completions API, driven by the real `openai` SDK: translation to and from the Anthropic-shaped view
the brains read, the API's history rules, capability refusals, faults as the SDK sees them, and prefix caching."""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import openai
import pytest

from pipeline.core.schema import Plan
from tests.fakes.anthropic_api import (
    FakeReply,
    MessagesRequest,
    _tokens,
    reply_refusal,
    reply_text,
    reply_tool_use,
)
from tests.fakes.openai_api import FakeOpenAI, reply_tool_call
from tests.fakes.research_brain import ResearchBrain

KEY = "sk-test-fake-openai-000"
MODEL = "gpt-test-mini"
CALC: dict[str, Any] = {"type": "function", "function": {
    "name": "calc", "description": "Evaluate an expression.",
    "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"]}}}


@contextmanager
def sdk(fake: FakeOpenAI, *, max_retries: int = 0, timeout: float = 5.0) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(api_key=KEY, base_url=fake.base_url, max_retries=max_retries, timeout=timeout) as client:
        yield client


def ask(client: openai.OpenAI, text: str = "hi", **kw: Any) -> Any:
    """One completion for `text` (or for kw["messages"]); returns what the SDK returns."""
    messages = kw.pop("messages", [{"role": "user", "content": text}])
    return client.chat.completions.create(model=kw.pop("model", MODEL), messages=messages, **kw)


def call(id: str, name: str, args: str) -> dict[str, Any]:
    return {"id": id, "type": "function", "function": {"name": name, "arguments": args}}


# -- answers ---------------------------------------------------------------------------------------------------------
def test_a_plain_text_reply_and_the_view_the_brain_saw() -> None:
    with FakeOpenAI(api_key=KEY) as fake, sdk(fake) as client:
        r = ask(client, messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
                max_completion_tokens=100)
        view = fake.chat_requests[0]
        rec = fake.requests[0]
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-") and r.model == MODEL
    choice = r.choices[0]
    assert choice.message.content == "ok" and choice.message.tool_calls is None and choice.finish_reason == "stop"
    assert r.usage.prompt_tokens > 0 and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert view.system_text == "Be brief." and view.messages == [{"role": "user", "content": [
        {"type": "text", "text": "hi"}]}]
    assert view.max_tokens == 100 and view.output_schema is None and view.contains("Be brief.")
    assert rec.api_key == KEY and rec.status == 200 and rec.response == r.model_dump(exclude_unset=True)
    assert KEY not in repr(rec)


def test_a_json_schema_request_gets_a_minimal_instance_and_json_mode_has_no_schema() -> None:
    schema = Plan.model_json_schema()
    fmt = {"type": "json_schema", "json_schema": {"name": "Plan", "schema": schema, "strict": True}}
    with FakeOpenAI() as fake, sdk(fake) as client:
        structured = ask(client, "plan", response_format=fmt).choices[0].message.content
        loose = ask(client, "anything", response_format={"type": "json_object"}).choices[0].message.content
        views = fake.chat_requests
    assert Plan.model_validate_json(structured) == Plan()
    assert views[0].output_schema == schema and views[1].output_schema is None and loose == "ok"


def test_a_tool_call_round_trip_with_the_result_in_the_history() -> None:
    def brain(req: MessagesRequest) -> FakeReply:
        if req.tool_results:
            return reply_text(f"got {req.tool_results[0]['content']}")
        return reply_tool_use("calc", {"expr": "1+1"}, text="Let me compute.")

    with FakeOpenAI(brain) as fake, sdk(fake) as client:
        first = ask(client, "add", tools=[CALC], tool_choice="auto").choices[0]
        tc = first.message.tool_calls[0]
        history = [{"role": "user", "content": "add"},
                   {"role": "assistant", "content": first.message.content, "tool_calls": [
                       call(tc.id, tc.function.name, tc.function.arguments)]},
                   {"role": "tool", "tool_call_id": tc.id, "content": "2"},
                   {"role": "user", "content": "and now?"}]
        second = ask(client, messages=history, tools=[CALC]).choices[0]
        view = fake.chat_requests[1]
    assert first.finish_reason == "tool_calls" and first.message.content == "Let me compute."
    assert tc.id.startswith("call_") and tc.type == "function" and json.loads(tc.function.arguments) == {"expr": "1+1"}
    assert second.message.content == "got 2" and second.finish_reason == "stop"
    assert view.tools == [{"name": "calc", "description": "Evaluate an expression.",
                           "input_schema": CALC["function"]["parameters"]}]
    assert view.tool_choice is None and fake.chat_requests[0].tool_choice == {"type": "auto"}
    assert view.messages == [  # the tool message and the user message after it: ONE user turn
        {"role": "user", "content": [{"type": "text", "text": "add"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Let me compute."},
                                          {"type": "tool_use", "id": tc.id, "name": "calc", "input": {"expr": "1+1"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tc.id, "content": "2"},
                                     {"type": "text", "text": "and now?"}]}]


def test_the_research_brain_plans_and_works_unchanged_behind_it() -> None:
    question = "Which is the most popular Python web framework?"
    planner = f"<max_sub_questions>3</max_sub_questions>\n<question>{question}</question>"
    fmt = {"type": "json_schema", "json_schema": {"name": "Plan", "schema": Plan.model_json_schema()}}
    tools = [{**CALC, "function": {**CALC["function"], "name": n}} for n in ("web_search", "record_finding")]
    worker = "<sub_question>Django stars</sub_question>\n<suggested_queries>django github stars</suggested_queries>"
    with FakeOpenAI(ResearchBrain()) as fake, sdk(fake) as client:
        plan = json.loads(ask(client, messages=[{"role": "system", "content": "You plan research."},
                                                {"role": "user", "content": planner}], response_format=fmt)
                          .choices[0].message.content)
        search = ask(client, worker, tools=tools).choices[0].message.tool_calls[0]
        fetch = ask(client, tools=tools, messages=[
            {"role": "user", "content": worker},
            {"role": "assistant", "content": None, "tool_calls": [call(search.id, "web_search",
                                                                        search.function.arguments)]},
            {"role": "tool", "tool_call_id": search.id, "content": "SEARCH_RESULTS\n  url: https://a.example/d"},
        ]).choices[0].message.tool_calls[0]
    sub = plan["sub_questions"][0]
    assert sub["proxy"] == "most GitHub stars" and sub["queries"] == [question]
    assert search.function.name == "web_search" and json.loads(search.function.arguments) == {
        "query": "django github stars"}
    assert fetch.function.name == "fetch_page" and json.loads(fetch.function.arguments)["url"] == "https://a.example/d"


def test_long_replies_are_cut_and_refusals_set_refusal() -> None:
    half = FakeReply([{"type": "text", "text": "I started to"}], "refusal", stop_details={"explanation": "Not this."})

    def brain(req: MessagesRequest) -> FakeReply:
        said = {"harm": reply_refusal(), "half": half}
        return said.get(req.last_user_text, reply_text("word " * 500))

    with FakeOpenAI(brain) as fake, sdk(fake) as client:
        cut = ask(client, "essay", max_tokens=50)
        refused, explained = (ask(client, text).choices[0] for text in ("harm", "half"))
    assert cut.choices[0].finish_reason == "length" and cut.usage.completion_tokens == 50
    assert 0 < len(cut.choices[0].message.content) <= 200
    assert refused.finish_reason == "stop" and refused.message.content is None and refused.message.refusal
    assert explained.message.content is None and explained.message.refusal == "Not this."


# -- capabilities, key and model ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("setting, extra, param", [
    ("supports_schema", {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}},
     "response_format"),
    ("supports_json_mode", {"response_format": {"type": "json_object"}}, "response_format"),
    ("supports_tools", {"tools": [CALC]}, "tools"),
])
def test_a_server_without_a_capability_refuses_only_requests_using_it(setting: str, extra: dict[str, Any],
                                                                      param: str) -> None:
    off: dict[str, Any] = {setting: False}
    with FakeOpenAI(**off) as fake, sdk(fake, max_retries=2) as client:
        assert ask(client, "plain").choices[0].message.content == "ok"
        with pytest.raises(openai.BadRequestError) as e:
            ask(client, "fancy", **extra)
        requests = len(fake.requests)
    assert e.value.status_code == 400 and e.value.param == param and requests == 2  # a 400 is not retried
    assert "not supported" in e.value.message


def test_a_wrong_key_gets_401_and_an_unknown_model_404() -> None:
    with FakeOpenAI(api_key="sk-test-other-key-000", models={"gpt-known"}) as fake, sdk(fake, max_retries=2) as client:
        with pytest.raises(openai.AuthenticationError) as auth:
            ask(client, model="gpt-known")
        fake.api_key = KEY
        with pytest.raises(openai.NotFoundError) as missing:
            ask(client, model="gpt-unknown")
        known = ask(client, model="gpt-known").choices[0].message.content
        sent = [r.headers["authorization"] for r in fake.requests]
    assert auth.value.status_code == 401 and auth.value.code == "invalid_api_key"
    assert missing.value.code == "model_not_found" and "`gpt-unknown` does not exist" in missing.value.message
    assert known == "ok" and sent == [f"Bearer {KEY}"] * 3


# -- request validation --------------------------------------------------------------------------------------------
GO = {"role": "user", "content": "go"}


def asks(*ids: str) -> dict[str, Any]:
    """An assistant message calling tool "t" once per id."""
    return {"role": "assistant", "content": None, "tool_calls": [call(i, "t", "{}") for i in ids]}


def answer(id: str, content: str = "r") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": id, "content": content}


@pytest.mark.parametrize("messages, words", [
    ([answer("call_1")], "must be a response to a preceeding message"),
    ([GO, asks("call_1"), answer("call_2")], "'call_2' answers none"),
    ([GO, asks("call_1"), {"role": "user", "content": "next"}], "did not have response messages: call_1"),
    ([GO, asks("call_1", "call_2"), answer("call_1")], "did not have response messages: call_2"),
    ([GO, asks("call_1"), answer("call_1"), answer("call_1", "again")], "'call_1' answers none"),
    ([], "empty array"),
])
def test_sloppy_histories_get_the_real_apis_400(messages: list[dict[str, Any]], words: str) -> None:
    with FakeOpenAI() as fake, sdk(fake) as client, pytest.raises(openai.BadRequestError) as e:
        ask(client, messages=messages)
    assert e.value.status_code == 400 and words in e.value.message and e.value.type == "invalid_request_error"


def test_a_complete_tool_exchange_is_accepted() -> None:
    calls = {"role": "assistant", "content": None, "tool_calls": [call("call_1", "t", "{}"), call("call_2", "t", "")]}
    history = [GO, calls, answer("call_2", "b"), answer("call_1", "a")]
    with FakeOpenAI() as fake, sdk(fake) as client:
        assert ask(client, messages=history).choices[0].message.content == "ok"
        view = fake.chat_requests[0]
    assert [b["tool_use_id"] for b in view.tool_results] == ["call_2", "call_1"]
    assert view.messages[1]["content"][1]["input"] == {}  # arguments that are not JSON


@pytest.mark.parametrize("raw, words", [
    (b"{not json", "could not parse the JSON body"),
    (json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode(), "you must provide a model"),
    (json.dumps({"model": MODEL}).encode(), "Missing required parameter: 'messages'"),
])
def test_bodies_the_sdk_would_never_send(raw: bytes, words: str) -> None:
    with FakeOpenAI() as fake:
        r = httpx.post(fake.base_url + "/chat/completions", content=raw, timeout=5.0,
                       headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"})
        wrong_path = httpx.post(fake.base_url + "/completions", json={}, timeout=5.0)
    assert r.status_code == 400 and words in r.json()["error"]["message"]
    assert wrong_path.status_code == 404
    assert wrong_path.json()["error"]["message"] == "Invalid URL (POST /v1/completions)"


# -- faults as the SDK sees them ---------------------------------------------------------------------------------------
def test_a_529_is_retried_after_a_millisecond() -> None:
    with FakeOpenAI() as fake, sdk(fake, max_retries=1) as client:
        overloaded = fake.fault(status=529, times=1)
        start = time.monotonic()
        text = ask(client).choices[0].message.content
        elapsed = time.monotonic() - start
        recs = fake.requests
    assert text == "ok" and overloaded.fired == 1 and elapsed < 0.3
    assert [r.status for r in recs] == [529, 200]
    assert [r.headers["x-stainless-retry-count"] for r in recs] == ["0", "1"]
    assert recs[0].response == {"error": {"message": "Fake fault 529", "type": "server_error", "param": None,
                                          "code": None}}


def test_a_rate_limit_beyond_the_retries_raises_and_a_broken_brain_is_not_retried() -> None:
    def brain(req: MessagesRequest) -> FakeReply:
        return reply_text(str(1 / 0)) if "boom" in req.last_user_text else reply_text("ok")

    with FakeOpenAI(brain) as fake, sdk(fake, max_retries=2) as client:
        fake.fault(lambda r: "busy" in r.last_user_text, status=429, times=None)
        with pytest.raises(openai.RateLimitError) as limited:
            ask(client, "busy")
        with pytest.raises(openai.InternalServerError) as broken:
            ask(client, "boom")
        statuses = [r.status for r in fake.requests]
    assert limited.value.code == "rate_limit_exceeded" and statuses == [429, 429, 429, 500]
    assert "ZeroDivisionError" in broken.value.message and isinstance(fake.handler_errors[0], ZeroDivisionError)


def test_a_hang_times_out_and_is_released_when_the_fake_closes() -> None:
    before = set(threading.enumerate())
    fake = FakeOpenAI(hang_seconds=30)
    with fake, sdk(fake, timeout=0.2) as client:
        fake.fault(kind="hang")
        with pytest.raises(openai.APITimeoutError):
            ask(client)
        handlers = [t for t in set(threading.enumerate()) - before if "process_request" in t.name]
        start = time.monotonic()
    for t in handlers:
        t.join(2)
    assert time.monotonic() - start < 2 and handlers and not any(t.is_alive() for t in handlers)
    assert fake.requests[0].status == -1


@pytest.mark.parametrize("kind", ["reset", "cut"])
def test_a_reset_or_cut_connection_is_a_connection_error_after_retries(kind: Any) -> None:
    with FakeOpenAI() as fake, sdk(fake, max_retries=1) as client:
        fake.fault(kind=kind, times=None)
        with pytest.raises(openai.APIConnectionError) as e:
            ask(client)
        fake.reset()
        recovered = ask(client).choices[0].message.content
    assert not isinstance(e.value, openai.APITimeoutError) and recovered == "ok"


def test_what_the_sdk_returns_for_a_200_that_is_not_a_chat_completion() -> None:
    with FakeOpenAI() as fake, sdk(fake, max_retries=2) as client:
        fake.fault(kind="html")
        page = ask(client)
        fake.fault(kind="not_chat")
        listing = ask(client)
        fake.fault(kind="malformed_json")
        with pytest.raises(json.JSONDecodeError):  # not an openai.APIError: the SDK parses the 200 body bare
            ask(client)
        requests = len(fake.requests)
    assert isinstance(page, str) and "<html>" in page  # the SDK hands back the text, typed as a ChatCompletion
    assert isinstance(listing, openai.types.chat.ChatCompletion) and listing.choices is None
    assert listing.object == "list" and requests == 3  # none retried


def test_a_reply_fault_sends_tool_arguments_that_are_not_json_once() -> None:
    with FakeOpenAI() as fake, sdk(fake) as client:
        bad = fake.fault(kind="reply", reply=reply_tool_call("calc", '{"expr": "1+'))
        first = ask(client, "add", tools=[CALC]).choices[0]
        second = ask(client, "add", tools=[CALC]).choices[0]
    assert bad.fired == 1 and first.finish_reason == "tool_calls"
    assert first.message.tool_calls[0].function.arguments == '{"expr": "1+'
    assert second.message.content == "ok" and second.message.tool_calls is None


def test_observers_rules_count_and_reset() -> None:
    seen: list[str] = []
    with FakeOpenAI() as fake, sdk(fake) as client:
        fake.on_request(lambda r: seen.append(r.last_user_text))
        fake.rule(lambda r: "alpha" in r.last_user_text, reply_text("A"))
        texts = [ask(client, w).choices[0].message.content for w in ("alpha", "beta", "alpha")]
        counted = fake.count(lambda r: "alpha" in r.last_user_text), fake.count()
        fake.reset()
        after = ask(client, "alpha").choices[0].message.content
    assert texts == ["A", "ok", "A"] and seen == ["alpha", "beta", "alpha"] and counted == (2, 3)
    assert after == "ok" and fake.count() == 1


# -- usage and prefix caching ------------------------------------------------------------------------------------------
def test_prefix_caching_bills_the_shared_prefix_in_steps_above_the_minimum() -> None:
    long = "static instructions for every call " * 250  # about 2,200 tokens
    convo = [{"role": "system", "content": long}]
    with FakeOpenAI() as fake, sdk(fake) as client:
        u1 = ask(client, messages=[*convo, {"role": "user", "content": "one"}]).usage
        u2 = ask(client, messages=[*convo, {"role": "user", "content": "two"}]).usage
        u3 = ask(client, messages=[*convo, {"role": "user", "content": "three"}], model="gpt-other").usage
        short = [ask(client, "short question").usage for _ in range(2)]
        recs = fake.requests
    cached = u2.prompt_tokens_details.cached_tokens
    assert u1.prompt_tokens_details.cached_tokens == 0 and u1.prompt_tokens > _tokens(long)
    assert cached % 128 == 0 and _tokens(long) - 128 <= cached <= u2.prompt_tokens
    assert u3.prompt_tokens_details.cached_tokens == 0  # caches are per model
    assert [u.prompt_tokens_details.cached_tokens for u in short] == [0, 0]  # below 1,024 tokens
    assert [r.cached_tokens for r in recs] == [0, cached, 0, 0, 0]


def test_prefix_caching_thresholds_are_settings() -> None:
    with FakeOpenAI(min_cache_tokens=16, cache_increment=4) as fake, sdk(fake) as client:
        fake.fault(lambda r: "fail" in r.last_user_text, status=500)
        question = "a question long enough for the lowered cache minimum: "
        first = ask(client, question + "first").usage
        failed = pytest.raises(openai.InternalServerError, ask, client, question + "fail")
        again = ask(client, question + "again").usage
        other = ask(client, "another question, as long, sharing only the JSON around it").usage
        recs = fake.requests
    assert first.prompt_tokens_details.cached_tokens == 0 and failed.value.status_code == 500
    assert other.prompt_tokens >= 16 and other.prompt_tokens_details.cached_tokens == 0  # a prefix below the minimum
    assert again.prompt_tokens_details.cached_tokens >= 16 and again.prompt_tokens_details.cached_tokens % 4 == 0
    assert recs[1].cached_tokens is None  # a failed request is not billed
