"""The only module that talks to Anthropic: budgeted, recorded, cached model calls; structured output; clear errors.

HTTP stack: the anthropic SDK is built on httpx2 and owns its HTTP client (connection pool, timeouts, and
retries of 429/5xx/529/timeouts honouring retry-after, bounded by `max_retries`; we only cap each wait).
We never hand it a client of our own: that would mix two HTTP stacks in one object and bypass the SDK's
retry and timeout logic. Our page fetching (pipeline/web) uses httpx independently, as designed. Tests point the real
SDK at a loopback fake of the Messages API through `base_url`, so serialisation, retries and error classes
are the SDK's own code under test, not a mock.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from functools import cache
from importlib import resources
from typing import Any

import anthropic
from pydantic import BaseModel

from pipeline.config import Settings
from pipeline.core.budget import Budget, Phase
from pipeline.core.events import EventSink, NullSink
from pipeline.core.schema import Usage
from pipeline.models.base import (
    WARM_PURPOSE,
    ErrorKind,
    LLMError,
    ModelReply,
    ModelTransport,
    OutputInvalid,
    T,
    ToolResults,
    ToolUse,
    Turn,
)
from pipeline.models.replies import add_usage, parse_structured, repair_request, reported
from pipeline.models.transport import MAX_RETRY_WAIT, CappedRetryWait, MeteredTransport

__all__ = ["LLM", "AnthropicTransport", "ErrorKind", "LLMError", "ModelReply", "ToolUse", "request_body",
           "strict_schema"]

MAX_CONTINUATIONS = 3
EPHEMERAL = {"type": "ephemeral"}
WARM_ASK = "Reply with one word: ready."  # the message of a cache-warming request, whose reply is never read
# The basic server-side search: plain result blocks and the widest model support. The newer versions
# (web_search_20260209/20260318) filter results by running code, which costs more and needs newer models.
WEB_SEARCH_TOOL = "web_search_20250305"
# The results carry no readable snippet, so the relay prompt (pipeline/models/prompts/web_search_relay.md) asks for
# one cited sentence per result: the citations on those quotes become the snippets (pipeline/web/search/anthropic.py).


@cache
def relay_prompt() -> str:
    """The relay prompt of server-side search, byte-identical every call (package data beside this adapter)."""
    text = resources.files("pipeline.models.prompts").joinpath("web_search_relay.md").read_text(encoding="utf-8")
    return text.strip() + "\n"


class _BoundedRetries(CappedRetryWait, anthropic.Anthropic):
    """The SDK client, with each wait between retries capped (pipeline/models/transport.py)."""


class _Malformed(Exception):
    """A 2xx answer whose body is not a Messages API message."""


class LLM:
    """The ModelClient of Anthropic's Messages API: turns, structured output, tool conversations, server-side search.

    Each request goes through `transport` (by default AnthropicTransport: budgeted, sent, settled and reported);
    every failure is reported to `events` as a model_error and raised as an LLMError.
    """

    def __init__(self, settings: Settings, budget: Budget, events: EventSink | None = None, *,
                 client: anthropic.Anthropic | None = None, clock: Callable[[], float] = time.monotonic,
                 max_retry_wait: float = MAX_RETRY_WAIT, transport: ModelTransport | None = None):
        self._events = events or NullSink()
        self._transport = transport or AnthropicTransport(settings, budget, self._events, client=client, clock=clock,
                                                          max_retry_wait=max_retry_wait)
        self._settings = settings
        self._secret = settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else None

    def call(self, *, model: str, system: str, messages: list[dict[str, Any]], max_tokens: int,
             tools: Sequence[dict[str, Any]] | None = None,
             tool_choice: dict[str, Any] | None = None, phase: Phase = Phase.RESEARCH, purpose: str) -> ModelReply:
        """One assistant turn; stop_reason max_tokens/tool_use are returned for the caller to act on."""
        body = request_body(model=model, system=system, messages=messages, max_tokens=max_tokens,
                            tools=tools, tool_choice=tool_choice)
        return self._turn(body, phase, purpose)

    def structured(self, *, model: str, system: str, messages: list[dict[str, Any]] | str, output: type[T],
                   max_tokens: int, phase: Phase = Phase.RESEARCH, purpose: str, cache: bool = True) -> T:
        """A reply validated into `output` via a JSON-schema output format, with one repair retry."""
        convo = [{"role": "user", "content": messages}] if isinstance(messages, str) else list(messages)
        fmt = {"format": {"type": "json_schema", "schema": strict_schema(output)}}
        body = request_body(model=model, system=system, messages=convo, max_tokens=max_tokens, output_config=fmt,
                            cache_system=cache)
        reply = self._turn(body, phase, purpose)
        value, problems = parse_structured(reply.text, reply.stop_reason, output)
        if value is not None:
            return value
        bad = {"role": "assistant", "content": [{"type": "text", "text": reply.text.rstrip() or "(empty)"}]}
        repair = [*convo, bad, {"role": "user", "content": repair_request(problems)}]
        # A reply cut off at max_tokens gets room to finish; the budget still has to grant it.
        tokens = max_tokens * 2 if reply.stop_reason == "max_tokens" else max_tokens
        reply = self._turn({**body, "messages": repair, "max_tokens": tokens}, phase, f"{purpose}:repair")
        value, problems = parse_structured(reply.text, reply.stop_reason, output)
        if value is not None:
            return value
        raise self._fail(purpose, OutputInvalid(
            f"the model's reply did not match {output.__name__} after one repair attempt ({problems[0]})"))

    def tool_turn(self, *, model: str, system: str, turns: Sequence[Turn], tools: Sequence[dict[str, Any]],
                  max_tokens: int, phase: Phase = Phase.RESEARCH, purpose: str) -> ModelReply:
        """The next assistant turn of a tool-calling conversation, with a cache breakpoint on its newest turn."""
        return self.call(model=model, system=system, messages=cache_marked(conversation(turns)), max_tokens=max_tokens,
                         tools=tools, phase=phase, purpose=purpose)

    def check_tools(self, *, model: str, tools: Sequence[dict[str, Any]], phase: Phase = Phase.RESEARCH) -> None:
        """Every Claude model calls tools: nothing to check, nothing sent."""

    def warm_prefix(self, *, model: str, system: str, tools: Sequence[dict[str, Any]],
                    phase: Phase = Phase.RESEARCH) -> None:
        """One request of one output token with the shared prefix, built as every tool turn builds it (so its cache
        entry at the system prompt's breakpoint is the one later turns read). Without it, workers that start
        together each write the prefix at 1.25x, since a cache entry is readable only once its request is answered."""
        body = request_body(model=model, system=system, max_tokens=1, tools=tools,
                            messages=cache_marked([{"role": "user", "content": [{"type": "text", "text": WARM_ASK}]}]))
        purpose = f"{WARM_PURPOSE}{model}"
        try:
            self._transport.send(body, phase, purpose)
        except LLMError as e:  # each worker then writes the prefix itself, as without warming: nothing is lost
            if e.kind != "not_recorded":  # a replay of a run recorded without warming has no such call
                self._fail(purpose, e)

    def server_web_search(self, query: str, max_results: int, recency_days: int | None = None, *,
                          phase: Phase = Phase.RESEARCH) -> list[dict[str, Any]]:
        """The content blocks of one turn using Anthropic's server-side web_search tool (one search at most)."""
        ask = f"Search query: {query}\nReport at most {max_results} results."
        if recency_days:
            ask += f"\nPrefer pages published in the last {recency_days} days."
        tool = {"type": WEB_SEARCH_TOOL, "name": "web_search", "max_uses": 1}
        # One stream per distinct search, so a recording keys it the same way whichever worker asks first.
        digest = hashlib.sha256(json.dumps([query, max_results, recency_days]).encode()).hexdigest()[:12]
        reply = self.call(model=self._settings.worker_model, system=relay_prompt(),
                          messages=[{"role": "user", "content": ask}], max_tokens=1024, tools=[tool],
                          phase=phase, purpose=f"web_search:{digest}")
        return reply.provider_turn

    # -- one turn: pause_turn continuations, refusal and context-window stops ---------------------
    def _turn(self, body: dict[str, Any], phase: Phase, purpose: str) -> ModelReply:
        content: list[dict[str, Any]] = []
        usage = Usage()
        for i in range(MAX_CONTINUATIONS + 1):
            data, used, request_id = self._send(body, phase, purpose if i == 0 else f"{purpose}:continue")
            content += data["content"]
            usage = add_usage(usage, used)
            if data.get("stop_reason") != "pause_turn" or i == MAX_CONTINUATIONS:
                break
            body = {**body, "messages": _continued(body["messages"], data["content"])}
        stop = data.get("stop_reason")
        if stop == "refusal":
            raise self._fail(purpose, LLMError("refusal", "the model declined to answer this request; "
                                                          "rephrase it or leave out the part it refused"))
        if stop == "model_context_window_exceeded":
            raise self._fail(purpose, LLMError("context_window", "the request is longer than the model's "
                                               "context window; shorten the input (fewer or shorter sources)"))
        return ModelReply(
            model=str(data.get("model") or body["model"]), stop_reason=stop, provider_turn=content,
            text="".join(b.get("text", "") for b in content if b.get("type") == "text"),
            tool_uses=[ToolUse(id=b["id"], name=b["name"], input=b.get("input") or {})
                       for b in content if b.get("type") == "tool_use"],
            usage=usage, request_id=request_id,
        )

    def _send(self, body: dict[str, Any], phase: Phase, purpose: str) -> tuple[dict[str, Any], Usage, str | None]:
        try:
            answer = self._transport.send(body, phase, purpose)
        except LLMError as e:
            raise self._fail(purpose, e) from None
        return answer.data, answer.usage, answer.request_id

    def _fail(self, purpose: str, err: LLMError) -> LLMError:
        return reported(self._events, self._secret, purpose, err)


class AnthropicTransport(MeteredTransport):
    """Sends Messages API requests through the SDK, metered (pipeline/models/transport.py)."""

    def __init__(self, settings: Settings, budget: Budget, events: EventSink | None = None, *,
                 client: anthropic.Anthropic | None = None, clock: Callable[[], float] = time.monotonic,
                 max_retry_wait: float = MAX_RETRY_WAIT):
        if client is None:
            settings.require_model_access()
            assert settings.anthropic_api_key is not None
            client = _BoundedRetries(
                api_key=settings.anthropic_api_key.get_secret_value(), base_url=settings.anthropic_base_url,
                max_retries=settings.model_max_retries, timeout=settings.model_timeout,
            )
            client.max_retry_wait = max_retry_wait
        super().__init__(budget, events, clock=clock)
        self._client = client

    def _post(self, body: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        try:
            raw = self._client.messages.with_raw_response.create(**body)
            return _message_json(raw.http_response.content), raw.http_response.headers.get("request-id")
        except anthropic.APIError as e:
            raise self._error_for(e) from None
        except _Malformed as e:
            raise LLMError("malformed", f"Anthropic answered with {e}; try again") from None

    def _usage(self, data: dict[str, Any], body: dict[str, Any]) -> Usage:
        u = data["usage"]
        return Usage(input_tokens=u["input_tokens"], output_tokens=u["output_tokens"],
                     cache_read_input_tokens=u.get("cache_read_input_tokens") or 0,
                     cache_creation_input_tokens=u.get("cache_creation_input_tokens") or 0, model_calls=1)

    def _error_for(self, e: anthropic.APIError) -> LLMError:
        n = self._client.max_retries
        retries = f"{n} {'retry' if n == 1 else 'retries'}"
        if isinstance(e, anthropic.APITimeoutError):
            secs = getattr(self._client.timeout, "read", self._client.timeout)
            return LLMError("timeout", f"the model call timed out (limit {secs}s, {retries}); "
                                       "try again, or raise RESEARCH_MODEL_TIMEOUT")
        if isinstance(e, anthropic.APIConnectionError):
            where = str(self._client.base_url).rstrip("/")
            return LLMError("connection", f"cannot reach {where}; check the network or ANTHROPIC_BASE_URL")
        if not isinstance(e, anthropic.APIStatusError):
            return LLMError("malformed", "Anthropic answered with something that is not a message; try again")
        status = e.status_code
        if status == 429:
            return LLMError("rate_limited", f"Anthropic's rate limit was hit (HTTP 429) and {retries} did not "
                                            "clear it; wait a minute, or run fewer workers at once")
        if status == 529:
            return LLMError("overloaded", "Anthropic is overloaded (HTTP 529); try again in a few minutes")
        if status in (401, 403):
            return LLMError("auth", f"the API key was refused (HTTP {status}); check ANTHROPIC_API_KEY")
        if status >= 500:
            return LLMError("server", f"Anthropic had a server error (HTTP {status}) that {retries} did not "
                                      "clear; try again later")
        detail = " ".join(str(e.api_message or e.type or "no detail").split())[:300]
        return LLMError("bad_request", f"Anthropic rejected the request (HTTP {status}): {detail}")


def request_body(*, model: str, system: str, messages: list[dict[str, Any]], max_tokens: int,
                 tools: Sequence[dict[str, Any]] | None = None,
                 tool_choice: dict[str, Any] | None = None,
                 output_config: dict[str, Any] | None = None, cache_system: bool = True) -> dict[str, Any]:
    """The request kwargs, with the static prefix (tools, then system) built byte-identically on every call."""
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": list(messages)}
    if system:
        marked = {"cache_control": dict(EPHEMERAL)} if cache_system else {}
        body["system"] = [{"type": "text", "text": system, **marked}]
    if tools:
        # Sorted keys: callers building the same tool dict in a different order must not bust the cache.
        frozen = [{k: v for k, v in json.loads(json.dumps(t, sort_keys=True)).items() if k != "cache_control"}
                  for t in tools]
        frozen[-1]["cache_control"] = dict(EPHEMERAL)
        body["tools"] = frozen
    if tool_choice:
        body["tool_choice"] = tool_choice
    if output_config:
        body["output_config"] = output_config
    return body


def conversation(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """Turns as Messages API messages: each reply's blocks as they came, exactly one tool_result per tool_use, in
    order, then the note."""
    messages: list[dict[str, Any]] = []
    for turn in turns:
        if isinstance(turn, str):
            messages.append({"role": "user", "content": [{"type": "text", "text": turn}]})
        elif isinstance(turn, ModelReply):
            message = {"role": "assistant", "content": turn.provider_turn}
            if not message["content"]:  # the API refuses an empty turn in the history
                message = {**message, "content": [{"type": "text", "text": "(no reply)"}]}
            messages.append(message)
        else:
            messages.append({"role": "user", "content": _results(turn)})
    return messages


def _results(turn: ToolResults) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for result in turn.results:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.tool_use_id, "content": result.content}
        if result.is_error:
            block["is_error"] = True
        content.append(block)
    if turn.note:
        content.append({"type": "text", "text": turn.note})
    return content


def cache_marked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy with one cache breakpoint on the last block of the newest turn (tools and system hold the others)."""
    last = messages[-1]
    blocks = list(last["content"])
    blocks[-1] = {**blocks[-1], "cache_control": dict(EPHEMERAL)}
    return [*messages[:-1], {**last, "content": blocks}]


def strict_schema(output: type[BaseModel]) -> dict[str, Any]:
    """`output`'s JSON schema in the subset structured outputs accept (the SDK's own transform)."""
    return anthropic.transform_schema(output)


def _continued(messages: list[dict[str, Any]], paused: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history with a paused assistant turn appended (merged into a trailing assistant turn, if any)."""
    if messages and messages[-1].get("role") == "assistant":
        last = messages[-1]
        prior = last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
        return [*messages[:-1], {**last, "content": [*prior, *paused]}]
    return [*messages, {"role": "assistant", "content": list(paused)}]


def _message_json(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError:
        raise _Malformed("a body that is not valid JSON") from None
    usage = data.get("usage") if isinstance(data, dict) else None
    if not (isinstance(data, dict) and data.get("type") == "message" and isinstance(data.get("content"), list)
            and all(_is_block(b) for b in data["content"]) and isinstance(usage, dict)
            and isinstance(usage.get("input_tokens"), int) and isinstance(usage.get("output_tokens"), int)):
        raise _Malformed("JSON that is not a message")
    return data


def _is_block(b: Any) -> bool:
    if not (isinstance(b, dict) and isinstance(b.get("type"), str)):
        return False
    return b["type"] != "tool_use" or (isinstance(b.get("id"), str) and isinstance(b.get("name"), str))
