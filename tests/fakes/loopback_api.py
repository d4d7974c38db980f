"""The plumbing the loopback fakes of model APIs share (tests/fakes/anthropic_api.py, tests/fakes/openai_api.py).

`LoopbackFake` is a ThreadingHTTPServer on 127.0.0.1 that records every request and answers it, looking only at
the request, in this order: unknown path (404) -> body not a JSON object (400) -> api key (401, when `api_key=` was
given) -> the API's own admission checks -> `on_request` callbacks -> the first matching fault with uses left ->
the API's request-shape validation (400) -> the fault's `reply` (kind "reply"), else the first matching rule, else
`brain`. `LoopbackHandler` acts out the fault kinds every fake has: "status" (an API error; retryable statuses send
`retry-after-ms: 1` unless `headers=` is given, so SDK retries take milliseconds), "malformed_json" (a 200 that is
not JSON), "hang" (no answer for `hang_seconds`, released when the fake closes) and "reset" (a TCP RST).

Each fake adds only what is its API's own: the typed request view predicates and brains see, validation, response
and error shapes, usage and caching, and any further fault kinds.
"""
from __future__ import annotations

import json
import socket
import struct
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Generic, Literal, Self, TypeVar

ViewT = TypeVar("ViewT")  # the typed view of a request that predicates, rules and brains look at
ReplyT = TypeVar("ReplyT")  # what a rule or brain says
RecordT = TypeVar("RecordT", bound="RecordedRequest")  # what the fake keeps of each HTTP request
KindT = TypeVar("KindT", bound=str)  # the fault kinds a fake knows
FakeT = TypeVar("FakeT", bound="LoopbackFake[Any, Any, Any, Any]")
_RETRYABLE = {408, 409, 429} | set(range(500, 600))


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
        """The key sent as `x-api-key` or as `Authorization: Bearer` (the SDKs send the latter)."""
        bearer = self.headers.get("authorization", "")
        return self.headers.get("x-api-key") or (bearer[7:] if bearer.lower().startswith("bearer ") else None)

    def field_bytes(self, name: str) -> bytes | None:
        """The exact bytes of top-level body field `name` as sent (to compare serialisations byte for byte)."""
        text = self.raw.decode("utf-8")
        for key, start, end in _spans(text, _skip(text, 0)):
            if key == name:
                return text[start:end].encode("utf-8")
        return None


@dataclass
class InjectedFault(Generic[ViewT, ReplyT, KindT]):
    """An injected failure for requests matching `predicate`; `times` None means every time."""

    predicate: Callable[[ViewT], bool]
    kind: KindT | Literal["status"]  # every fake knows "status", its default
    status: int
    times: int | None
    headers: dict[str, str] | None
    body: bytes | None
    fired: int = 0
    reply: Callable[[ViewT], ReplyT] | None = None  # kind "reply": what the model says instead


class LoopbackFake(ABC, Generic[ViewT, ReplyT, RecordT, KindT]):
    """A ThreadingHTTPServer on 127.0.0.1 answering an API's requests by faults, rules and a brain."""

    handler: ClassVar[type[LoopbackHandler[Any]]]  # answers each HTTP request
    record_type: type[RecordT]  # what each HTTP request is recorded as
    model_path: ClassVar[str]  # the path of the model calls that observers, views and `count` see
    base_path: ClassVar[str] = ""  # appended to the server's address in `base_url`

    def __init__(self, brain: Callable[[ViewT], ReplyT], *, api_key: str | None, hang_seconds: float):
        self.brain = brain
        self.api_key = api_key
        self.hang_seconds = hang_seconds
        self.handler_errors: list[BaseException] = []
        self._rules: list[tuple[Callable[[ViewT], bool], Callable[[ViewT], ReplyT]]] = []
        self._observers: list[Callable[[ViewT], None]] = []
        self._faults: list[InjectedFault[ViewT, ReplyT, KindT]] = []
        self._requests: list[RecordT] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> Self:
        fake = self

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

            def handle_error(self, request: Any, client_address: Any) -> None:
                fake.handler_errors.append(sys.exc_info()[1])  # type: ignore[arg-type]  # never print tracebacks

        self._server = Server(("127.0.0.1", 0), type("Handler", (self.handler,), {"owner": self}))
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def base_url(self) -> str:
        """The URL to give the SDK as `base_url`: the server's address, then `base_path`."""
        assert self._server is not None, f"use {type(self).__name__} as a context manager"
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.base_path}"

    # -- configuration ---------------------------------------------------------------------------
    def rule(self, predicate: Callable[[ViewT], bool], responder: Callable[[ViewT], ReplyT] | ReplyT) -> None:
        """Answer requests matching `predicate` with `responder` (first registered match wins)."""
        fn = responder if callable(responder) else (lambda _r, reply=responder: reply)
        with self._lock:
            self._rules.append((predicate, fn))

    def fault(self, predicate: Callable[[ViewT], bool] | None = None, *, status: int = 500,
              kind: KindT | Literal["status"] = "status", times: int | None = 1, headers: dict[str, str] | None = None,
              body: bytes | None = None,
              reply: Callable[[ViewT], ReplyT] | ReplyT | None = None) -> InjectedFault[ViewT, ReplyT, KindT]:
        """Fail the next `times` matching requests (None: all of them) in the way `kind` names (the fake's module
        docstring): an HTTP error `status`, a broken 200 body, a hang, a reset, the fake's own kinds, or (kind "reply")
        a well-formed answer saying `reply` instead of what the rules and the brain would say. `body` replaces the
        bytes a fault sends."""
        if kind == "reply" and reply is None:
            raise ValueError('a kind="reply" fault needs reply=')
        responder = reply if reply is None or callable(reply) else (lambda _r, said=reply: said)
        f = InjectedFault[ViewT, ReplyT, KindT](predicate or (lambda _r: True), kind, status, times, headers, body,
                                                reply=responder)
        with self._lock:
            self._faults.append(f)
        return f

    def on_request(self, callback: Callable[[ViewT], None]) -> None:
        """Call `callback` with each model call as it arrives, before faults, rules and the brain answer it (on the
        server's thread): to act at a given point of a run, such as killing its process or filling its disk. An
        exception in a callback is kept in `handler_errors`; the request is answered anyway."""
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
            self._forget_cache()
            self.handler_errors.clear()

    # -- inspection ------------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordT]:
        """Every HTTP request received, in arrival order."""
        with self._lock:
            return list(self._requests)

    def _model_calls(self) -> list[ViewT]:
        """Views of every model call received (faulted ones included), in arrival order."""
        return [self._view(r) for r in self.requests if r.path == self.model_path]

    def count(self, predicate: Callable[[ViewT], bool] | None = None) -> int:
        """How many model calls (faulted ones included) match `predicate`."""
        return sum(1 for r in self._model_calls() if predicate is None or predicate(r))

    # -- what each API does its own way ------------------------------------------------------------
    @abstractmethod
    def _view(self, rec: RecordT) -> ViewT:
        """The typed view of a recorded request (tolerant of bodies that fail validation)."""

    @abstractmethod
    def _check(self, rec: RecordT) -> None:
        """Raise InvalidRequest when the request breaks one of the API's rules."""

    @abstractmethod
    def _answer(self, rec: RecordT, req: ViewT, responder: Callable[[ViewT], ReplyT] | None) -> dict[str, Any]:
        """The 200 body for a valid request: what `responder` (default: the first matching rule, else the brain)
        says, in the API's shape."""

    @abstractmethod
    def _forget_cache(self) -> None:
        """Forget the simulated prompt cache (called holding the lock)."""

    # -- request handling (called on server threads) ---------------------------------------------
    def _record(self, rec: RecordT) -> int:
        """Keep `rec`; its number in arrival order, from 1."""
        with self._lock:
            self._requests.append(rec)
            return len(self._requests)

    def _observe(self, req: ViewT) -> None:
        """Call each `on_request` callback with `req`."""
        with self._lock:
            observers = list(self._observers)
        for callback in observers:
            try:
                callback(req)
            except Exception as e:  # a test's callback broke: kept for the test to see, the request still answered
                self.handler_errors.append(e)

    def _pick_fault(self, req: ViewT) -> InjectedFault[ViewT, ReplyT, KindT] | None:
        """The first fault matching `req` with uses left, now used once more."""
        with self._lock:
            for f in self._faults:
                if (f.times is None or f.fired < f.times) and f.predicate(req):
                    f.fired += 1
                    return f
        return None

    def _reply(self, req: ViewT, responder: Callable[[ViewT], ReplyT] | None) -> ReplyT:
        """What `responder` says to `req`, else the first matching rule, else the brain."""
        with self._lock:
            rules = list(self._rules)
        return (responder or next((fn for pred, fn in rules if pred(req)), self.brain))(req)


class LoopbackHandler(ABC, BaseHTTPRequestHandler, Generic[FakeT]):
    """Answers one HTTP request for its fake (`owner`) in the API's shapes, which subclasses give."""

    owner: FakeT
    protocol_version = "HTTP/1.1"
    timeout = 15
    # Headers and body go out in two writes; with Nagle's algorithm the body then waits for the client's delayed
    # ACK of the headers (about 40 ms per answer on Linux). No byte changes, only when they leave.
    disable_nagle_algorithm = True
    paths: ClassVar[tuple[str, ...]]  # the paths served; any other gets a 404
    not_found: ClassVar[str]  # the 404 message for an unknown path, formatted with `path`
    not_json: ClassVar[str]  # the 400 message for a body that is not a JSON object
    bad_key: ClassVar[str]  # the 401 message for a wrong api key
    fault_messages: ClassVar[Mapping[int, str]]  # the message of a "status" fault without `body=`, by status
    broken_json: ClassVar[bytes]  # what a "malformed_json" fault sends without `body=`
    request_id_header: ClassVar[str]  # the response header carrying the request id
    request_id = ""  # per request: "req_fake_" and its number in arrival order

    def log_message(self, format: str, *args: Any) -> None:  # quiet: test output stays clean
        return None

    def do_POST(self) -> None:
        """Record the request, then answer it in the order the module docstring gives."""
        fake = self.owner
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = None
        rec = fake.record_type(self.path, {k.lower(): v for k, v in self.headers.items()}, raw, body)
        self.request_id = f"req_fake_{fake._record(rec):06d}"
        if self.path not in self.paths:
            return self._error(rec, 404, self.not_found.format(path=self.path))
        if not isinstance(body, dict):
            return self._error(rec, 400, self.not_json)
        if fake.api_key is not None and rec.api_key != fake.api_key:
            return self._error(rec, 401, self.bad_key)
        if not self._admit(rec):
            return None
        req = fake._view(rec)
        if self.path == fake.model_path:
            fake._observe(req)
        fault = fake._pick_fault(req)
        if fault is not None and fault.reply is None:
            return self._fault(rec, fault)
        try:
            fake._check(rec)
        except InvalidRequest as e:
            return self._invalid(rec, e)
        try:
            answer = fake._answer(rec, req, fault.reply if fault is not None else None)
        except Exception as e:  # a test's brain or rule broke: say so, and stop the SDK retrying it
            fake.handler_errors.append(e)
            return self._error(rec, 500, f"fake brain raised {type(e).__name__}: {e}", {"x-should-retry": "false"})
        self._send(rec, 200, answer)

    def _admit(self, rec: RecordedRequest) -> bool:
        """The API's own checks before faults: False after answering a request they refuse (none by default)."""
        return True

    def _fault(self, rec: RecordedRequest, f: InjectedFault[Any, Any, Any]) -> None:
        """Act out a "hang", "reset", "malformed_json" or "status" fault."""
        if f.kind == "hang":
            rec.status = -1
            self.owner._stop.wait(self.owner.hang_seconds)
            self.close_connection = True
        elif f.kind == "reset":
            rec.status = -2
            # SO_LINGER 0 makes close() send a TCP RST instead of a clean FIN.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
        elif f.kind == "malformed_json":
            self._send_raw(rec, 200, f.body or self.broken_json, f.headers or {})
        else:
            retry = {"retry-after-ms": "1"} if f.status in _RETRYABLE else {}
            headers = f.headers if f.headers is not None else retry
            if f.body is not None:
                self._send_raw(rec, f.status, f.body, headers)
            else:
                self._error(rec, f.status, self.fault_messages.get(f.status, f"Fake fault {f.status}"), headers)

    def _invalid(self, rec: RecordedRequest, e: InvalidRequest) -> None:
        """Answer a request that breaks one of the API's rules: a 400 saying which."""
        self._error(rec, 400, str(e))

    @abstractmethod
    def _error(self, rec: RecordedRequest, status: int, message: str,
               headers: Mapping[str, str] | None = None) -> None:
        """Send an error in the API's shape."""

    def _send(self, rec: RecordedRequest, status: int, body: dict[str, Any],
              headers: Mapping[str, str] | None = None) -> None:
        """Send `body` as JSON, and keep it as the record's response."""
        rec.response = body
        self._send_raw(rec, status, json.dumps(body).encode(), headers or {})

    def _send_raw(self, rec: RecordedRequest, status: int, data: bytes, headers: Mapping[str, str], *,
                  content_type: str = "application/json", length: int | None = None) -> None:
        """Send `data` as the body (`length` claims another Content-Length, to cut a body short)."""
        rec.status = status
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data) if length is None else length))
        self.send_header(self.request_id_header, self.request_id)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


# -- exact JSON spans (to see the bytes a client sent, not a re-serialisation) ---------------------------
_DECODER = json.JSONDecoder()


def _skip(s: str, i: int) -> int:
    """The index of the first non-blank character of `s` from `i`."""
    while i < len(s) and s[i] in " \t\r\n":
        i += 1
    return i


def _spans(s: str, i: int) -> list[tuple[str | None, int, int]]:
    """(key, start, end) of each member of the JSON object starting at s[i], or (None, start, end) of each element of
    the JSON array starting there; none when s[i] starts neither."""
    out: list[tuple[str | None, int, int]] = []
    if i >= len(s) or s[i] not in "{[":
        return out
    close = "}" if s[i] == "{" else "]"
    i = _skip(s, i + 1)
    while i < len(s) and s[i] != close:
        key = None
        if close == "}":
            key, i = _DECODER.raw_decode(s, i)
            i = _skip(s, _skip(s, i) + 1)  # past ':'
        _, end = _DECODER.raw_decode(s, i)
        out.append((key, i, end))
        i = _skip(s, end)
        if i < len(s) and s[i] == ",":
            i = _skip(s, i + 1)
    return out
