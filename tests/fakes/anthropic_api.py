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
and messages; prompt caching is simulated on the exact request bytes up to each `cache_control`
breakpoint (render order tools -> system -> messages): a prefix seen before is billed as
`cache_read_input_tokens`, a new one as `cache_creation_input_tokens`. A reply longer than the request's
`max_tokens` is cut and ends with stop_reason "max_tokens", as the real API does.

A `kind="reply"` fault answers a well-formed, billed 200 message with `reply` (a FakeReply, or a responder
called with the request) instead of the rules and the brain: a wrong answer the model could give (a structured
reply that does not match its schema, an empty text), limited by `times` like every fault.

`requests` records every HTTP request (the key header is kept so tests can assert it was sent; the
record's repr never shows headers). Retryable faults send `retry-after-ms: 1` unless `headers=` is
given, so the SDK's retries take milliseconds.
"""
from __future__ import annotations

import hashlib
import json
import socket
import struct
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

FaultKind = Literal["status", "malformed_json", "hang", "reset", "reply"]
ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 402: "billing_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
    504: "timeout_error", 529: "overloaded_error",
}
_RETRYABLE = {408, 409, 429} | set(range(500, 600))
MAX_CACHE_BREAKPOINTS = 4


class InvalidRequest(Exception):
    """The request breaks a rule the real API enforces; becomes a 400 invalid_request_error."""


@dataclass
class RecordedRequest:
    """One HTTP request as received, and what the fake answered."""

    path: str
    headers: Mapping[str, str] = field(repr=False)  # lower-cased names; holds the api key: never print it
    raw: bytes = field(repr=False)
    body: Any = field(repr=False)  # the parsed JSON, or None when the body was not JSON
    status: int = 0
    response: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def api_key(self) -> str | None:
        """The key sent as `x-api-key` or as `Authorization: Bearer` (this SDK version sends the latter)."""
        bearer = self.headers.get("authorization", "")
        return self.headers.get("x-api-key") or (bearer[7:] if bearer.lower().startswith("bearer ") else None)

    def field_bytes(self, name: str) -> bytes | None:
        """The exact bytes of top-level body field `name` as sent (to compare serialisations byte for byte)."""
        text = self.raw.decode("utf-8")
        for key, start, end in _members(text, _skip(text, 0)):
            if key == name:
                return text[start:end].encode("utf-8")
        return None


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


@dataclass
class Fault:
    """An injected failure for requests matching `predicate`; `times` None means every time."""

    predicate: Predicate
    kind: FaultKind
    status: int
    times: int | None
    headers: dict[str, str] | None
    body: bytes | None
    fired: int = 0
    reply: Responder | None = None  # kind "reply": what the model says instead


class FakeAnthropic:
    """A ThreadingHTTPServer on 127.0.0.1 serving POST /v1/messages (and /v1/messages/count_tokens)."""

    def __init__(self, brain: Responder = default_brain, *, api_key: str | None = None,
                 min_cache_tokens: int = 0, hang_seconds: float = 10.0, strict_roles: bool = True):
        self.brain = brain
        self.api_key = api_key
        self.min_cache_tokens = min_cache_tokens
        self.hang_seconds = hang_seconds
        # The real API merges consecutive same-role turns; strict mode rejects them so sloppy history building shows.
        self.strict_roles = strict_roles
        self.handler_errors: list[BaseException] = []
        self._rules: list[tuple[Predicate, Responder]] = []
        self._observers: list[Callable[[MessagesRequest], None]] = []
        self._faults: list[Fault] = []
        self._requests: list[RecordedRequest] = []
        self._cache: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> FakeAnthropic:
        fake = self

        class Handler(_Handler):
            owner = fake

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

            def handle_error(self, request: Any, client_address: Any) -> None:
                fake.handler_errors.append(sys.exc_info()[1])  # type: ignore[arg-type]  # never print tracebacks

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "use FakeAnthropic as a context manager"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- configuration ---------------------------------------------------------------------------
    def rule(self, predicate: Predicate, responder: Responder | FakeReply) -> None:
        """Answer requests matching `predicate` with `responder` (first registered match wins)."""
        fn = responder if callable(responder) else (lambda _r, reply=responder: reply)
        with self._lock:
            self._rules.append((predicate, fn))

    def fault(self, predicate: Predicate | None = None, *, status: int = 500, kind: FaultKind = "status",
              times: int | None = 1, headers: dict[str, str] | None = None, body: bytes | None = None,
              reply: Responder | FakeReply | None = None) -> Fault:
        """Fail the next `times` matching requests: an HTTP error `status`, a broken 200 body, a hang, a reset, or
        (kind "reply") a well-formed answer saying `reply` instead of what the rules and the brain would say."""
        if kind == "reply" and reply is None:
            raise ValueError('a kind="reply" fault needs reply=')
        responder = reply if reply is None or callable(reply) else (lambda _r, said=reply: said)
        f = Fault(predicate or (lambda _r: True), kind, status, times, headers, body, reply=responder)
        with self._lock:
            self._faults.append(f)
        return f

    def on_request(self, callback: Callable[[MessagesRequest], None]) -> None:
        """Call `callback` with each POST /v1/messages as it arrives, before faults, rules and the brain answer it
        (on the server's thread): to act at a given point of a run, such as killing its process or filling its
        disk. An exception in a callback is kept in `handler_errors`; the request is answered anyway."""
        with self._lock:
            self._observers.append(callback)

    def reset(self) -> None:
        """Forget every rule, fault, observer, recorded request, handler error and cached prompt: the server as new,
        for a fixture that reuses one server between tests (`brain` and the other constructor settings are kept)."""
        with self._lock:
            self._rules.clear()
            self._observers.clear()
            self._faults.clear()
            self._requests.clear()
            self._cache.clear()
            self.handler_errors.clear()

    # -- inspection ------------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def message_requests(self) -> list[MessagesRequest]:
        """Typed views of every POST /v1/messages received (faulted ones included)."""
        return [MessagesRequest.of(r) for r in self.requests if r.path == "/v1/messages"]

    def count(self, predicate: Predicate | None = None) -> int:
        return sum(1 for r in self.message_requests if predicate is None or predicate(r))

    # -- request handling (called on server threads) ---------------------------------------------
    def _record(self, rec: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(rec)

    def _observe(self, req: MessagesRequest) -> None:
        with self._lock:
            observers = list(self._observers)
        for callback in observers:
            try:
                callback(req)
            except Exception as e:  # a test's callback broke: kept for the test to see, the request still answered
                self.handler_errors.append(e)

    def _pick_fault(self, req: MessagesRequest) -> Fault | None:
        with self._lock:
            for f in self._faults:
                if (f.times is None or f.fired < f.times) and f.predicate(req):
                    f.fired += 1
                    return f
        return None

    def _pick_responder(self, req: MessagesRequest) -> Responder:
        with self._lock:
            rules = list(self._rules)
        return next((fn for pred, fn in rules if pred(req)), self.brain)

    def _answer(self, req: MessagesRequest, responder: Responder | None = None) -> dict[str, Any]:
        reply = (responder or self._pick_responder(req))(req)
        rec = req.recorded
        content = [dict(b) for b in reply.content]
        for i, b in enumerate(content):
            if b.get("type") == "tool_use" and not b.get("id"):
                b["id"] = "toolu_" + hashlib.sha256(rec.raw + str(i).encode()).hexdigest()[:24]
        out_tokens = reply.output_tokens if reply.output_tokens is not None else _tokens(json.dumps(content))
        stop = reply.stop_reason
        if out_tokens > req.max_tokens:
            content, out_tokens, stop = _truncate(content, req.max_tokens), req.max_tokens, "max_tokens"
        usage = self._usage(req)
        searches = sum(1 for b in content if b.get("type") == "server_tool_use")
        if searches:
            usage["server_tool_use"] = {"web_search_requests": searches}
        return {"id": "msg_" + hashlib.sha256(rec.raw).hexdigest()[:24], "type": "message", "role": "assistant",
                "model": req.model, "content": content, "stop_reason": stop, "stop_sequence": None,
                "stop_details": reply.stop_details, "usage": {**usage, "output_tokens": out_tokens}}

    def _usage(self, req: MessagesRequest) -> dict[str, Any]:
        segments = _prompt_segments(req.recorded)
        total = _tokens("".join(s for s, _ in segments))
        breakpoints: list[tuple[str, int]] = []
        sofar = hashlib.sha256(req.model.encode())
        chars = ""
        for text, marked in segments:
            sofar.update(text.encode())
            chars += text
            if marked and _tokens(chars) >= self.min_cache_tokens:
                breakpoints.append((sofar.copy().hexdigest(), _tokens(chars)))
        with self._lock:
            read = next((n for key, n in reversed(breakpoints) if key in self._cache), 0)
            write = max(0, breakpoints[-1][1] - read) if breakpoints else 0
            self._cache.update(key for key, _ in breakpoints)
        return {"input_tokens": total - read - write, "cache_creation_input_tokens": write,
                "cache_read_input_tokens": read}


class _Handler(BaseHTTPRequestHandler):
    owner: FakeAnthropic
    protocol_version = "HTTP/1.1"
    timeout = 15
    # Headers and body go out in two writes; with Nagle's algorithm the body then waits for the client's delayed
    # ACK of the headers (about 40 ms per answer on Linux). No byte changes, only when they leave.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet: test output stays clean
        return None

    def do_POST(self) -> None:
        fake = self.owner
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = None
        rec = RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, raw, body)
        fake._record(rec)
        if self.path not in ("/v1/messages", "/v1/messages/count_tokens"):
            return self._error(rec, 404, f"Not found: {self.path}")
        if not isinstance(body, dict):
            return self._error(rec, 400, "There was an error parsing the body of your request: not a JSON object")
        if fake.api_key is not None and rec.api_key != fake.api_key:
            return self._error(rec, 401, "invalid x-api-key")
        req = MessagesRequest.of(rec)
        if self.path == "/v1/messages":
            fake._observe(req)
        fault = fake._pick_fault(req)
        if fault is not None and fault.reply is None:
            return self._fault(rec, fault)
        try:
            _validate(rec, strict_roles=fake.strict_roles)
        except InvalidRequest as e:
            return self._error(rec, 400, str(e))
        if self.path.endswith("count_tokens"):
            return self._send(rec, 200, {"input_tokens": _tokens("".join(s for s, _ in _prompt_segments(rec)))})
        try:
            answer = fake._answer(req, fault.reply if fault is not None else None)
        except Exception as e:  # a test's brain or rule broke: say so, and stop the SDK retrying it
            fake.handler_errors.append(e)
            return self._error(rec, 500, f"fake brain raised {type(e).__name__}: {e}", {"x-should-retry": "false"})
        self._send(rec, 200, answer)

    def _fault(self, rec: RecordedRequest, f: Fault) -> None:
        if f.kind == "hang":
            rec.status = -1
            self.owner._stop.wait(self.owner.hang_seconds)
            self.close_connection = True
            return None
        if f.kind == "reset":
            rec.status = -2
            # SO_LINGER 0 makes close() send a TCP RST instead of a clean FIN.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            return None
        if f.kind == "malformed_json":
            return self._send_raw(rec, 200, f.body or b'{"id": "msg_broken", "type": "message", "content": [',
                                  f.headers or {})
        headers = f.headers if f.headers is not None else ({"retry-after-ms": "1"} if f.status in _RETRYABLE else {})
        if f.body is not None:
            return self._send_raw(rec, f.status, f.body, headers)
        return self._error(rec, f.status, _DEFAULT_MESSAGES.get(f.status, f"Fake fault {f.status}"), headers)

    def _error(self, rec: RecordedRequest, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        body = {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message},
                "request_id": None}
        self._send(rec, status, body, headers)

    def _send(self, rec: RecordedRequest, status: int, body: dict[str, Any],
              headers: Mapping[str, str] | None = None) -> None:
        rec.response = body
        self._send_raw(rec, status, json.dumps(body).encode(), headers or {})

    def _send_raw(self, rec: RecordedRequest, status: int, data: bytes, headers: Mapping[str, str]) -> None:
        rec.status = status
        with self.owner._lock:
            request_id = f"req_fake_{len(self.owner._requests):06d}"
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", request_id)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


_DEFAULT_MESSAGES = {
    401: "invalid x-api-key", 403: "Your API key does not have permission to use the specified resource.",
    429: "Number of request tokens has exceeded your per-minute rate limit.", 500: "Internal server error",
    529: "Overloaded",
}


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


def _prompt_segments(rec: RecordedRequest) -> list[tuple[str, bool]]:
    """(exact request text, carries cache_control) per cacheable unit, in render order tools -> system -> messages."""
    text = rec.raw.decode("utf-8")
    spans = {k: (s, e) for k, s, e in _members(text, _skip(text, 0))}
    out: list[tuple[str, bool]] = []
    for name in ("tools", "system"):
        if name not in spans:
            continue
        s, e = spans[name]
        if text[s] == "[":
            out += [(text[a:z], "cache_control" in json.loads(text[a:z])) for a, z in _elements(text, s)]
        else:
            out.append((text[s:e], False))
    if "messages" in spans and text[spans["messages"][0]] == "[":
        for a, _z in _elements(text, spans["messages"][0]):
            parts = {k: (s, e) for k, s, e in _members(text, a)}
            role = text[slice(*parts["role"])] if "role" in parts else ""
            if "content" not in parts:
                continue
            cs, ce = parts["content"]
            if text[cs] == "[":
                out += [(role + text[x:y], "cache_control" in json.loads(text[x:y])) for x, y in _elements(text, cs)]
            else:
                out.append((role + text[cs:ce], False))
    return out


_DECODER = json.JSONDecoder()


def _skip(s: str, i: int) -> int:
    while i < len(s) and s[i] in " \t\r\n":
        i += 1
    return i


def _members(s: str, i: int) -> list[tuple[str, int, int]]:
    """(key, start, end) of each member of the JSON object starting at s[i]."""
    out: list[tuple[str, int, int]] = []
    if i >= len(s) or s[i] != "{":
        return out
    i = _skip(s, i + 1)
    while i < len(s) and s[i] != "}":
        key, i = _DECODER.raw_decode(s, i)
        i = _skip(s, _skip(s, i) + 1)  # past ':'
        _, end = _DECODER.raw_decode(s, i)
        out.append((key, i, end))
        i = _skip(s, end)
        if i < len(s) and s[i] == ",":
            i = _skip(s, i + 1)
    return out


def _elements(s: str, i: int) -> list[tuple[int, int]]:
    """(start, end) of each element of the JSON array starting at s[i]."""
    out: list[tuple[int, int]] = []
    i = _skip(s, i + 1)
    while i < len(s) and s[i] != "]":
        _, end = _DECODER.raw_decode(s, i)
        out.append((i, end))
        i = _skip(s, end)
        if i < len(s) and s[i] == ",":
            i = _skip(s, i + 1)
    return out
