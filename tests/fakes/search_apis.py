"""Local fake servers speaking the documented JSON of Brave Search, Tavily and SearXNG, with fault injection.

    hits = [Hit("Title", "https://example.org/a", "A <strong>snippet</strong>", "2024-01-15T10:00:00")]
    with FakeSearchApi("brave", hits, api_key="k") as api:
        api.fail_next(Canned.server_error(500), Canned.rate_limited(retry_after="2"))
        provider = BraveSearch("k", httpx.Client(), base_url=api.base_url, sleep=recorder)
        ...
        assert api.requests[-1].headers["x-subscription-token"] == "k"

Each request first takes the next queued fault, if any, else the standing one (`fail_always`, an outage); otherwise
it is answered in the provider's documented shape from `hits` (honouring Brave `count` and Tavily `max_results`;
SearXNG has no count and returns all).
A wrong or missing key answers 401 in the provider's error shape. Every request is recorded (method, path,
query parameters, lower-cased headers, JSON body). Runs on 127.0.0.1, port chosen by the OS.

Shapes (the fields our parsers read, plus a few they must ignore):
  brave    GET  /res/v1/web/search  -> {"type": "search", "query": {...}, "web": {"type": "search", "results":
                [{"type": "search_result", "title", "url", "description", "page_age", "age", "meta_url"}]}}
                ("web" is absent when nothing matched)
  tavily   POST /search            -> {"query", "answer": null, "images": [], "results": [{"title", "url", "content",
                "score", "raw_content": null, "published_date"?}], "response_time"}
  searxng  GET  /search?format=json -> {"query", "number_of_results", "results": [{"url", "title", "content",
                "engine", "publishedDate", "score", "category"}], "answers": [], "suggestions": [], ...}
"""
from __future__ import annotations

import json
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

Kind = Literal["brave", "tavily", "searxng"]
PATHS: dict[Kind, tuple[str, str]] = {"brave": ("GET", "/res/v1/web/search"), "tavily": ("POST", "/search"),
                                      "searxng": ("GET", "/search")}


@dataclass(frozen=True)
class Hit:
    """One search result to serve; `published` goes to page_age / published_date / publishedDate."""

    title: str
    url: str
    snippet: str = ""
    published: str | None = None


@dataclass(frozen=True)
class Canned:
    """A fault to inject: a status with body and headers, a dropped connection (`reset`), or a stall (`delay`)."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    reset: bool = False
    delay: float = 0.0
    zero: bool = False

    @classmethod
    def server_error(cls, status: int = 500) -> Canned:
        return cls(status=status, body=b'{"error": "internal"}', headers={"Content-Type": "application/json"})

    @classmethod
    def rate_limited(cls, retry_after: str | None = "1") -> Canned:
        headers = {"Content-Type": "application/json", **({"Retry-After": retry_after} if retry_after else {})}
        return cls(status=429, body=b'{"error": "rate limited"}', headers=headers)

    @classmethod
    def malformed(cls) -> Canned:
        """200 with a body that is not JSON (e.g. a captive portal or proxy page)."""
        return cls(status=200, body=b"<html><body>Service temporarily moved</body></html>",
                   headers={"Content-Type": "text/html"})

    @classmethod
    def wrong_shape(cls) -> Canned:
        """200 with JSON that is not the documented shape."""
        return cls(status=200, body=b'{"results": "none", "web": {"results": 7}}',
                   headers={"Content-Type": "application/json"})

    @classmethod
    def zero_results(cls) -> Canned:
        """The provider's documented answer for a query with no matches."""
        return cls(zero=True)

    @classmethod
    def connection_reset(cls) -> Canned:
        return cls(reset=True)

    @classmethod
    def stall(cls, seconds: float) -> Canned:
        """Answer (with the normal results) only after `seconds`, to trip a client timeout."""
        return cls(delay=seconds)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    json: Any = None


class FakeSearchApi:
    """A fake Brave, Tavily or SearXNG API on 127.0.0.1, serving `hits` unless a fault is queued."""

    def __init__(self, kind: Kind, hits: list[Hit] | None = None, *, api_key: str | None = None) -> None:
        self.kind = kind
        self.hits = list(hits or [])
        self.api_key = api_key
        self._faults: list[Canned] = []
        self._standing: Canned | None = None  # fail_always
        self._requests: list[Request] = []
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler, self)
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True, name=f"{kind}-{self.port}")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fail_next(self, *faults: Canned) -> None:
        """Queue faults, answered in order by the next requests."""
        with self._lock:
            self._faults.extend(faults)

    def fail_always(self, fault: Canned | None) -> None:
        """Answer every request with `fault` (once the queued ones are used up) until called with None: an outage."""
        with self._lock:
            self._standing = fault

    def reset(self, hits: list[Hit] | None = None) -> None:
        """Forget recorded requests and every fault, queued or standing; serve `hits` when given (a fixture that
        reuses one server between tests)."""
        with self._lock:
            self._requests.clear()
            self._faults.clear()
            self._standing = None
            if hits is not None:
                self.hits = list(hits)

    @property
    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._requests)

    def start(self) -> FakeSearchApi:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeSearchApi:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _take(self, request: Request) -> Canned | None:
        with self._lock:
            self._requests.append(request)
            return self._faults.pop(0) if self._faults else self._standing

    def authorised(self, headers: dict[str, str]) -> bool:
        if self.api_key is None:
            return True
        if self.kind == "brave":
            return headers.get("x-subscription-token") == self.api_key
        return headers.get("authorization") == f"Bearer {self.api_key}"

    def answer(self, request: Request, zero: bool = False) -> tuple[int, dict[str, Any]]:
        """Status and body in this provider's documented shape."""
        if not self.authorised(request.headers):
            if self.kind == "brave":
                return 401, {"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID",
                                                                "detail": "The provided subscription token is invalid.",
                                                                "status": 401}}
            return 401, {"detail": {"error": "Unauthorized: missing or invalid API key."}}
        hits = [] if zero else self.hits
        query = request.params.get("q") or (request.json or {}).get("query", "")
        if self.kind == "brave":
            hits = hits[: int(request.params.get("count", 20))]
            body: dict[str, Any] = {"type": "search", "query": {"original": query, "more_results_available": False}}
            if hits:
                body["web"] = {"type": "search", "family_friendly": True, "results": [
                    {"type": "search_result", "title": h.title, "url": h.url, "description": h.snippet,
                     "page_age": h.published, "age": "November 18, 2019" if h.published else None,
                     "language": "en", "meta_url": {"scheme": "https", "hostname": urlsplit(h.url).hostname}}
                    for h in hits]}
            return 200, body
        if self.kind == "tavily":
            hits = hits[: int((request.json or {}).get("max_results", 5))]
            results: list[dict[str, Any]] = [
                {"title": h.title, "url": h.url, "content": h.snippet, "score": 0.9 - i / 100, "raw_content": None,
                 **({"published_date": h.published} if h.published else {})}
                for i, h in enumerate(hits)]
            return 200, {"query": query, "follow_up_questions": None, "answer": None, "images": [],
                         "results": results, "response_time": 0.42, "request_id": "fake-1"}
        results = [{"url": h.url, "title": h.title, "content": h.snippet, "engine": "duckduckgo",
                    "engines": ["duckduckgo"], "positions": [i + 1], "publishedDate": h.published, "score": 1.0,
                    "category": "general", "template": "default.html", "parsed_url": list(urlsplit(h.url))}
                   for i, h in enumerate(hits)]
        return 200, {"query": query, "number_of_results": len(results), "results": results, "answers": [],
                     "corrections": [], "infoboxes": [], "suggestions": [], "unresponsive_engines": []}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], owner: FakeSearchApi):
        self.owner = owner
        super().__init__(address, handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    # Each response goes out in several writes (head, then body); without this, Nagle's algorithm holds the body
    # back until the client's delayed ACK of the head, about 40 ms per response. The bytes are the same.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: object) -> None:
        return None

    def _serve(self) -> None:
        owner = self.server.owner
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            payload = json.loads(raw) if raw else None
        except ValueError:
            payload = None
        request = Request(self.command, split.path, {k: v[0] for k, v in parse_qs(split.query).items()},
                          {k.lower(): v for k, v in self.headers.items()}, payload)
        fault = owner._take(request)
        self.close_connection = True
        if fault is not None and fault.reset:
            # SO_LINGER 0: close() sends RST, which the client sees as a connection reset.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            return
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
        if fault is not None and not fault.delay and not fault.zero:
            self._send(fault.status, fault.body, fault.headers)
            return
        method, path = PATHS[owner.kind]
        if (self.command, split.path) != (method, path):
            self._send(404, b'{"error": "not found"}', {"Content-Type": "application/json"})
            return
        status, body = owner.answer(request, zero=fault is not None and fault.zero)
        self._send(status, json.dumps(body).encode(), {"Content-Type": "application/json"})

    def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        try:
            self.send_response(status)
            for key, value in {**headers, "Content-Length": str(len(body)), "Connection": "close"}.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass  # the client gave up (a timeout test)

    do_GET = do_POST = _serve
