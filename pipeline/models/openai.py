"""The only module that talks to an OpenAI-compatible Chat Completions endpoint (OpenAI, OpenRouter, vLLM, llama.cpp's
server, Ollama): budgeted, recorded calls; structured output; tool calls; errors that name the setting to fix.

HTTP stack: the official openai SDK owns its HTTP client (connection pool, timeouts, and retries of 408/409/429/5xx
and timeouts honouring retry-after, bounded by `max_retries`; we only cap each wait). Tests point the real SDK at a
loopback fake of the API (tests/fakes/openai_api.py) through `base_url`.

How it differs from the Anthropic adapter, and why:
- No cache_control: these servers cache prompt prefixes on their own (OpenAI from 1,024 tokens). The request keeps
  the system prompt, the tools (sorted keys) and the conversation in the same bytes on every call, so the prefix
  a server caches stays valid from turn to turn.
- Structured output asks for a strict JSON schema (`response_format`). A server that refuses schemas is asked for
  JSON mode with the schema in the system prompt, and one that refuses JSON mode too for plain text with the schema;
  validation and one repair retry (which shows the schema, for servers that ignore `response_format`) are the same
  at every level. Every call starts at the strongest level and each level is its own call stream (purpose): what a
  call asks never depends on which parallel call was refused first, so a recording replays in any thread order.
  A refused level costs one unbilled round trip.
- Tool calling is checked before a tools-mode run spends anything (check_tools): a server that refuses tools, or
  answers in text when asked to call one, gets an error naming the modes that work without them.
"""
from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import openai
from openai.lib._pydantic import to_strict_json_schema  # the SDK's own strict-schema transform, as .parse() uses
from pydantic import BaseModel

from pipeline.config import Settings
from pipeline.core.budget import Budget, Phase
from pipeline.core.events import EventSink, NullSink
from pipeline.core.schema import Usage
from pipeline.models.base import (
    Exchange,
    LLMError,
    ModelReply,
    ModelTransport,
    OutputInvalid,
    T,
    Turn,
)
from pipeline.models.chat_format import (
    ErrorBody,
    Malformed,
    as_reply,
    cache_counts,
    completion_json,
    conversation,
    count,
    error_detail,
    request_body,
    text_of,
    without_credentials,
)
from pipeline.models.replies import parse_structured, repair_request, reported
from pipeline.models.transport import MAX_RETRY_WAIT, CappedRetryWait, MeteredTransport

__all__ = ["OpenAIChat", "OpenAITransport", "conversation", "request_body", "strict_schema"]

# OpenAI's own API wants max_completion_tokens (its reasoning models refuse max_tokens); other servers know max_tokens.
OPENAI_HOST = "api.openai.com"
_OTHER_LIMIT = {"max_tokens": "max_completion_tokens", "max_completion_tokens": "max_tokens"}
# Sent when no key is set: local servers (OPENAI_BASE_URL) ignore the key, and the SDK insists on one.
NO_KEY = "no-key-set"
# Structured-output levels, strongest first: a strict schema, JSON mode, plain text. The purpose suffix of each.
LEVELS = ("json_schema", "json_object", "text")
_LEVEL_PURPOSE = {"json_schema": "", "json_object": ":json_mode", "text": ":json_text"}
SCHEMA_IN_PROMPT = "Reply with only a JSON object (no other text) that matches this JSON schema:"
# The tools check: a server that calls tools calls this one; the reply is never continued.
TOOLS_PROBE = "This checks that you can call tools: call the calculate tool with the expression 1+1."
PROBE_TOKENS = 256  # room for a reasoning model to think before it calls
_SCHEMA_WORDS = re.compile(r"response_format|json_schema|json_object|structured output|guided|grammar", re.I)
_TOOL_WORDS = re.compile(r"\btools?\b|tool_choice|tool call|function call|\bfunctions?\b", re.I)
# What servers without tool calling say (vLLM: "auto" tool choice requires --enable-auto-tool-choice; llama.cpp:
# tools param requires --jinja flag; Ollama: model does not support tools); a bad tool schema says none of these.
# OpenRouter: "No endpoints found that support tool use".
_UNSUPPORTED_WORDS = re.compile(r"not supported|unsupported|does not support|doesn't support|not enabled|requires"
                                r"|no endpoints found that support", re.I)
_CONTEXT_WORDS = re.compile(r"context[ _]length|context window|context size|maximum context|too many tokens"
                            r"|prompt is too long", re.I)


class _BoundedRetries(CappedRetryWait, openai.OpenAI):
    """The SDK client, with each wait between retries capped (pipeline/models/transport.py)."""


class OpenAIChat:
    """The ModelClient of an OpenAI-compatible Chat Completions endpoint: turns, structured output, tool calls.

    Each request goes through `transport` (by default OpenAITransport: budgeted, sent, settled and reported); every
    failure is reported to `events` as a model_error and raised as an LLMError.
    """

    def __init__(self, settings: Settings, budget: Budget, events: EventSink | None = None, *,
                 client: openai.OpenAI | None = None, clock: Callable[[], float] = time.monotonic,
                 max_retry_wait: float = MAX_RETRY_WAIT, transport: ModelTransport | None = None):
        self._events = events or NullSink()
        self._settings = settings
        self._transport = transport or OpenAITransport(settings, budget, self._events, client=client, clock=clock,
                                                       max_retry_wait=max_retry_wait)
        self._secret = settings.openai_api_key.get_secret_value().strip() if settings.openai_api_key else None
        self._max_tokens_key = max_tokens_key(settings)
        self._lock = threading.Lock()
        self._tools_ok: set[str] = set()

    def call(self, *, model: str, system: str, messages: list[dict[str, Any]], max_tokens: int,
             tools: Sequence[dict[str, Any]] | None = None,
             tool_choice: dict[str, Any] | None = None, phase: Phase = Phase.RESEARCH, purpose: str) -> ModelReply:
        """One assistant turn; stop_reason max_tokens/tool_use are returned for the caller to act on."""
        chat = [{"role": "system", "content": system}] if system else []
        chat += [{"role": m["role"], "content": text_of(m["content"])} for m in messages]
        body = self._body(model, chat, max_tokens, tools=tools, tool_choice=tool_choice)
        return self._turn(body, phase, purpose)

    def structured(self, *, model: str, system: str, messages: list[dict[str, Any]] | str, output: type[T],
                   max_tokens: int, phase: Phase = Phase.RESEARCH, purpose: str, cache: bool = True) -> T:
        """A reply validated into `output`, at the strongest structured-output level the endpoint accepts, with one
        repair retry."""
        convo = [{"role": "user", "content": messages}] if isinstance(messages, str) else list(messages)
        for level in LEVELS:
            stream = purpose + _LEVEL_PURPOSE[level]
            chat = self._structured_messages(system, convo, output, level)
            body = self._body(model, chat, max_tokens, response_format=_response_format(output, level))
            try:
                reply = self._turn(body, phase, stream)
                break
            except LLMError as e:
                if e.kind != "schema_unsupported" or level == LEVELS[-1]:
                    raise
        value, problems = parse_structured(reply.text, reply.stop_reason, output)
        if value is not None:
            return value
        bad = {"role": "assistant", "content": reply.text.rstrip() or "(empty)"}
        ask = repair_request(problems)
        if level == "json_schema":  # a server that ignores response_format never showed the model the schema
            ask += f"\n{SCHEMA_IN_PROMPT}\n{json.dumps(strict_schema(output), sort_keys=True)}"
        repair = [*chat, bad, {"role": "user", "content": ask}]
        tokens = max_tokens * 2 if reply.stop_reason == "max_tokens" else max_tokens  # room to finish a cut reply
        reply = self._turn({**body, "messages": repair, self._max_tokens_key: tokens}, phase, f"{stream}:repair")
        value, problems = parse_structured(reply.text, reply.stop_reason, output)
        if value is not None:
            return value
        raise self._fail(purpose, OutputInvalid(
            f"the model's reply did not match {output.__name__} after one repair attempt ({problems[0]})"))

    def tool_turn(self, *, model: str, system: str, turns: Sequence[Turn], tools: Sequence[dict[str, Any]],
                  max_tokens: int, phase: Phase = Phase.RESEARCH, purpose: str) -> ModelReply:
        """The next assistant turn of a tool-calling conversation (the server caches the shared prefix itself)."""
        body = self._body(model, conversation(system, turns), max_tokens, tools=tools)
        return self._turn(body, phase, purpose)

    def check_tools(self, *, model: str, tools: Sequence[dict[str, Any]], phase: Phase = Phase.RESEARCH) -> None:
        """One small request with `tools` asking for a tool call: a server without tool calling refuses it (unbilled),
        or answers in text (it ignores tool definitions); either is an "unsupported" LLMError naming the fix."""
        with self._lock:
            if model in self._tools_ok:
                return
        purpose = f"probe:tools:{model}"
        body = self._body(model, [{"role": "user", "content": TOOLS_PROBE}], PROBE_TOKENS, tools=tools)
        reply = self._turn(body, phase, purpose)
        if not reply.tool_uses and reply.stop_reason != "max_tokens":  # cut while thinking proves nothing
            raise self._fail(purpose, LLMError("unsupported", (
                f"{model!r} answered in text when asked to call a tool, so the endpoint ignores tool definitions; "
                "only the fixed and extractive modes work with it: run with --mode fixed")))
        with self._lock:
            self._tools_ok.add(model)

    def warm_prefix(self, *, model: str, system: str, tools: Sequence[dict[str, Any]],
                    phase: Phase = Phase.RESEARCH) -> None:
        """Nothing sent: these servers bill no cache writes, so parallel calls writing one prefix cost no more."""

    def server_web_search(self, query: str, max_results: int, recency_days: int | None = None, *,
                          phase: Phase = Phase.RESEARCH) -> list[dict[str, Any]]:
        """Refused: server-side search is Anthropic's tool (the settings check refuses the pair before a run)."""
        raise self._fail("web_search", LLMError("unsupported", (
            "RESEARCH_SEARCH_PROVIDER=anthropic searches through Anthropic's server-side tool, which an "
            "OpenAI-compatible endpoint does not have; set RESEARCH_SEARCH_PROVIDER to brave, tavily, searxng "
            "or corpus")))

    # -- requests -----------------------------------------------------------------------------------------------
    def _body(self, model: str, messages: list[dict[str, Any]], max_tokens: int, *,
              tools: Sequence[dict[str, Any]] | None = None, tool_choice: dict[str, Any] | None = None,
              response_format: dict[str, Any] | None = None) -> dict[str, Any]:
        return request_body(model=model, messages=messages, max_tokens=max_tokens, tools=tools,
                            tool_choice=tool_choice, response_format=response_format,
                            max_tokens_key=self._max_tokens_key)

    def _structured_messages(self, system: str, convo: list[dict[str, Any]], output: type[BaseModel],
                             level: str) -> list[dict[str, Any]]:
        if level != "json_schema":  # without a schema in the request, the prompt carries it
            schema = json.dumps(strict_schema(output), sort_keys=True)
            system = f"{system.rstrip()}\n\n{SCHEMA_IN_PROMPT}\n{schema}".lstrip()
        chat = [{"role": "system", "content": system}] if system else []
        return chat + [{"role": m["role"], "content": text_of(m["content"])} for m in convo]

    def _turn(self, body: dict[str, Any], phase: Phase, purpose: str) -> ModelReply:
        try:
            answer = self._transport.send(body, phase, purpose)
            reply = as_reply(answer.data, body["model"], answer.usage, answer.request_id)
        except LLMError as e:
            raise self._fail(purpose, e) from None
        return reply

    def _fail(self, purpose: str, err: LLMError) -> LLMError:
        return reported(self._events, self._secret, purpose, err)


class OpenAITransport(MeteredTransport):
    """Sends Chat Completions requests through the SDK, metered (pipeline/models/transport.py)."""

    def __init__(self, settings: Settings, budget: Budget, events: EventSink | None = None, *,
                 client: openai.OpenAI | None = None, clock: Callable[[], float] = time.monotonic,
                 max_retry_wait: float = MAX_RETRY_WAIT):
        if client is None:
            settings.require_model_access()
            key = settings.openai_api_key.get_secret_value().strip() if settings.openai_api_key else ""
            client = _BoundedRetries(api_key=key or NO_KEY, base_url=settings.openai_base_url,
                                     max_retries=settings.model_max_retries, timeout=settings.model_timeout)
            client.max_retry_wait = max_retry_wait
        super().__init__(budget, events, clock=clock)
        self.max_tokens_key = max_tokens_key(settings)
        self._client = client
        self._where = without_credentials(str(client.base_url).rstrip("/"))

    def send(self, body: dict[str, Any], phase: Phase, purpose: str) -> Exchange:
        # A body built before this endpoint's output-limit field was learnt (_post) is sent with the right one.
        other = _OTHER_LIMIT[self.max_tokens_key]
        if other in body:
            body = {(self.max_tokens_key if k == other else k): v for k, v in body.items()}
        return super().send(body, phase, purpose)

    def _post(self, body: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        try:
            try:
                raw = self._client.chat.completions.with_raw_response.create(**body)
            except openai.BadRequestError as e:
                if not _wrong_limit_field(_detail(e), self.max_tokens_key):
                    raise
                # OpenAI's reasoning models behind a proxy want max_completion_tokens, and an older server
                # max_tokens: say the same limit in the other field, once, and keep it for this transport's life.
                key, other = _OTHER_LIMIT[self.max_tokens_key], self.max_tokens_key
                self.max_tokens_key = key
                raw = self._client.chat.completions.with_raw_response.create(
                    **{(key if k == other else k): v for k, v in body.items()})
            return completion_json(raw.http_response.content), raw.http_response.headers.get("x-request-id")
        except openai.APIError as e:
            raise self._error_for(e, body) from None
        except ErrorBody as e:
            raise self._classify(e.status, e.detail, body) from None
        except Malformed as e:
            raise LLMError("malformed", f"the endpoint at {self._where} answered with {e}, not a chat completion; "
                                        "check OPENAI_BASE_URL (it should end in /v1)") from None

    def _usage(self, data: dict[str, Any], body: dict[str, Any]) -> Usage:
        reported = data.get("usage")
        u: dict[str, Any] = reported if isinstance(reported, dict) else {}
        prompt, completion = count(u.get("prompt_tokens")), count(u.get("completion_tokens"))
        if prompt is None or completion is None:
            # A server that reports no usage is charged an estimate (about 4 characters a token): never nothing.
            sent = len(json.dumps([body["messages"], body.get("tools")], ensure_ascii=False)) // 4 + 1
            said = len(json.dumps(data["choices"][0]["message"], ensure_ascii=False)) // 4 + 1
            return Usage(input_tokens=sent, output_tokens=said, model_calls=1)
        read, written = cache_counts(u, prompt)
        return Usage(input_tokens=prompt - read - written, output_tokens=completion, cache_read_input_tokens=read,
                     cache_creation_input_tokens=written, model_calls=1)

    def _stop_reason(self, data: dict[str, Any]) -> str | None:
        finish = data["choices"][0].get("finish_reason")
        return finish if isinstance(finish, str) else None

    def _error_for(self, e: openai.APIError, body: dict[str, Any]) -> LLMError:
        if isinstance(e, openai.APITimeoutError):
            return LLMError("timeout", f"the model call to {self._where} timed out (limit {self._client.timeout}s, "
                                       f"{self._retries()}); try again, or raise RESEARCH_MODEL_TIMEOUT")
        if isinstance(e, openai.APIConnectionError):
            return LLMError("connection", f"cannot reach {self._where}, or the connection broke before the answer "
                                          f"was complete ({self._retries()}); check the network and OPENAI_BASE_URL")
        if not isinstance(e, openai.APIStatusError):
            return LLMError("malformed", f"the endpoint at {self._where} answered with something that is not a chat "
                                         "completion; check OPENAI_BASE_URL")
        return self._classify(e.status_code, " ".join(_detail(e).split())[:300], body)

    def _classify(self, status: int, detail: str, body: dict[str, Any]) -> LLMError:
        """The LLMError of an error answer: an HTTP status, or the code of an error a 200 body carried."""
        where, retries = self._where, self._retries()
        if body.get("tools") and _TOOL_WORDS.search(detail) and _UNSUPPORTED_WORDS.search(detail):
            return LLMError("unsupported", f"{where} does not support tool calling for {body['model']!r} ({detail}); "
                                           "only the fixed and extractive modes work with it: run with --mode fixed")
        if status in (401, 403):
            return LLMError("auth", f"{where} refused the API key (HTTP {status}); check OPENAI_API_KEY")
        if status == 404:
            return LLMError("bad_request", f"{where} answered 404 for model {body['model']!r} ({detail}): set "
                                           "RESEARCH_LEAD_MODEL and RESEARCH_WORKER_MODEL to models it serves, and "
                                           "check OPENAI_BASE_URL (it should end in /v1)")
        if status == 429:
            return LLMError("rate_limited", f"{where}'s rate limit was hit (HTTP 429: {detail}) and {retries} did "
                                            "not clear it; wait a minute, or run fewer workers at once")
        if status >= 500:
            return LLMError("server", f"{where} had a server error (HTTP {status}: {detail}) that {retries} did not "
                                      "clear; try again later")
        if "response_format" in body and _SCHEMA_WORDS.search(detail):
            return LLMError("schema_unsupported", f"{where} does not accept this structured-output request "
                                                  f"({detail}); asking for JSON another way")
        if _CONTEXT_WORDS.search(detail):
            return LLMError("context_window", "the request is longer than the model's context window; shorten the "
                                              "input (fewer or shorter sources)")
        return LLMError("bad_request", f"{where} rejected the request (HTTP {status}): {detail}")

    def _retries(self) -> str:
        n = self._client.max_retries
        return f"{n} {'retry' if n == 1 else 'retries'}"


def max_tokens_key(settings: Settings) -> str:
    """The output-limit field this endpoint understands: OpenAI's own API has retired max_tokens for new models."""
    host = urlsplit(settings.openai_base_url or f"https://{OPENAI_HOST}/v1").hostname or ""
    return "max_completion_tokens" if host == OPENAI_HOST else "max_tokens"


def strict_schema(output: type[BaseModel]) -> dict[str, Any]:
    """`output`'s JSON schema in the strict subset structured outputs accept (the SDK's own transform)."""
    return to_strict_json_schema(output)


def _response_format(output: type[BaseModel], level: str) -> dict[str, Any] | None:
    if level == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": output.__name__, "schema": strict_schema(output),
                                                       "strict": True}}
    return {"type": "json_object"} if level == "json_object" else None


def _detail(e: openai.APIStatusError) -> str:
    body = e.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            return error_detail(inner) if inner.get("message") or inner.get("code") else str(inner)
        return str(inner)
    return str(e.message or "no detail")


def _wrong_limit_field(detail: str, sent: str) -> bool:
    """Whether a 400 says the output-limit field sent is not the one this model takes."""
    return f"'{sent}'" in detail and _OTHER_LIMIT[sent] in detail


