"""A real HTTP(S) server on 127.0.0.1 for tests: paths map to canned Routes (pages, statuses, redirects, slow drips,
streamed bodies, gzip bombs) and every request is recorded, so a test can also prove a server got NO traffic.

    with WebServer({"/": Route.html("<p>hi</p>")}) as server:
        fetch(server.url("/"))
        assert server.count("/") == 1

Each response closes its connection, so one request is one connection. Unknown paths answer 404.
"""
from __future__ import annotations

import socket
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

BodyStream = Callable[[], Iterable[bytes]]


@dataclass(frozen=True)
class Route:
    """One canned response. `stream` (when set) replaces `body` and is sent without Content-Length, ending at
    connection close; `drip` > 0 sends the body (and with `drip_head` the status line and headers too) one byte at a
    time with that many seconds between bytes."""

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    stream: BodyStream | None = None
    drip: float = 0.0
    drip_head: bool = False

    @classmethod
    def html(cls, html: str | bytes, *, charset: str | None = "utf-8", status: int = 200,
             headers: Mapping[str, str] | None = None) -> Route:
        """An HTML page; str is encoded with `charset`; charset None sends bare `text/html` (no charset parameter)."""
        body = html if isinstance(html, bytes) else html.encode(charset or "utf-8")
        content_type = f"text/html; charset={charset}" if charset else "text/html"
        return cls(status=status, headers={"Content-Type": content_type, **(headers or {})}, body=body)

    @classmethod
    def content(cls, body: bytes, content_type: str, *, status: int = 200,
                headers: Mapping[str, str] | None = None) -> Route:
        """Any body with the given Content-Type."""
        return cls(status=status, headers={"Content-Type": content_type, **(headers or {})}, body=body)

    @classmethod
    def redirect(cls, location: str, status: int = 302) -> Route:
        """A redirect (301, 302, 303, 307 or 308) to `location`, absolute or relative."""
        return cls(status=status, headers={"Location": location, "Content-Type": "text/html"}, body=b"moved")

    @classmethod
    def streamed(cls, chunks: BodyStream, content_type: str = "text/html",
                 headers: Mapping[str, str] | None = None) -> Route:
        """A body produced lazily by `chunks()`, sent without Content-Length."""
        return cls(headers={"Content-Type": content_type, **(headers or {})}, stream=chunks)

    @classmethod
    def gzip_bomb(cls, inflated_bytes: int, content_type: str = "text/html") -> Route:
        """`Content-Encoding: gzip` whose body inflates to `inflated_bytes` zeros, compressed lazily as it is read."""
        return cls.streamed(lambda: _gzip_zeros(inflated_bytes), content_type, {"Content-Encoding": "gzip"})


@dataclass(frozen=True)
class Recorded:
    """One request as the server saw it; `target` is the request-target (absolute when sent to a proxy)."""

    method: str
    target: str
    headers: dict[str, str]

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]


class WebServer:
    """Serves `routes` on 127.0.0.1 (port chosen by the OS) in a background thread; HTTPS when `tls` is given."""

    def __init__(self, routes: Mapping[str, Route] | None = None, *, tls: ssl.SSLContext | None = None) -> None:
        self.routes: dict[str, Route] = dict(routes or {})
        self.sni_names: list[str | None] = []
        self._requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._tls = tls
        if tls is not None:
            tls.sni_callback = self._on_sni
        self._server = _Server(("127.0.0.1", 0), _Handler, self)
        self.port: int = self._server.server_address[1]
        # A short poll interval makes stop() quick; the default 0.5 s would add that much to every test.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True, name=f"web-{self.port}")

    @property
    def host_port(self) -> str:
        """`127.0.0.1:PORT`, the form RESEARCH_FETCH_ALLOW takes."""
        return f"127.0.0.1:{self.port}"

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        """An absolute URL for `path` on this server, optionally under another host name that resolves here."""
        return f"{'https' if self._tls else 'http'}://{host}:{self.port}{path}"

    def route(self, path: str, route: Route) -> None:
        """Add or replace the response for `path` (an exact path, or path plus query)."""
        with self._lock:
            self.routes[path] = route

    def reset(self, routes: Mapping[str, Route] | None = None) -> None:
        """Serve only `routes` from now on and forget the requests recorded (a fixture reusing one server)."""
        with self._lock:
            self.routes = dict(routes or {})
            self._requests.clear()

    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self._requests)

    def count(self, path: str | None = None) -> int:
        """How many requests arrived, in all or for one path (query ignored)."""
        return sum(1 for r in self.requests if path is None or r.path == path)

    def start(self) -> WebServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> WebServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _record(self, request: Recorded) -> Route:
        with self._lock:
            self._requests.append(request)
            return self.routes.get(request.target) or self.routes.get(request.path) or _NOT_FOUND

    def _on_sni(self, sock: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> None:
        with self._lock:
            self.sni_names.append(name)


_NOT_FOUND = Route(status=404, headers={"Content-Type": "text/plain"}, body=b"not found")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], owner: WebServer) -> None:
        self.owner = owner
        super().__init__(address, handler)

    def get_request(self) -> tuple[socket.socket, object]:
        sock, addr = super().get_request()
        if self.owner._tls is not None:
            # The handshake runs in the handler thread, so a stalled client cannot block accept().
            sock = self.owner._tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    # Each response goes out in several writes (head, then body); without this, Nagle's algorithm holds the body
    # back until the client's delayed ACK of the head, about 40 ms per response. The bytes are the same.
    disable_nagle_algorithm = True

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(5)
            self.request.do_handshake()
        super().setup()

    def handle(self) -> None:
        try:
            super().handle()
        except (OSError, ssl.SSLError):
            pass  # the client hung up or failed the handshake: exactly what several tests provoke

    def log_message(self, format: str, *args: object) -> None:
        return None

    def _serve(self) -> None:
        owner = self.server.owner
        route = owner._record(Recorded(self.command, self.path, dict(self.headers.items())))
        self.close_connection = True
        headers = dict(route.headers)
        if route.stream is None and not any(k.lower() == "content-length" for k in headers):
            headers["Content-Length"] = str(len(route.body))
        headers["Connection"] = "close"
        reason = HTTPStatus(route.status).phrase if route.status in HTTPStatus._value2member_map_ else "Status"
        head = f"HTTP/1.1 {route.status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        head_bytes = (head + "\r\n").encode("latin-1")
        body: Iterable[bytes] = [] if self.command == "HEAD" else (
            route.stream() if route.stream is not None else [route.body])
        self._write(head_bytes, route.drip if route.drip_head else 0.0)
        for chunk in body:
            if owner._stopping.is_set():
                return
            self._write(chunk, route.drip)

    def _write(self, data: bytes, drip: float) -> None:
        if drip <= 0:
            self.wfile.write(data)
            self.wfile.flush()
            return
        for i in range(len(data)):
            if self.server.owner._stopping.is_set():
                raise ConnectionAbortedError("server stopping")
            self.wfile.write(data[i:i + 1])
            self.wfile.flush()
            time.sleep(drip)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_CONNECT = _serve


def _gzip_zeros(total: int, block: int = 1 << 20) -> Iterator[bytes]:
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(block)
    sent = 0
    while sent < total:
        n = min(block, total - sent)
        out = z.compress(zeros[:n])
        sent += n
        if out:
            yield out
    yield z.flush()
