"""The HTTP transport under guarded fetching: one unpooled connection whose every socket wait ends by a deadline."""
from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterator

import httpcore
import httpx


class DeadlineBackend(httpcore.NetworkBackend):
    """Clamps every connect, TLS handshake, read and write to the time left before one fetch's deadline."""

    def __init__(self, inner: httpcore.NetworkBackend, deadline: float, clock: Callable[[], float]) -> None:
        self._inner, self._deadline, self._clock = inner, deadline, clock

    def check(self, timeout: float | None = None, error: type[Exception] = httpcore.ReadTimeout) -> float:
        """Seconds a wait may take now; raises `error` once the deadline has passed."""
        remaining = self._deadline - self._clock()
        if remaining <= 0:
            raise error("the fetch deadline passed")
        return remaining if timeout is None else min(timeout, remaining)

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: object = None) -> httpcore.NetworkStream:
        wait = self.check(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_tcp(host, port, wait, local_address, socket_options), self)  # type: ignore[arg-type]

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream, backend: DeadlineBackend) -> None:
        self._stream, self._backend = stream, backend

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, self._backend.check(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, self._backend.check(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        wait = self._backend.check(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, wait), self._backend)

    def get_extra_info(self, info: str) -> object:
        return self._stream.get_extra_info(info)


class GuardedTransport(httpx.BaseTransport):
    """httpx over one unpooled connection on the deadline backend; pooling could reuse a TLS session that was
    verified for another host name on the same IP."""

    def __init__(self, backend: DeadlineBackend, ssl_context: ssl.SSLContext) -> None:
        self._pool = httpcore.ConnectionPool(ssl_context=ssl_context, max_connections=1, max_keepalive_connections=0,
                                             retries=0, network_backend=backend)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = httpcore.URL(scheme=request.url.raw_scheme, host=request.url.raw_host, port=request.url.port,
                           target=request.url.raw_path)
        core = httpcore.Request(request.method, url, headers=request.headers.raw, content=request.stream,
                                extensions=request.extensions)
        response = self._pool.handle_request(core)
        return httpx.Response(response.status, headers=response.headers, stream=_CoreStream(response),
                              extensions=response.extensions)

    def close(self) -> None:
        self._pool.close()


class _CoreStream(httpx.SyncByteStream):
    def __init__(self, response: httpcore.Response) -> None:
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        yield from self._response.iter_stream()

    def close(self) -> None:
        self._response.close()
