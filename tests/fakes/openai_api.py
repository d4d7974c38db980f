"""A local fake of the OpenAI Chat Completions API on loopback, for driving the real `openai` SDK in tests.

The twin of tests/fakes/anthropic_api.py, sharing its brains and its server plumbing (tests/fakes/loopback_api.py):
each request is translated into the Anthropic-shaped `MessagesRequest` view (system messages -> `system`; assistant
tool_calls -> tool_use blocks; tool messages, with the user message right after them, -> one user turn of
tool_result blocks then text; function tools -> `tools`; a json_schema response_format -> `output_schema`), so
predicates, rules and brains such as ResearchBrain work unchanged; the FakeReply they return is translated back into
a chat completion. It answers by LOOKING AT THE REQUEST, never from a queue of scripted replies:

    with FakeOpenAI(ResearchBrain(), api_key="sk-test-000", models={"gpt-test"}) as fake:
        fake.rule(lambda r: r.has_tool("web_search"), reply_tool_use("web_search", {"query": "x"}))
        fake.fault(lambda r: "flaky" in r.last_user_text, status=429, times=2)   # then rules answer
        fake.fault(kind="reply", reply=reply_tool_call("web_search", "{not json"), times=1)
        client = openai.OpenAI(api_key="sk-test-000", base_url=fake.base_url)

Order per request: path (404) -> JSON parse (400) -> api key (401, when `api_key=` was given) -> model (404, when
`models=` was given) -> `on_request` callbacks -> the first matching fault with uses left -> capabilities (400,
when `supports_*=False`: what vLLM or llama.cpp say) -> request-shape validation (400, like the real API) -> the
fault's `reply` (kind "reply"), else the first matching rule, else `brain` (default: a minimal instance of the
requested JSON schema, else the text "ok").

Usage is simulated deterministically: about one token per 4 characters of the request's `tools` and `messages`
exactly as sent. OpenAI's automatic prefix caching is simulated per model on that text: `cached_tokens` is the
longest common prefix with any earlier billed request, rounded down to a multiple of `cache_increment`, and is
0 unless both the prompt and that prefix reach `min_cache_tokens`. Each record keeps what it was billed
(`ChatRecord.cached_tokens`). A reply longer than the request's `max_completion_tokens` (or `max_tokens`) is cut
and ends with finish_reason "length".

Faults: "status" (an OpenAI error body; retryable statuses send `retry-after-ms: 1` unless `headers=` is given, so
the SDK's retries take milliseconds), "malformed_json" (a 200 that is not JSON), "hang" (no answer for
`hang_seconds`, released when the fake closes), "reset" (a TCP RST), "cut" (a 200 whose body stops half-way below
its Content-Length), "html" (a 200 web page: not an OpenAI-compatible endpoint), "not_chat" (a 200 JSON that is
not a chat completion), "reply" (a well-formed, billed answer saying `reply` instead of the rules and the brain;
`reply_tool_call` makes one whose tool-call arguments are not valid JSON).
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tests.fakes.anthropic_api import (
    FakeReply,
    MessagesRequest,
    Responder,
    _tokens,
    _within_max_tokens,
    default_brain,
)
from tests.fakes.loopback_api import InjectedFault, InvalidRequest, LoopbackFake, LoopbackHandler, RecordedRequest

FaultKind = Literal["status", "malformed_json", "hang", "reset", "cut", "html", "not_chat", "reply"]
CHAT_PATH = "/v1/chat/completions"
DEFAULT_MAX_TOKENS = 16_384  # the output limit when a request sets none
# Model ids in the price table, so a run against the fake needs no RESEARCH_PRICES.
LEAD_MODEL, WORKER_MODEL = "gpt-4.1", "gpt-4.1-mini"


def openai_env(base_url: str, key: str, *, choices: bool = True) -> dict[str, str]:
    """The environment that points the program at a fake: its key and URL and, with `choices`, the provider and the
    model ids (a resume or replay takes those from the recording instead)."""
    env = {"OPENAI_API_KEY": key, "OPENAI_BASE_URL": base_url}
    if choices:
        env |= {"RESEARCH_MODEL_PROVIDER": "openai", "RESEARCH_LEAD_MODEL": LEAD_MODEL,
                "RESEARCH_WORKER_MODEL": WORKER_MODEL}
    return env
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
_ROLES = ("system", "developer", "user", "assistant", "tool")
_CHOICES = {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}}
_ERRORS: dict[int, tuple[str, str, str | None]] = {  # status -> (message, type, code) the real API sends
    400: ("Bad request", "invalid_request_error", None),
    401: ("Incorrect API key provided", "invalid_request_error", "invalid_api_key"),
    403: ("You are not allowed to sample from this model", "invalid_request_error", None),
    404: ("Not found", "invalid_request_error", None),
    408: ("Request timed out.", "timeout", None),
    429: ("Rate limit reached for requests", "requests", "rate_limit_exceeded"),
    500: ("The server had an error while processing your request. Sorry about that!", "server_error", None),
    503: ("The engine is currently overloaded, please try again later.", "server_error", None),
}


class BadRequest(InvalidRequest):
    """A 400 invalid_request_error naming the offending parameter, as the real API does."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.param = param
        self.code = code


@dataclass
class ChatRecord(RecordedRequest):
    """One HTTP request as received, what the fake answered, and the prompt tokens it billed as cached."""

    cached_tokens: int | None = None  # None unless answered with a billed completion


# An injected failure for requests matching its predicate; `times` None means every time.
ChatFault = InjectedFault[MessagesRequest, FakeReply, FaultKind]


def reply_tool_call(name: str, arguments_text: str, *, id: str | None = None, text: str | None = None) -> FakeReply:
    """One tool call whose `arguments` are sent exactly as `arguments_text` (which need not be valid JSON)."""
    try:
        parsed = json.loads(arguments_text)
    except ValueError:
        parsed = None
    block = {"type": "tool_use", "id": id, "name": name, "input": parsed if isinstance(parsed, dict) else {},
             "raw_arguments": arguments_text}
    return FakeReply([*([{"type": "text", "text": text}] if text else []), block], "tool_use")


def to_messages_request(rec: RecordedRequest) -> MessagesRequest:
    """The Anthropic-shaped view of a Chat Completions body (tolerant of bodies that fail validation)."""
    b = rec.body if isinstance(rec.body, dict) else {}
    system: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []  # tool_result blocks waiting for the user turn they open
    raw_messages = b.get("messages")
    for m in raw_messages if isinstance(raw_messages, list) else []:
        if not isinstance(m, dict):
            continue
        role, content = m.get("role"), m.get("content")
        if role in ("system", "developer"):
            system.append({"type": "text", "text": _content_text(content)})
        elif role == "tool":
            results.append({"type": "tool_result", "tool_use_id": m.get("tool_call_id"),
                            "content": _content_text(content)})
        elif role == "user":
            messages.append({"role": "user", "content": [*results, *_text_blocks(content)]})
            results = []
        elif role == "assistant":
            if results:
                messages.append({"role": "user", "content": results})
                results = []
            calls = m.get("tool_calls")
            uses = [_tool_use(c) for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
            messages.append({"role": "assistant", "content": [*_text_blocks(content), *uses]})
    if results:
        messages.append({"role": "user", "content": results})
    tools = b.get("tools")
    fmt = b.get("response_format")
    schema = fmt.get("json_schema") if isinstance(fmt, dict) and fmt.get("type") == "json_schema" else None
    limit = b.get("max_completion_tokens", b.get("max_tokens"))
    return MessagesRequest(
        model=str(b.get("model", "")),
        max_tokens=limit if isinstance(limit, int) else DEFAULT_MAX_TOKENS,
        system=system, messages=messages,
        tools=[{"name": f.get("name"), "description": f.get("description", ""), "input_schema": f.get("parameters")}
               for t in (tools if isinstance(tools, list) else []) if isinstance(t, dict)
               and isinstance(f := t.get("function"), dict)],
        tool_choice=_tool_choice(b.get("tool_choice")),
        output_schema=schema.get("schema") if isinstance(schema, dict) else None,
        recorded=rec,
    )


class _Handler(LoopbackHandler["FakeOpenAI"]):
    """Answers FakeOpenAI's requests with Chat Completions bodies, errors and headers, and its own fault kinds."""

    paths = (CHAT_PATH,)
    not_found = "Invalid URL (POST {path})"
    not_json = ("We could not parse the JSON body of your request. (HINT: This likely means you aren't using your "
                "HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)")
    bad_key = _ERRORS[401][0]
    fault_messages = {status: message for status, (message, _, _) in _ERRORS.items()}
    broken_json = b'{"id": "chatcmpl-broken", "object": "chat.completion", "choices": ['
    request_id_header = "x-request-id"

    def _admit(self, rec: RecordedRequest) -> bool:
        """False, after a 404, for a model outside `models=`."""
        model, models = rec.body.get("model"), self.owner.models
        if models is not None and isinstance(model, str) and model not in models:
            self._error(rec, 404, f"The model `{model}` does not exist or you do not have access to it.",
                        code="model_not_found")
            return False
        return True

    def _fault(self, rec: RecordedRequest, f: InjectedFault[Any, Any, Any]) -> None:
        """Act out a "cut", "html" or "not_chat" fault, or one every fake has."""
        if f.kind == "cut":
            whole = json.dumps({"id": "chatcmpl-cut", "object": "chat.completion", "created": int(time.time()),
                                "model": "", "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                    "role": "assistant", "content": "This answer never arrives in full."}}]}).encode()
            self.close_connection = True
            self._send_raw(rec, 200, whole[: len(whole) // 2], f.headers or {}, length=len(whole))
        elif f.kind == "html":
            page = b"<!doctype html><html><head><title>Welcome</title></head><body><h1>It works!</h1></body></html>"
            self._send_raw(rec, 200, f.body or page, f.headers or {}, content_type="text/html; charset=utf-8")
        elif f.kind == "not_chat":
            self._send_raw(rec, 200, f.body or b'{"object": "list", "data": []}', f.headers or {})
        else:
            super()._fault(rec, f)

    def _invalid(self, rec: RecordedRequest, e: InvalidRequest) -> None:
        """A 400 naming the offending parameter and the error code."""
        assert isinstance(e, BadRequest), "the checks of this fake raise BadRequest"
        self._error(rec, 400, str(e), param=e.param, code=e.code)

    def _error(self, rec: RecordedRequest, status: int, message: str, headers: Mapping[str, str] | None = None, *,
               param: str | None = None, code: str | None = None) -> None:
        _, kind, default_code = _ERRORS.get(status, ("", "server_error" if status >= 500 else "invalid_request_error",
                                                     None))
        error = {"message": message, "type": kind, "param": param, "code": code or default_code}
        self._send(rec, status, {"error": error}, headers)


class FakeOpenAI(LoopbackFake[MessagesRequest, FakeReply, ChatRecord, FaultKind]):
    """A ThreadingHTTPServer on 127.0.0.1 serving POST /v1/chat/completions."""

    handler = _Handler
    record_type = ChatRecord
    model_path = CHAT_PATH
    base_path = "/v1"

    def __init__(self, brain: Responder = default_brain, *, api_key: str | None = None,
                 models: Collection[str] | None = None, supports_schema: bool = True,
                 supports_json_mode: bool = True, supports_tools: bool = True, hang_seconds: float = 10.0,
                 min_cache_tokens: int = 1024, cache_increment: int = 128,
                 finish_words: Mapping[str, str] | None = None):
        """`finish_words` respells finish reasons as a server does (Snowflake: {"stop": ""})."""
        super().__init__(brain, api_key=api_key, hang_seconds=hang_seconds)
        self.finish_words = dict(finish_words or {})
        self.models = set(models) if models is not None else None
        self.supports_schema = supports_schema
        self.supports_json_mode = supports_json_mode
        self.supports_tools = supports_tools
        self.min_cache_tokens = min_cache_tokens
        self.cache_increment = cache_increment
        self._prompts: dict[str, list[str]] = {}  # model -> the prompt text of every billed request

    @property
    def chat_requests(self) -> list[MessagesRequest]:
        """Anthropic-shaped views of every POST /v1/chat/completions received (faulted ones included)."""
        return self._model_calls()

    def _view(self, rec: ChatRecord) -> MessagesRequest:
        return to_messages_request(rec)

    def _check(self, rec: ChatRecord) -> None:
        """Refuse what the server was said not to support (`supports_*=False`), then what the real API refuses."""
        fmt = rec.body.get("response_format")
        kind = str(fmt.get("type")) if isinstance(fmt, dict) else ""
        refused = {"json_schema": not self.supports_schema, "json_object": not self.supports_json_mode}
        if refused.get(kind):
            raise BadRequest(f"response_format type {kind} is not supported", "response_format")
        if rec.body.get("tools") and not self.supports_tools:
            raise BadRequest("tools are not supported by this server", "tools")
        _validate(rec.body)

    def _forget_cache(self) -> None:
        self._prompts.clear()

    def _answer(self, rec: ChatRecord, req: MessagesRequest, responder: Responder | None) -> dict[str, Any]:
        reply = self._reply(req, responder)
        content, out_tokens, stop = _within_max_tokens(reply, [dict(b) for b in reply.content], req.max_tokens)
        texts = [str(b.get("text", "")) for b in content if b.get("type") == "text"]
        message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None, "refusal": None}
        if stop == "refusal":
            details = reply.stop_details or {}
            message.update(content=None, refusal=details.get("explanation") or "I'm sorry, I can't help with that.")
        calls = [{"id": b.get("id") or "call_" + hashlib.sha256(rec.raw + str(i).encode()).hexdigest()[:24],
                  "type": "function",
                  "function": {"name": b.get("name"), "arguments": b["raw_arguments"] if isinstance(
                      b.get("raw_arguments"), str) else json.dumps(b.get("input") or {})}}
                 for i, b in enumerate(content) if b.get("type") == "tool_use"]
        if calls:
            message["tool_calls"] = calls
        prompt, cached = self._bill(req)
        rec.cached_tokens = cached
        return {"id": "chatcmpl-" + hashlib.sha256(rec.raw).hexdigest()[:24], "object": "chat.completion",
                "created": int(time.time()), "model": req.model, "system_fingerprint": None,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": self._finish(_FINISH.get(stop, "stop"))}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": out_tokens,
                          "total_tokens": prompt + out_tokens, "prompt_tokens_details": {"cached_tokens": cached}}}

    def _finish(self, word: str) -> str:
        return self.finish_words.get(word, word)

    def _bill(self, req: MessagesRequest) -> tuple[int, int]:
        """(prompt tokens, cached tokens) under automatic prefix caching, remembering this prompt for later ones."""
        rec = req.recorded
        text = b"".join(rec.field_bytes(name) or b"" for name in ("tools", "messages")).decode("utf-8")
        total = _tokens(text)
        with self._lock:
            seen = self._prompts.setdefault(req.model, [])
            common = max((len(os.path.commonprefix([text, old])) for old in seen), default=0)
            seen.append(text)
        cached = _tokens(text[:common]) // self.cache_increment * self.cache_increment
        return total, min(cached, total) if total >= self.min_cache_tokens and cached >= self.min_cache_tokens else 0


# -- request-shape validation (the subset of the real API's rules our code could break) -----------
def _validate(b: dict[str, Any]) -> None:
    if not isinstance(b.get("model"), str) or not b["model"]:
        raise BadRequest("you must provide a model parameter")
    msgs = b.get("messages")
    if msgs is None:
        raise BadRequest("Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("Invalid 'messages': empty array. Expected an array with minimum length 1.", "messages",
                         "empty_array")
    if b.get("stream"):
        raise BadRequest("stream: this fake does not stream", "stream")
    for name in ("max_tokens", "max_completion_tokens"):
        if name in b and (not isinstance(b[name], int) or b[name] < 1):
            raise BadRequest(f"Invalid '{name}': expected an integer >= 1.", name, "integer_below_min_value")
    pending: dict[str, int] = {}  # tool_call ids of the last assistant message still owed a tool message -> its index
    for i, m in enumerate(msgs):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in _ROLES:
            raise BadRequest(f"Invalid value: {role!r}. Supported values are: 'system', 'assistant', 'user', "
                             "'tool', and 'developer'.", f"messages[{i}].role", "invalid_value")
        if role == "tool":
            rid = m.get("tool_call_id")
            if not isinstance(rid, str) or rid not in pending:
                raise BadRequest("Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                                 f"message with 'tool_calls' (tool_call_id {rid!r} answers none).",
                                 f"messages.[{i}].tool_call_id")
            del pending[rid]
            continue
        if pending:
            raise BadRequest("An assistant message with 'tool_calls' must be followed by tool messages responding to "
                             "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                             f"{', '.join(pending)}", f"messages.[{min(pending.values())}].role")
        if role == "user" and m.get("content") in (None, "", []):
            raise BadRequest(f"Invalid 'messages[{i}].content': a user message needs content.",
                             f"messages[{i}].content")
        if role == "assistant":
            calls = m.get("tool_calls") or []
            if m.get("content") in (None, "") and not calls:
                raise BadRequest(f"Invalid 'messages[{i}]': an assistant message needs content or tool_calls.",
                                 f"messages[{i}].content")
            for c in calls:
                if not (isinstance(c, dict) and isinstance(c.get("id"), str)
                        and isinstance((c.get("function") or {}).get("arguments"), str)):
                    raise BadRequest(f"Invalid 'messages[{i}].tool_calls': each needs an id and string arguments.",
                                     f"messages[{i}].tool_calls")
                pending[c["id"]] = i
    if pending:
        raise BadRequest("An assistant message with 'tool_calls' must be followed by tool messages responding to "
                         "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                         f"{', '.join(pending)}", f"messages.[{min(pending.values())}].role")
    for i, t in enumerate(b.get("tools") or []):
        if not (isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("function"), dict)
                and t["function"].get("name")):
            raise BadRequest(f"Missing required parameter: 'tools[{i}].function.name'.", f"tools[{i}]",
                             "missing_required_parameter")


# -- translation helpers ------------------------------------------------------------------------------
def _content_text(content: Any) -> str:
    """A message's text: the string itself, or its text parts joined."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text")


def _text_blocks(content: Any) -> list[dict[str, Any]]:
    """Anthropic text blocks for a message's content (none for null or empty text)."""
    if isinstance(content, list):
        return [{"type": "text", "text": str(p.get("text", ""))} for p in content
                if isinstance(p, dict) and p.get("type") == "text"]
    return [{"type": "text", "text": content}] if isinstance(content, str) and content else []


def _tool_use(call: dict[str, Any]) -> dict[str, Any]:
    """A tool_use block for one assistant tool call; arguments that are not a JSON object become {}."""
    fn: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else {}
    try:
        args = json.loads(fn.get("arguments") or "")
    except (TypeError, ValueError):
        args = None
    return {"type": "tool_use", "id": call.get("id"), "name": fn.get("name"),
            "input": args if isinstance(args, dict) else {}}


def _tool_choice(choice: Any) -> dict[str, Any] | None:
    """The Anthropic tool_choice for an OpenAI one ("auto", "none", "required" or a named function)."""
    if isinstance(choice, dict):
        fn = choice.get("function")
        return {"type": "tool", "name": fn.get("name") if isinstance(fn, dict) else None}
    return _CHOICES.get(choice) if isinstance(choice, str) else None
