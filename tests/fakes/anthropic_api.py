"""A local fake of the Anthropic Messages API on loopback, for driving the real `anthropic` SDK in tests.

It answers by LOOKING AT THE REQUEST, never from a queue of scripted replies, so parallel callers get
the right answer regardless of arrival order:

    with FakeAnthropic() as fake:
        fake.rule(lambda r: r.has_tool("web_search"), reply_tool_use("web_search", {"query": "x"}))
        fake.rule(lambda r: "plan" in r.last_user_text, lambda r: reply_json({"sub_questions": []}))
        fake.fault(lambda r: "flaky" in r.last_user_text, status=529, times=2)   # then rules answer
        fake.fault(lambda r: "judge" in r.system_text, kind="reply", reply=reply_json({"no": "schema"}), times=1)
        settings = Settings(anthropic_api_key="sk-ant-test-...", anthropic_base_url=fake.base_url)

Order per request: JSON parse (400) -> api key (401, when `api_key=` was given) -> `on_request` callbacks ->
the first matching fault with uses left -> request-shape validation (400, like the real API) -> the fault's
`reply` (kind "reply"), else the first matching rule, else `brain` (default: a minimal instance of the
requested JSON schema, else the text "ok").

Usage is simulated deterministically: about one token per 4 characters of the request's tools, system
and messages. Prompt caching is simulated as the real API documents it, on the exact request bytes in render order
tools -> system -> messages, each block without its `cache_control` marker: a request reads the longest prefix that
was cached before, ending at one of its breakpoints or at any block boundary up to 20 blocks before one (the
lookback); it writes the prefix up to each breakpoint, billed from the end of what it read to its last breakpoint;
and what it writes is readable only once it has been answered, so requests sent at the same moment all write.
A reply longer than the request's `max_tokens` is cut and ends with stop_reason "max_tokens", as the real API does.

A `kind="reply"` fault answers a well-formed, billed 200 message with `reply` (a FakeReply, or a responder
called with the request) instead of the rules and the brain: a wrong answer the model could give (a structured
reply that does not match its schema, an empty text), limited by `times` like every fault.

`requests` records every HTTP request (the key header is kept so tests can assert it was sent; the
record's repr never shows headers). Retryable faults send `retry-after-ms: 1` unless `headers=` is
given, so the SDK's retries take milliseconds. The server, recording, rules and faults are the plumbing both
model-API fakes share (tests/fakes/loopback_api.py); this module holds what is the Messages API's own.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tests.fakes.loopback_api import InjectedFault, LoopbackFake, LoopbackHandler, _skip, _spans
from tests.fakes.loopback_api import InvalidRequest as InvalidRequest  # re-exported: defined with the shared plumbing
from tests.fakes.loopback_api import RecordedRequest as RecordedRequest

FaultKind = Literal["status", "malformed_json", "hang", "reset", "reply"]
ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 402: "billing_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
    504: "timeout_error", 529: "overloaded_error",
}
MAX_CACHE_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20  # how far before a breakpoint the API looks for a prefix it cached earlier


@dataclass(frozen=True)
class MessagesRequest:
    """A typed view of a POST /v1/messages body, for predicates and brains to look at."""

    model: str
    max_tokens: int
    system: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    tool_choice: dict[str, Any] | None
    output_schema: dict[str, Any] | None
    recorded: RecordedRequest

    @classmethod
    def of(cls, rec: RecordedRequest) -> MessagesRequest:
        b = rec.body if isinstance(rec.body, dict) else {}
        system = b.get("system") or []
        fmt = (b.get("output_config") or {}).get("format") or {}
        return cls(
            model=str(b.get("model", "")),
            max_tokens=n if isinstance(n := b.get("max_tokens"), int) else 0,
            system=[{"type": "text", "text": system}] if isinstance(system, str) else list(system),
            messages=list(b.get("messages") or []), tools=list(b.get("tools") or []),
            tool_choice=b.get("tool_choice"), output_schema=fmt.get("schema") if isinstance(fmt, dict) else None,
            recorded=rec,
        )

    @property
    def system_text(self) -> str:
        return "\n".join(blk.get("text", "") for blk in self.system if isinstance(blk, dict))

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(str(t.get("name")) for t in self.tools if isinstance(t, dict))

    def has_tool(self, name: str) -> bool:
        return name in self.tool_names

    @property
    def user_texts(self) -> list[str]:
        """The text of every user turn, in order."""
        return [_text_of(m.get("content")) for m in self.messages if isinstance(m, dict) and m.get("role") == "user"]

    @property
    def last_user_text(self) -> str:
        texts = self.user_texts
        return texts[-1] if texts else ""

    @property
    def tool_results(self) -> list[dict[str, Any]]:
        """The tool_result blocks of the last user turn."""
        for m in reversed(self.messages):
            if isinstance(m, dict) and m.get("role") == "user":
                return [b for b in _blocks(m.get("content")) if b.get("type") == "tool_result"]
        return []

    @property
    def ends_with_assistant(self) -> bool:
        """True for a continuation (after pause_turn) or a prefill."""
        last = self.messages[-1] if self.messages else None
        return isinstance(last, dict) and last.get("role") == "assistant"

    def contains(self, text: str) -> bool:
        """True when `text` occurs anywhere in the body (system, tools or messages)."""
        return text in json.dumps(self.recorded.body, ensure_ascii=False)


@dataclass(frozen=True)
class FakeReply:
    """What the model 'says': content blocks (ids of tool_use blocks filled in if None) and a stop reason."""

    content: list[dict[str, Any]]
    stop_reason: str = "end_turn"
    output_tokens: int | None = None  # default: about one per 4 characters of content
    stop_details: dict[str, Any] | None = None


Predicate = Callable[[MessagesRequest], bool]
Responder = Callable[[MessagesRequest], FakeReply]


def reply_text(text: str, stop_reason: str = "end_turn") -> FakeReply:
    return FakeReply([{"type": "text", "text": text}], stop_reason)


def reply_json(obj: Any, stop_reason: str = "end_turn") -> FakeReply:
    """A text reply holding `obj` as JSON (what a structured-output call returns)."""
    return reply_text(json.dumps(obj), stop_reason)


def tool_use_block(name: str, input: dict[str, Any], id: str | None = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def reply_tool_use(name: str, input: dict[str, Any], *, text: str | None = None, id: str | None = None) -> FakeReply:
    """One tool call (for parallel calls build FakeReply([tool_use_block(...), ...], "tool_use"))."""
    pre = [{"type": "text", "text": text}] if text else []
    return FakeReply([*pre, tool_use_block(name, input, id)], "tool_use")


def reply_refusal(category: str | None = "general_harms") -> FakeReply:
    return FakeReply([], "refusal", stop_details={"type": "refusal", "category": category, "explanation": None})


def reply_web_search(query: str, results: Sequence[Mapping[str, Any]], *, text: str = "",
                     stop_reason: str = "end_turn") -> FakeReply:
    """A server-side web search turn: server_tool_use, web_search_tool_result, then text.

    Each result is {url, title, page_age?, snippet?}; a snippet becomes a text block quoting it with a
    web_search_result_location citation, as the real model's cited answer does.
    """
    sid = "srvtoolu_" + hashlib.sha256(query.encode()).hexdigest()[:20]
    found = [{"type": "web_search_result", "url": r["url"], "title": r.get("title", ""), "page_age": r.get("page_age"),
              "encrypted_content": "enc_" + hashlib.sha256(r["url"].encode()).hexdigest()[:16]}
             for r in results]
    blocks: list[dict[str, Any]] = [
        {"type": "server_tool_use", "id": sid, "name": "web_search", "input": {"query": query}},
        {"type": "web_search_tool_result", "tool_use_id": sid, "content": found},
    ]
    blocks += [{"type": "text", "text": r["snippet"], "citations": [{
        "type": "web_search_result_location", "url": r["url"], "title": r.get("title", ""),
        "encrypted_index": "idx_" + hashlib.sha256(r["url"].encode()).hexdigest()[:12], "cited_text": r["snippet"]}]}
        for r in results if r.get("snippet")]
    return FakeReply(blocks + ([{"type": "text", "text": text}] if text else []), stop_reason)


def minimal_instance(schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None) -> Any:
    """The smallest value valid for a (strict-subset) JSON schema: required fields only, empty strings, zeros."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return minimal_instance(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for union in ("anyOf", "oneOf", "allOf"):
        if schema.get(union):
            return minimal_instance(schema[union][0], defs)
    kind: Any = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else None
    if kind == "object":
        props = schema.get("properties", {})
        return {k: minimal_instance(props[k], defs) for k in schema.get("required", []) if k in props}
    return {"string": "", "integer": 0, "number": 0, "boolean": False, "array": [], "null": None}.get(kind)


def default_brain(req: MessagesRequest) -> FakeReply:
    """A minimal valid instance for a structured request, else the text "ok"."""
    return reply_json(minimal_instance(req.output_schema)) if req.output_schema else reply_text("ok")


# An injected failure for requests matching its predicate; `times` None means every time.
Fault = InjectedFault[MessagesRequest, FakeReply, FaultKind]


class _Handler(LoopbackHandler["FakeAnthropic"]):
    """Answers FakeAnthropic's requests with Messages API bodies, errors and headers."""

    paths = ("/v1/messages", "/v1/messages/count_tokens")
    not_found = "Not found: {path}"
    not_json = "There was an error parsing the body of your request: not a JSON object"
    bad_key = "invalid x-api-key"
    fault_messages = {
        401: "invalid x-api-key", 403: "Your API key does not have permission to use the specified resource.",
        429: "Number of request tokens has exceeded your per-minute rate limit.", 500: "Internal server error",
        529: "Overloaded",
    }
    broken_json = b'{"id": "msg_broken", "type": "message", "content": ['
    request_id_header = "request-id"

    def _error(self, rec: RecordedRequest, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        body = {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message},
                "request_id": None}
        self._send(rec, status, body, headers)


class FakeAnthropic(LoopbackFake[MessagesRequest, FakeReply, RecordedRequest, FaultKind]):
    """A ThreadingHTTPServer on 127.0.0.1 serving POST /v1/messages (and /v1/messages/count_tokens)."""

    handler = _Handler
    record_type = RecordedRequest
    model_path = "/v1/messages"

    def __init__(self, brain: Responder = default_brain, *, api_key: str | None = None,
                 min_cache_tokens: int = 0, hang_seconds: float = 10.0, strict_roles: bool = True):
        super().__init__(brain, api_key=api_key, hang_seconds=hang_seconds)
        self.min_cache_tokens = min_cache_tokens
        # The real API merges consecutive same-role turns; strict mode rejects them so sloppy history building shows.
        self.strict_roles = strict_roles
        self._cache: set[str] = set()

    @property
    def message_requests(self) -> list[MessagesRequest]:
        """Typed views of every POST /v1/messages received (faulted ones included)."""
        return self._model_calls()

    def _view(self, rec: RecordedRequest) -> MessagesRequest:
        return MessagesRequest.of(rec)

    def _check(self, rec: RecordedRequest) -> None:
        _validate(rec, strict_roles=self.strict_roles)

    def _forget_cache(self) -> None:
        self._cache.clear()

    def _answer(self, rec: RecordedRequest, req: MessagesRequest, responder: Responder | None) -> dict[str, Any]:
        if rec.path != self.model_path:  # count_tokens
            return {"input_tokens": _tokens("".join(s for s, _ in _prompt_segments(rec)))}
        breakpoints, usage = self._cache_lookup(req)
        reply = self._reply(req, responder)
        with self._lock:  # readable by later requests only now that this one is answered
            self._cache.update(breakpoints)
        content = [dict(b) for b in reply.content]
        for i, b in enumerate(content):
            if b.get("type") == "tool_use" and not b.get("id"):
                b["id"] = "toolu_" + hashlib.sha256(rec.raw + str(i).encode()).hexdigest()[:24]
        content, out_tokens, stop = _within_max_tokens(reply, content, req.max_tokens)
        searches = sum(1 for b in content if b.get("type") == "server_tool_use")
        if searches:
            usage["server_tool_use"] = {"web_search_requests": searches}
        return {"id": "msg_" + hashlib.sha256(rec.raw).hexdigest()[:24], "type": "message", "role": "assistant",
                "model": req.model, "content": content, "stop_reason": stop, "stop_sequence": None,
                "stop_details": reply.stop_details, "usage": {**usage, "output_tokens": out_tokens}}

    def _cache_lookup(self, req: MessagesRequest) -> tuple[list[str], dict[str, Any]]:
        """(the prefix keys this request writes, its billed input usage) against what earlier answers cached."""
        segments = _prompt_segments(req.recorded)
        keys: list[str] = []
        ends: list[int] = []  # tokens up to the end of each segment
        sofar = hashlib.sha256(req.model.encode())
        chars = ""
        for text, _marked in segments:
            sofar.update(text.encode())
            chars += text
            keys.append(sofar.copy().hexdigest())
            ends.append(_tokens(chars))
        marks = [i for i, (_t, marked) in enumerate(segments) if marked and ends[i] >= self.min_cache_tokens]
        candidates = {j for i in marks for j in range(max(0, i - LOOKBACK_BLOCKS), i + 1)}
        with self._lock:
            read = max((ends[j] for j in candidates if keys[j] in self._cache), default=0)
        write = max(0, ends[marks[-1]] - read) if marks else 0
        total = ends[-1] if ends else 0
        return [keys[i] for i in marks], {"input_tokens": total - read - write,
                                          "cache_creation_input_tokens": write, "cache_read_input_tokens": read}


# -- request-shape validation (the subset of the real API's rules our code could break) -----------
def _validate(rec: RecordedRequest, *, strict_roles: bool) -> None:
    b = rec.body
    creating = rec.path == "/v1/messages"
    for name in ("model", "messages", *(("max_tokens",) if creating else ())):
        if name not in b:
            raise InvalidRequest(f"{name}: Field required")
    if creating and (not isinstance(b["max_tokens"], int) or b["max_tokens"] < 1):
        raise InvalidRequest("max_tokens: must be a positive integer")
    msgs = b["messages"]
    if not isinstance(msgs, list) or not msgs:
        raise InvalidRequest("messages: at least one message is required")
    prev_role = None
    for i, m in enumerate(msgs):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("user", "assistant"):
            raise InvalidRequest(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if i == 0 and role != "user":
            raise InvalidRequest("messages.0.role: the first message must use the \"user\" role")
        if strict_roles and role == prev_role:
            raise InvalidRequest(f"messages.{i}: roles must alternate between \"user\" and \"assistant\"")
        content = m.get("content")
        if content in ("", []) or content is None:
            raise InvalidRequest(f"messages.{i}: all messages must have non-empty content")
        prev_role = role
    _validate_tool_pairs(msgs)
    tools = b.get("tools") or []
    names = [t.get("name") for t in tools]
    if len(set(names)) != len(names):
        raise InvalidRequest("tools: Tool names must be unique.")
    for i, t in enumerate(tools):
        if t.get("type") in (None, "custom") and (t.get("input_schema") or {}).get("type") != "object":
            raise InvalidRequest(f"tools.{i}.custom.input_schema.type: Input should be 'object'")
    choice = b.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "tool" and choice.get("name") not in names:
        raise InvalidRequest(f"tool_choice: tool {choice.get('name')!r} not found in tools")
    marked = sum(1 for _s, m in _prompt_segments(rec) if m)
    if marked > MAX_CACHE_BREAKPOINTS:
        raise InvalidRequest(f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
                             f"Found {marked}.")
    fmt = (b.get("output_config") or {}).get("format")
    if fmt is not None:
        if fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
            raise InvalidRequest("output_config.format: expected {\"type\": \"json_schema\", \"schema\": {...}}")
        _validate_schema(fmt["schema"], "output_config.format.schema")


def _validate_tool_pairs(msgs: list[dict[str, Any]]) -> None:
    for i, m in enumerate(msgs):
        if m["role"] != "user":
            continue
        results = [blk.get("tool_use_id") for blk in _blocks(m.get("content")) if blk.get("type") == "tool_result"]
        asked: list[Any] = [blk.get("id") for blk in _blocks(msgs[i - 1].get("content"))
                 if blk.get("type") == "tool_use"] if i else []
        for rid in results:
            if rid not in asked:
                raise InvalidRequest(f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                                     f"{rid}. Each `tool_result` block must have a corresponding `tool_use` block in "
                                     "the previous message.")
        if asked and set(asked) - set(results):
            raise InvalidRequest(f"messages.{i - 1}: `tool_use` ids were found without `tool_result` blocks "
                                 f"immediately after: {', '.join(sorted(set(asked) - set(results)))}")


def _validate_schema(schema: Any, where: str) -> None:
    if isinstance(schema, dict):
        if schema.get("type") == "object" and schema.get("additionalProperties") is not False:
            raise InvalidRequest(f"{where}: For 'object' type, 'additionalProperties' must be explicitly set to false")
        for k, v in schema.items():
            if k in ("properties", "$defs"):
                for name, sub in v.items():
                    _validate_schema(sub, f"{where}.{k}.{name}")
            elif k in ("items", "anyOf", "allOf", "oneOf"):
                _validate_schema(v, f"{where}.{k}")
    elif isinstance(schema, list):
        for i, sub in enumerate(schema):
            _validate_schema(sub, f"{where}[{i}]")


# -- helpers ----------------------------------------------------------------------------------------
def _tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4) if text else 0


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in _blocks(content) if b.get("type") == "text")


def _within_max_tokens(reply: FakeReply, content: list[dict[str, Any]],
                       max_tokens: int) -> tuple[list[dict[str, Any]], int, str]:
    """`content` (the reply's blocks as sent), its output tokens and stop reason, cut at `max_tokens` as the real API
    cuts a reply that is too long (stop reason "max_tokens")."""
    out_tokens = reply.output_tokens if reply.output_tokens is not None else _tokens(json.dumps(content))
    if out_tokens > max_tokens:
        return _truncate(content, max_tokens), max_tokens, "max_tokens"
    return content, out_tokens, reply.stop_reason


def _truncate(content: list[dict[str, Any]], max_tokens: int) -> list[dict[str, Any]]:
    """The content cut at `max_tokens` (about 4 characters each): a partial text block, later blocks dropped."""
    room, out = max_tokens * 4, []
    for b in content:
        size = len(json.dumps(b))
        if size <= room:
            out.append(b)
            room -= size
            continue
        if b.get("type") == "text" and room > 0:
            out.append({**b, "text": b["text"][:room]})
        break
    return out


def _unmarked(block: str) -> tuple[str, bool]:
    """A block's bytes without its cache_control marker (which is no part of the cached content), and whether it had
    one."""
    value = json.loads(block)
    if not isinstance(value, dict):
        return block, False
    # Every block re-serialised the same way, so one marked in one request and bare in the next has the same bytes.
    bare = json.dumps({k: v for k, v in value.items() if k != "cache_control"}, separators=(",", ":"))
    return bare, "cache_control" in value


def _prompt_segments(rec: RecordedRequest) -> list[tuple[str, bool]]:
    """(exact request text, carries cache_control) per cacheable unit, in render order tools -> system -> messages."""
    text = rec.raw.decode("utf-8")
    spans = {k: (s, e) for k, s, e in _spans(text, _skip(text, 0))}
    out: list[tuple[str, bool]] = []
    for name in ("tools", "system"):
        if name not in spans:
            continue
        s, e = spans[name]
        if text[s] == "[":
            out += [_unmarked(text[a:z]) for _k, a, z in _spans(text, s)]
        else:
            out.append((text[s:e], False))
    if "messages" in spans and text[spans["messages"][0]] == "[":
        for _k, a, _z in _spans(text, spans["messages"][0]):
            parts = {k: (s, e) for k, s, e in _spans(text, a)}
            role = text[slice(*parts["role"])] if "role" in parts else ""
            if "content" not in parts:
                continue
            cs, ce = parts["content"]
            if text[cs] == "[":
                out += [(role + block, marked) for block, marked in
                        (_unmarked(text[x:y]) for _k, x, y in _spans(text, cs))]
            else:
                out.append((role + text[cs:ce], False))
    return out
