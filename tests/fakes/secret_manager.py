"""A local stand-in for Secret Manager's REST `:access` endpoint, for the real google-cloud-secret-manager client.

    with FakeSecretManager({"projects/p/secrets/code/versions/latest": b"s3cret"}) as sm:
        client = make_client(sm.base_url)          # REST transport, anonymous credentials
        sm.fail_with = 500                         # every request answers HTTP 500 from now on

Answers `GET /v1/{name}:access` like the real API: `{"name", "payload": {"data": base64, "dataCrc32c": "<int64>"}}`,
404 NOT_FOUND for unknown secrets. `corrupt` flips the checksum; `omit_checksum` leaves it out. Requests are recorded.
"""
from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from ui.access import crc32c

_STATUS = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED",
           500: "INTERNAL", 503: "UNAVAILABLE"}


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    authorization: str | None


class FakeSecretManager:
    """Secret versions by full name; thread-safe counters; start/stop or use as a context manager."""

    def __init__(self, secrets: dict[str, bytes] | None = None):
        self.secrets = dict(secrets or {})
        self.fail_with: int | None = None
        self.corrupt = False
        self.omit_checksum = False
        self._lock = threading.Lock()
        self._seen: list[Seen] = []
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start the fake first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def requests(self) -> list[Seen]:
        with self._lock:
            return list(self._seen)

    def __enter__(self) -> FakeSecretManager:
        owner = self

        class Handler(_Handler):
            fake = owner

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def answer(self, method: str, path: str, auth: str | None) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self._seen.append(Seen(method, path, auth))
        if self.fail_with is not None:
            return self.fail_with, _error(self.fail_with, "the fake was told to fail")
        if method != "GET" or not path.startswith("/v1/") or not path.endswith(":access"):
            return 404, _error(404, f"no such method: {method} {path}")
        name = path[len("/v1/"):-len(":access")]
        data = self.secrets.get(name)
        if data is None:
            return 404, _error(404, f"Secret [{name}] not found or has no versions.")
        checksum = crc32c(data) ^ (1 if self.corrupt else 0)
        payload: dict[str, Any] = {"data": base64.b64encode(data).decode("ascii")}
        if not self.omit_checksum:
            payload["dataCrc32c"] = str(checksum)
        return 200, {"name": name.replace("/latest", "/1"), "payload": payload}


def _error(status: int, message: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": _STATUS.get(status, "UNKNOWN")}}


class _Handler(BaseHTTPRequestHandler):
    fake: FakeSecretManager

    def log_message(self, format: str, *args: object) -> None:
        return None

    def _serve(self) -> None:
        path = unquote(urlsplit(self.path).path)
        status, body = self.fake.answer(self.command, path, self.headers.get("Authorization"))
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = _serve
    do_POST = _serve
