"""models/anthropic.py through the real anthropic SDK against the loopback fake of the Messages API
(tests/fakes/anthropic_api.py)."""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pipeline.config import ConfigError, Settings
from pipeline.core.budget import Budget, Grant, Phase
from pipeline.core.event_types import Event
from pipeline.core.schema import BudgetLimits
from pipeline.models.anthropic import LLM, WEB_SEARCH_TOOL, LLMError
from pipeline.models.replies import REPAIR_INTRO, _unfenced
from tests.fakes.anthropic_api import (
    FakeAnthropic,
    FakeReply,
    MessagesRequest,
    reply_json,
    reply_refusal,
    reply_text,
    reply_tool_use,
    reply_web_search,
)
from tests.regex_audit import token_texts

KEY = "sk-ant-test-" + "Zq7" * 10
LEAD = "claude-sonnet-5-5"
ROOT = Path(__file__).resolve().parent.parent
TOOLS = (
    {"name": "web_search", "description": "Search the web.",
     "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
    {"name": "fetch_page", "description": "Fetch a page.",
     "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}},
)


@dataclass
class RecordingSink:
    """Keeps every event exactly as emitted (no redaction), so tests can look for leaked secrets."""

    events: list[tuple[str, dict[str, Any], int, float]] = field(default_factory=list)

    def emit(self, event: Event, *, tokens: int = 0, ms: float = 0.0) -> None:
        self.events.append((event.kind, json.loads(json.dumps(event.payload())), tokens, ms))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [p for k, p, _t, _m in self.events if k == kind]


class Answer(BaseModel):
    claim: str
    confidence: int


def make(fake: FakeAnthropic, *, limits: BudgetLimits | None = None, retries: int = 2,
         timeout: float = 2.0) -> tuple[LLM, Budget, RecordingSink]:
    settings = Settings(anthropic_api_key=KEY, anthropic_base_url=fake.base_url,
                        model_max_retries=retries, model_timeout=timeout)
    budget = Budget(limits or BudgetLimits(), settings.price)
    sink = RecordingSink()
    return LLM(settings, budget, sink), budget, sink


def ask(llm: LLM, text: str = "hello", **kw: Any) -> Any:
    args: dict[str, Any] = {"model": LEAD, "system": "You are terse.", "messages": [{"role": "user", "content": text}],
                            "max_tokens": 400, "purpose": "test"}
    return llm.call(**{**args, **kw})


def expected_cost(settings_price: Any, usage: dict[str, int]) -> float:
    return (usage["input_tokens"] * settings_price.input + usage["output_tokens"] * settings_price.output
            + usage["cache_creation_input_tokens"] * settings_price.cache_write
            + usage["cache_read_input_tokens"] * settings_price.cache_read) / 1_000_000


# -- request shape and plain calls ---------------------------------------------------------------
def test_plain_call_sends_cacheable_prefix_and_returns_the_reply() -> None:
    with FakeAnthropic() as fake:
        fake.rule(lambda r: r.last_user_text == "hello", reply_text("hi there"))
        llm, budget, _ = make(fake)
        reply = ask(llm, tools=TOOLS)
        rec = fake.requests[0]
    body = rec.body
    assert rec.api_key == KEY and "anthropic-version" in rec.headers
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    assert [t["name"] for t in body["tools"]] == ["web_search", "fetch_page"]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["max_tokens"] == 400 and "output_config" not in body
    assert reply.text == "hi there" and reply.stop_reason == "end_turn" and reply.tool_uses == []
    assert reply.request_id and reply.request_id.startswith("req_fake_")
    assert reply.usage.model_calls == 1 and budget.used().model_calls == 1


def test_static_prefix_is_byte_identical_and_cache_reads_are_priced_as_such() -> None:
    with FakeAnthropic() as fake:
        llm, budget, _ = make(fake)
        first = ask(llm, "first question", tools=TOOLS)
        # The same tools built with keys in another order must still give the same bytes.
        reordered = tuple({k: t[k] for k in reversed(list(t))} for t in TOOLS)
        second = ask(llm, "a different second question", tools=reordered)
        r1, r2 = fake.requests
    for name in ("tools", "system"):
        assert r1.field_bytes(name) == r2.field_bytes(name)
    assert r1.field_bytes("messages") != r2.field_bytes("messages")
    u1, u2 = r1.response["usage"], r2.response["usage"]
    assert u1["cache_creation_input_tokens"] > 0 and u1["cache_read_input_tokens"] == 0
    assert u2["cache_read_input_tokens"] == u1["cache_creation_input_tokens"] and u2["cache_creation_input_tokens"] == 0
    price = Settings().price(LEAD)
    assert first.usage.cost_usd == pytest.approx(expected_cost(price, u1), abs=1e-12)
    assert second.usage.cost_usd == pytest.approx(expected_cost(price, u2), abs=1e-12)
    assert second.usage.cache_read_input_tokens == u2["cache_read_input_tokens"]
    used = budget.used()
    assert used.cost_usd == pytest.approx(expected_cost(price, u1) + expected_cost(price, u2), abs=1e-12)
    assert used.cache_read_input_tokens == u2["cache_read_input_tokens"]
    assert used.cache_creation_input_tokens == u1["cache_creation_input_tokens"]


def test_tool_use_turn_is_parsed_and_tool_results_round_trip() -> None:
    with FakeAnthropic() as fake:
        fake.rule(lambda r: r.has_tool("fetch_page") and not r.tool_results,
                  reply_tool_use("fetch_page", {"url": "https://example.org/a"}, text="Let me read it."))
        fake.rule(lambda r: any(t.get("content") == "page text" for t in r.tool_results), reply_text("done"))
        llm, _, _ = make(fake)
        history: list[dict[str, Any]] = [{"role": "user", "content": "read example.org"}]
        turn = llm.call(model=LEAD, system="s", messages=history, max_tokens=400, tools=TOOLS, purpose="worker")
        assert turn.stop_reason == "tool_use" and turn.text == "Let me read it."
        [use] = turn.tool_uses
        assert use.name == "fetch_page" and use.input == {"url": "https://example.org/a"} and use.id
        result = {"type": "tool_result", "tool_use_id": use.id, "content": "page text"}
        history += [{"role": "assistant", "content": turn.provider_turn}, {"role": "user", "content": [result]}]
        final = llm.call(model=LEAD, system="s", messages=history, max_tokens=400, tools=TOOLS, purpose="worker")
    assert final.text == "done" and final.stop_reason == "end_turn"


def test_bad_request_carries_the_apis_message() -> None:
    with FakeAnthropic() as fake:
        llm, budget, sink = make(fake)
        with pytest.raises(LLMError) as err:
            ask(llm, messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    assert err.value.kind == "bad_request" and "HTTP 400" in str(err.value) and "alternate" in str(err.value)
    assert budget.used().model_calls == 0 and sink.of("model_error")[0]["kind"] == "bad_request"


# -- structured output ---------------------------------------------------------------------------
def test_structured_output_sends_a_strict_schema_and_validates() -> None:
    with FakeAnthropic() as fake:
        fake.rule(lambda r: r.output_schema is not None, reply_json({"claim": "water is wet", "confidence": 3}))
        llm, _, _ = make(fake)
        got = llm.structured(model=LEAD, system="s", messages="judge", output=Answer, max_tokens=300, purpose="judge")
        body = fake.requests[0].body
    assert got == Answer(claim="water is wet", confidence=3)
    fmt = body["output_config"]["format"]
    assert fmt["type"] == "json_schema" and fmt["schema"]["additionalProperties"] is False
    assert set(fmt["schema"]["properties"]) == {"claim", "confidence"}
    assert body["messages"] == [{"role": "user", "content": "judge"}]


def test_structured_output_repairs_once_with_the_validation_errors() -> None:
    def brain(r: MessagesRequest) -> FakeReply:
        if REPAIR_INTRO in r.last_user_text:
            return reply_json({"claim": "fixed", "confidence": 2})
        return reply_json({"claim": "missing confidence"})

    with FakeAnthropic(brain) as fake:
        llm, budget, sink = make(fake)
        got = llm.structured(model=LEAD, system="s", messages="judge", output=Answer, max_tokens=300, purpose="judge")
        first, repair = fake.message_requests
    assert got == Answer(claim="fixed", confidence=2)
    assert repair.messages[1] == {"role": "assistant",
                                  "content": [{"type": "text", "text": '{"claim": "missing confidence"}'}]}
    assert "confidence" in repair.last_user_text and "corrected JSON" in repair.last_user_text
    assert budget.used().model_calls == 2
    assert [p["purpose"] for p in sink.of("model_request")] == ["judge", "judge:repair"]


def test_structured_output_failing_twice_is_a_clear_malformed_error() -> None:
    with FakeAnthropic(lambda r: reply_text("I think the answer is yes.")) as fake:
        llm, _, sink = make(fake)
        with pytest.raises(LLMError) as err:
            llm.structured(model=LEAD, system="s", messages="judge", output=Answer, max_tokens=300, purpose="judge")
        assert fake.count() == 2
    assert err.value.kind == "malformed" and "Answer" in str(err.value) and "\n" not in str(err.value)
    assert sink.of("model_error")[-1]["kind"] == "malformed"


def test_structured_output_cut_off_at_max_tokens_is_retried_with_more_room() -> None:
    long_claim = "x" * 1500  # about 380 tokens of JSON: more than 300, less than 600
    with FakeAnthropic(lambda r: reply_json({"claim": long_claim, "confidence": 1})) as fake:
        llm, _, _ = make(fake)
        got = llm.structured(model=LEAD, system="s", messages="judge", output=Answer, max_tokens=300, purpose="judge")
        first, repair = fake.requests
    assert first.response["stop_reason"] == "max_tokens"
    assert first.body["max_tokens"] == 300 and repair.body["max_tokens"] == 600
    assert got.claim == long_claim


# -- stop reasons --------------------------------------------------------------------------------
def test_pause_turn_is_continued_and_usage_summed() -> None:
    def brain(r: MessagesRequest) -> FakeReply:
        if not r.ends_with_assistant:
            return reply_web_search("quantum 2025", [{"url": "https://a.example/q", "title": "Q"}],
                                    stop_reason="pause_turn")
        return reply_text("Summary of results.")

    with FakeAnthropic(brain) as fake:
        llm, budget, _ = make(fake)
        reply = ask(llm, "search quantum")
        first, cont = fake.requests
    paused = first.response["content"]
    assert cont.body["messages"][-1] == {"role": "assistant", "content": paused}
    assert reply.stop_reason == "end_turn" and reply.text == "Summary of results."
    assert reply.provider_turn == paused + cont.response["content"]
    for k in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        assert getattr(reply.usage, k) == first.response["usage"][k] + cont.response["usage"][k]
    assert reply.usage.model_calls == 2 and budget.used().model_calls == 2
    assert budget.used().cost_usd == pytest.approx(reply.usage.cost_usd, abs=1e-12)


def test_pause_turn_continues_at_most_three_times() -> None:
    with FakeAnthropic(lambda r: FakeReply([{"type": "text", "text": "working "}], "pause_turn")) as fake:
        llm, _, _ = make(fake)
        reply = ask(llm)
        assert fake.count() == 4
        # Continuations extend the one trailing assistant turn rather than stacking assistant turns.
        assert len(fake.requests[-1].body["messages"]) == 2
    assert reply.stop_reason == "pause_turn" and reply.text == "working " * 4


def test_max_tokens_stop_is_returned_for_the_caller() -> None:
    with FakeAnthropic(lambda r: reply_text("partial answer", stop_reason="max_tokens")) as fake:
        llm, _, _ = make(fake)
        reply = ask(llm)
    assert reply.stop_reason == "max_tokens" and reply.text == "partial answer"


@pytest.mark.parametrize("reply, kind", [
    (reply_refusal(), "refusal"),
    (FakeReply([], "model_context_window_exceeded"), "context_window"),
])
def test_refusal_and_context_window_stops_are_errors_but_still_charged(reply: FakeReply, kind: str) -> None:
    with FakeAnthropic(lambda r: reply) as fake:
        llm, budget, sink = make(fake)
        with pytest.raises(LLMError) as err:
            ask(llm)
    assert err.value.kind == kind and budget.used().model_calls == 1
    assert sink.of("model_error") == [{"purpose": "test", "kind": kind, "message": str(err.value)}]
    if kind == "refusal":
        assert "declined" in str(err.value)


# -- faults: retried by the SDK, or a clear error ---------------------------------------------------
def test_rate_limit_is_retried_after_the_servers_delay() -> None:
    with FakeAnthropic() as fake:
        fake.fault(status=429, times=1, headers={"retry-after-ms": "150"})
        llm, budget, sink = make(fake)
        start = time.monotonic()
        reply = ask(llm)
        elapsed = time.monotonic() - start
        assert [r.status for r in fake.requests] == [429, 200]
    assert reply.text == "ok" and elapsed >= 0.15
    assert budget.used().model_calls == 1 and len(sink.of("model_response")) == 1


def test_a_huge_retry_after_is_capped_so_the_total_stays_bounded() -> None:
    with FakeAnthropic() as fake:
        fake.fault(status=429, times=1, headers={"retry-after": "20"})
        settings = Settings(anthropic_api_key=KEY, anthropic_base_url=fake.base_url, model_max_retries=1)
        llm = LLM(settings, Budget(BudgetLimits(), settings.price), max_retry_wait=0.05)
        start = time.monotonic()
        assert ask(llm).text == "ok"
    assert time.monotonic() - start < 5


def test_one_server_error_then_success() -> None:
    with FakeAnthropic() as fake:
        fake.fault(status=500, times=1)
        llm, _, _ = make(fake)
        assert ask(llm).text == "ok"
        assert [r.status for r in fake.requests] == [500, 200]


def test_connection_reset_then_success() -> None:
    with FakeAnthropic() as fake:
        fake.fault(kind="reset", times=1)
        llm, _, _ = make(fake)
        assert ask(llm).text == "ok"
        assert fake.count() == 2


@pytest.mark.parametrize("status, kind, words", [
    (529, "overloaded", "try again in a few minutes"),
    (500, "server", "HTTP 500"),
    (429, "rate_limited", "rate limit"),
])
def test_persistent_failure_ends_in_a_clear_error_after_bounded_retries(status: int, kind: str, words: str) -> None:
    with FakeAnthropic() as fake:
        fake.fault(status=status, times=None)
        llm, budget, sink = make(fake, retries=2, limits=BudgetLimits(model_calls=1, reserve=0.0))
        with pytest.raises(LLMError) as err:
            ask(llm)
        assert fake.count() == 3  # one try and max_retries=2 retries, no more
    assert err.value.kind == kind and words in str(err.value) and "\n" not in str(err.value)
    assert budget.used().model_calls == 0 and budget.used().cost_usd == 0
    assert isinstance(budget.authorize_call(LEAD, input_tokens=1, max_tokens=1), Grant)  # the hold was released
    assert sink.of("model_error")[0]["kind"] == kind and not sink.of("model_response")


def test_a_hang_times_out_and_is_retried() -> None:
    with FakeAnthropic() as fake:
        fake.fault(kind="hang", times=1)
        llm, _, _ = make(fake, retries=1, timeout=0.3)
        assert ask(llm).text == "ok"
        assert fake.count() == 2


def test_a_persistent_hang_is_a_timeout_error() -> None:
    with FakeAnthropic() as fake:
        fake.fault(kind="hang", times=None)
        llm, _, _ = make(fake, retries=0, timeout=0.3)
        start = time.monotonic()
        with pytest.raises(LLMError) as err:
            ask(llm)
    assert err.value.kind == "timeout" and "RESEARCH_MODEL_TIMEOUT" in str(err.value)
    assert time.monotonic() - start < 2


NOT_A_MESSAGE = json.dumps({"type": "message", "content": [{"type": "tool_use", "input": {}}],
                           "usage": {"input_tokens": 1, "output_tokens": 1}}).encode()


@pytest.mark.parametrize("body", [None, b'{"hello": "world"}', NOT_A_MESSAGE])
def test_a_200_that_is_not_a_message_is_a_malformed_error(body: bytes | None) -> None:
    with FakeAnthropic() as fake:
        fake.fault(kind="malformed_json", body=body)
        llm, budget, _ = make(fake)
        with pytest.raises(LLMError) as err:
            ask(llm)
    assert err.value.kind == "malformed" and "try again" in str(err.value)
    assert budget.used().model_calls == 0


def test_unreachable_api_is_a_connection_error_naming_the_setting() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    settings = Settings(anthropic_api_key=KEY, anthropic_base_url=f"http://127.0.0.1:{port}", model_max_retries=0)
    llm = LLM(settings, Budget(BudgetLimits(), settings.price))
    with pytest.raises(LLMError) as err:
        ask(llm)
    assert err.value.kind == "connection" and f"127.0.0.1:{port}" in str(err.value)
    assert "ANTHROPIC_BASE_URL" in str(err.value)


def test_refused_key_is_an_auth_error_and_the_key_never_leaks() -> None:
    with FakeAnthropic(api_key="sk-ant-the-right-one") as fake:
        llm, _, sink = make(fake)
        with pytest.raises(LLMError) as err:
            ask(llm)
        assert fake.requests[0].status == 401 and fake.count() == 1  # 401 is not retried
    assert err.value.kind == "auth" and "ANTHROPIC_API_KEY" in str(err.value)
    assert KEY not in str(err.value) and KEY not in repr(err.value)
    assert sink.events and KEY not in json.dumps([e[:2] for e in sink.events])


def test_a_key_echoed_in_an_api_error_is_scrubbed() -> None:
    proxy_key = "pk-gateway-0123456789abcdef"  # not Anthropic-shaped, so only the exact-value scrub can catch it
    echoed = json.dumps({"type": "error", "error": {"type": "invalid_request_error",
                                                    "message": f"bad header Authorization: Bearer {proxy_key}"}})
    with FakeAnthropic() as fake:
        fake.fault(status=400, body=echoed.encode())
        settings = Settings(anthropic_api_key=proxy_key, anthropic_base_url=fake.base_url)
        sink = RecordingSink()
        llm = LLM(settings, Budget(BudgetLimits(), settings.price), sink)
        with pytest.raises(LLMError) as err:
            ask(llm)
    assert err.value.kind == "bad_request" and "bad header" in str(err.value)
    assert proxy_key not in str(err.value) and proxy_key not in json.dumps([e[:2] for e in sink.events])


# -- budget and events ---------------------------------------------------------------------------
def test_budget_refusal_sends_no_request() -> None:
    with FakeAnthropic() as fake:
        llm, _, sink = make(fake, limits=BudgetLimits(model_calls=0))
        with pytest.raises(LLMError) as err:
            ask(llm)
        assert fake.requests == []
    assert err.value.kind == "budget" and "BUDGET_EXHAUSTED" in str(err.value)
    assert sink.of("model_request") == [] and sink.of("model_error")[0]["kind"] == "budget"


def test_budget_grant_lowers_max_tokens() -> None:
    with FakeAnthropic() as fake:
        llm, budget, sink = make(fake, limits=BudgetLimits(cost_usd=0.05, reserve=0.0))
        ask(llm, max_tokens=8000)
        sent = fake.requests[0].body["max_tokens"]
    assert 256 <= sent < 8000 and sink.of("model_request")[0]["body"]["max_tokens"] == sent
    assert budget.used().cost_usd <= 0.05


def test_events_hold_the_exact_bodies_sent_and_received() -> None:
    with FakeAnthropic() as fake:
        llm, _, sink = make(fake)
        ask(llm, tools=TOOLS, phase=Phase.SYNTHESIS, purpose="writer")
        rec = fake.requests[0]
    [req], [resp] = sink.of("model_request"), sink.of("model_response")
    assert req == {"purpose": "writer", "model": LEAD, "phase": "synthesis", "body": rec.body}
    assert resp["response"] == rec.response and resp["stop_reason"] == "end_turn"
    assert resp["usage"] == {k: rec.response["usage"][k] for k in resp["usage"]}
    [(_, _, tokens, ms)] = [e for e in sink.events if e[0] == "model_response"]
    assert tokens == rec.response["usage"]["input_tokens"] + rec.response["usage"]["output_tokens"]
    assert ms == resp["ms"] and ms >= 0 and resp["cost_usd"] > 0


def test_server_web_search_uses_the_server_tool_and_returns_its_blocks() -> None:
    results = [{"url": "https://a.example/1", "title": "One", "page_age": "2 days ago", "snippet": "Output rose 9%."}]
    with FakeAnthropic() as fake:
        fake.rule(lambda r: r.has_tool("web_search") and "solar" in r.last_user_text,
                  lambda r: reply_web_search("solar output 2024", results))
        llm, budget, _ = make(fake)
        blocks = llm.server_web_search("solar output 2024", 5, recency_days=30)
        body = fake.requests[0].body
    assert body["tools"] == [{"type": WEB_SEARCH_TOOL, "name": "web_search", "max_uses": 1,
                              "cache_control": {"type": "ephemeral"}}]
    assert body["model"] == Settings().worker_model and "30 days" in body["messages"][0]["content"]
    [result] = [b for b in blocks if b["type"] == "web_search_tool_result"]
    assert result["content"][0]["url"] == "https://a.example/1"
    [quote] = [b for b in blocks if b["type"] == "text"]
    assert quote["citations"][0]["cited_text"] == "Output rose 9%."
    assert budget.used().model_calls == 1


def test_default_client_needs_an_api_key() -> None:
    settings = Settings()
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        LLM(settings, Budget(BudgetLimits(), settings.price))


def test_a_caller_catching_llm_error_prints_no_traceback() -> None:
    script = textwrap.dedent("""
        from pipeline.core.budget import Budget
        from pipeline.config import Settings
        from pipeline.models.anthropic import LLM, LLMError
        from pipeline.core.schema import BudgetLimits
        s = Settings()
        llm = LLM(s, Budget(BudgetLimits(), s.price))
        for case in ("overloaded", "server", "hang", "malformed", "refusal"):
            try:
                llm.call(model=s.lead_model, system="s", messages=[{"role": "user", "content": case}],
                         max_tokens=300, purpose="cli")
            except LLMError as e:
                print(f"{case}: {e.kind}: {e}")
    """)
    with FakeAnthropic() as fake:
        fake.fault(lambda r: r.last_user_text == "overloaded", status=529, times=None)
        fake.fault(lambda r: r.last_user_text == "server", status=500, times=None)
        fake.fault(lambda r: r.last_user_text == "hang", kind="hang", times=None)
        fake.fault(lambda r: r.last_user_text == "malformed", kind="malformed_json", times=None)
        fake.rule(lambda r: r.last_user_text == "refusal", reply_refusal())
        env = {**os.environ, "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake.base_url,
               "RESEARCH_MODEL_MAX_RETRIES": "1", "RESEARCH_MODEL_TIMEOUT": "0.3"}
        proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split(": ")[1] for line in lines] == ["overloaded", "server", "timeout", "malformed", "refusal"]
    assert lines[0] == "overloaded: overloaded: Anthropic is overloaded (HTTP 529); try again in a few minutes"
    assert KEY not in proc.stdout


def test_a_reply_is_unfenced_as_the_former_pattern_unfenced_it() -> None:
    # `\s*```$` restarted at each character of a long space run (quadratic).
    former = re.compile(r"^```(?:json)?\s*|\s*```$")
    for text in token_texts([" ", "\n", "\t", "```", "`", "json", "{}", "x"], count=3000):
        assert _unfenced(text) == former.sub("", text.strip()), text
