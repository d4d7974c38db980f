"""The fake Messages API itself: the API rules it enforces, request-driven answers, faults, usage and cache simulation.

Spoken to with plain httpx (the SDK is used by pipeline/models/anthropic.py alone); test_llm.py drives it with
the real SDK.
"""
from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from pipeline.core.schema import Plan
from tests.fakes.anthropic_api import FakeAnthropic, MessagesRequest, reply_text, reply_tool_use

EPH = {"type": "ephemeral"}


def post(fake: FakeAnthropic, body: dict[str, Any], path: str = "/v1/messages", **kw: Any) -> httpx.Response:
    headers = {"authorization": "Bearer sk-ant-test-fake-key-000", "anthropic-version": "2023-06-01"}
    return httpx.post(fake.base_url + path, json=body, headers=headers, timeout=kw.pop("timeout", 5.0), **kw)


def msg(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "claude-haiku-5-5", "max_tokens": 200, "messages": [{"role": "user", "content": text}], **extra}


@pytest.mark.parametrize("body, words", [
    ({"model": "m", "messages": [{"role": "user", "content": "x"}]}, "max_tokens: Field required"),
    ({**msg("x"), "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}, "alternate"),
    ({**msg("x"), "messages": [{"role": "assistant", "content": "a"}]}, "first message"),
    ({**msg("x"), "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_nope", "content": "r"}]}]}, "unexpected `tool_use_id`"),
    ({**msg("x"), "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}]},
        {"role": "user", "content": "what next"}]}, "without `tool_result`"),
    ({**msg("x"), "system": [{"type": "text", "text": str(i), "cache_control": EPH} for i in range(5)]},
     "maximum of 4 blocks with cache_control"),
    ({**msg("x"), "output_config": {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {}}}}},
     "additionalProperties"),
    ({**msg("x"), "tools": [{"name": "t", "input_schema": {"type": "object"}}],
      "tool_choice": {"type": "tool", "name": "u"}}, "not found in tools"),
])
def test_invalid_requests_get_the_real_apis_400(body: dict[str, Any], words: str) -> None:
    with FakeAnthropic() as fake:
        r = post(fake, body)
    assert r.status_code == 400 and r.headers["request-id"].startswith("req_fake_")
    err = r.json()
    assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
    assert words in err["error"]["message"]


def test_unknown_path_and_wrong_key() -> None:
    with FakeAnthropic(api_key="sk-ant-test-other-000000") as fake:
        assert post(fake, msg("x"), "/v1/complete").status_code == 404
        r = post(fake, msg("x"))
        assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
        assert "sk-ant" not in repr(fake.requests[-1])  # the record never shows its headers


def test_answers_depend_on_the_request_not_on_arrival_order() -> None:
    with FakeAnthropic() as fake:
        fake.rule(lambda r: "alpha" in r.last_user_text, reply_text("A"))
        fake.rule(lambda r: "beta" in r.last_user_text, lambda r: reply_text(r.last_user_text.upper()))
        with ThreadPoolExecutor(4) as pool:
            words = ["alpha", "beta", "gamma"] * 4
            texts = list(pool.map(lambda w: post(fake, msg(w)).json()["content"][0]["text"], words))
    assert texts == ["A", "BETA", "ok"] * 4


def test_faults_count_matching_requests_only() -> None:
    with FakeAnthropic() as fake:
        flaky = fake.fault(lambda r: "flaky" in r.last_user_text, status=529, times=2)
        assert post(fake, msg("steady")).status_code == 200
        statuses = [post(fake, msg("flaky")).status_code for _ in range(3)]
        r529 = fake.requests[1]
    assert statuses == [529, 529, 200] and flaky.fired == 2
    assert r529.response == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"},
                              "request_id": None}


def test_hang_is_released_when_the_fake_closes() -> None:
    fake = FakeAnthropic(hang_seconds=30)
    with fake:
        fake.fault(kind="hang")
        with pytest.raises(httpx.ReadTimeout):
            post(fake, msg("x"), timeout=0.2)
        start = time.monotonic()
    assert time.monotonic() - start < 2


def test_cache_simulation_follows_the_exact_prefix_bytes_and_the_model() -> None:
    system = [{"type": "text", "text": "static instructions " * 20, "cache_control": EPH}]
    with FakeAnthropic(min_cache_tokens=50) as fake:
        u1 = post(fake, msg("one", system=system)).json()["usage"]
        u2 = post(fake, msg("two", system=system)).json()["usage"]
        changed = [{**system[0], "text": system[0]["text"] + "!"}]
        u3 = post(fake, msg("three", system=changed)).json()["usage"]
        u4 = post(fake, {**msg("four", system=system), "model": "claude-sonnet-5-5"}).json()["usage"]
        u5 = post(fake, msg("short", system=[{"type": "text", "text": "tiny", "cache_control": EPH}])).json()["usage"]
    assert u1["cache_creation_input_tokens"] > 50 and u1["cache_read_input_tokens"] == 0
    assert u2["cache_read_input_tokens"] == u1["cache_creation_input_tokens"] and u2["cache_creation_input_tokens"] == 0
    assert u3["cache_read_input_tokens"] == 0 and u3["cache_creation_input_tokens"] > 0
    assert u4["cache_read_input_tokens"] == 0  # caches are per model
    assert u5["cache_creation_input_tokens"] == 0  # below the minimum cacheable length
    total1 = u1["input_tokens"] + u1["cache_creation_input_tokens"]
    assert total1 == u2["input_tokens"] + u2["cache_read_input_tokens"]


def test_long_replies_are_cut_at_max_tokens() -> None:
    with FakeAnthropic(lambda r: reply_text("word " * 500)) as fake:
        r = post(fake, msg("x", max_tokens=50)).json()
    assert r["stop_reason"] == "max_tokens" and r["usage"]["output_tokens"] == 50
    assert 0 < len(r["content"][0]["text"]) <= 200


def test_default_brain_answers_structured_requests_with_a_valid_instance() -> None:
    schema = Plan.model_json_schema()
    with FakeAnthropic() as fake:
        r = post(fake, msg("plan", output_config={"format": {"type": "json_schema", "schema": schema}})).json()
    assert Plan.model_validate_json(r["content"][0]["text"]) == Plan()


def test_tool_use_ids_are_filled_and_the_response_has_the_messages_shape() -> None:
    tools = [{"name": "calc", "input_schema": {"type": "object"}}]
    with FakeAnthropic() as fake:
        fake.rule(lambda r: r.has_tool("calc"), reply_tool_use("calc", {"expr": "1+1"}))
        r = post(fake, msg("add", tools=tools)).json()
        view: MessagesRequest = fake.message_requests[0]
        counted = post(fake, {"model": "m", "messages": [{"role": "user", "content": "add"}]},
                       "/v1/messages/count_tokens").json()
    assert set(r) >= {"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"}
    assert r["type"] == "message" and r["role"] == "assistant" and r["stop_reason"] == "tool_use"
    assert r["content"][0]["id"].startswith("toolu_") and r["content"][0]["input"] == {"expr": "1+1"}
    assert set(r["usage"]) >= {"input_tokens", "output_tokens", "cache_read_input_tokens",
                               "cache_creation_input_tokens"}
    assert view.tool_names == ("calc",) and view.last_user_text == "add"
    assert counted["input_tokens"] > 0
    assert json.loads(fake.requests[0].field_bytes("tools") or b"null") == tools


def test_a_broken_brain_is_reported_not_retried() -> None:
    with FakeAnthropic(lambda r: 1 / 0) as fake:  # type: ignore[arg-type,return-value]
        r = post(fake, msg("x"))
    assert r.status_code == 500 and r.headers["x-should-retry"] == "false"
    assert "ZeroDivisionError" in r.json()["error"]["message"] and isinstance(fake.handler_errors[0], ZeroDivisionError)
