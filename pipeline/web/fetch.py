"""Guarded, capped, cached page fetching: every outcome is a FetchResult (failures written for the model), never a
raised exception for anything a remote site or a model-chosen URL can cause.

Policy that callers and tests rely on:
- The first URL and every redirect hop pass guard.check_url; the connection goes to the vetted IP (no second
  name lookup can rebind it) with the real Host header, TLS SNI and certificate check against the real host name.
  Environment proxies are ignored. At most MAX_REDIRECTS redirects are followed; one more is refused as
  `blocked` (a policy limit, like a bad port).
- Byte cap (Settings.fetch_max_bytes): a declared Content-Length over it is `too_large` without reading the body;
  an uncompressed HTML or text body over it is cut at the cap and returned with truncated=True (the article is at
  the top of the page); a PDF or unlabelled body over it is `too_large` (a cut PDF is unreadable); a compressed
  body that inflates past it is `too_large` (a decompression bomb).
- Deadline (Settings.fetch_deadline) covers connect, TLS, every read and write, and all hops together: no socket
  wait may outlast it, so a slow drip gets `timeout`. (The one name lookup is bounded by the system resolver.)
- Types: HTML, XHTML, plain text, PDF; others are `unsupported_type`, and so is a document extract.py cannot
  read (a malformed PDF, a page with no text), as the closest of the fixed kinds.
- Reading: decoding and extraction run in a worker process (workers.py) under a CPU, memory and output budget;
  a page past its budget is `too_large` with a reason that starts "too_slow:" and gives the CPU seconds, or is
  kept from its first bytes, marked truncated.
- Text: BOM, then the header charset, then a <meta> charset, then UTF-8, then detection; labels browsers read as
  Windows code pages (iso-8859-1, ascii, shift_jis, ...) are decoded as those code pages.
- Per Fetcher (one run): successes are cached by normalised URL (original and final), failures are remembered
  and answered `repeat_failure` without traffic or budget. A budget refusal is not remembered.
- Where pages come from is a PageLoader: WebPages (the web under this policy, or the corpus) by default; a replay
  puts a loader serving the recording in its place, below the cache.
"""
from __future__ import annotations

import re
import ssl
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urljoin

import httpcore
import httpx

from pipeline.config import Settings
from pipeline.core.budget import Budget, Phase
from pipeline.core.event_types import FetchEvent
from pipeline.core.events import EventSink, NullSink
from pipeline.core.schema import ErrorKind, FetchResult
from pipeline.core.urls import url_key
from pipeline.web.documents import Document, Kind
from pipeline.web.extract import Extracted, ExtractionError, TooCostly
from pipeline.web.guard import Blocked, Resolver, Vetted, check_url, default_resolver
from pipeline.web.transport import DeadlineBackend, GuardedTransport
from pipeline.web.workers import read_in_worker

MAX_REDIRECTS = 5
Extractor = Callable[[Document], Extracted]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_KINDS: dict[str, Kind] = {"text/html": "html", "application/xhtml+xml": "html", "text/plain": "text",
                           "application/pdf": "pdf", "application/x-pdf": "pdf"}
_UNLABELLED = frozenset({"", "application/octet-stream", "binary/octet-stream"})
_HEADERS = {
    "User-Agent": "Mozilla/5.0 (compatible; VerbatimResearch/0.1)",
    "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,application/pdf;q=0.8,*/*;q=0.1",
    "Accept-Encoding": "gzip, deflate",
    "Accept-Language": "en;q=1.0, *;q=0.5",
    "Connection": "close",
}


@dataclass(frozen=True)
class SavedPage:
    """A page saved earlier (offline corpus): served instead of the network, through the same decoding."""

    url: str
    content_type: str
    body: bytes
    final_url: str
    title: str | None = None  # the corpus manifest's own title/date win over extraction
    published: str | None = None
    status: int = 200  # a saved failure (>= 400) is served as that HTTP status, with no page


class CorpusLike(Protocol):
    """Saved pages by URL; None when the corpus does not hold the URL."""

    def get(self, url: str) -> SavedPage | None: ...


class _Failure(Exception):
    """Ends one load early; turned into a FetchResult inside WebPages.load, never seen by callers."""

    def __init__(self, kind: ErrorKind, reason: str, origin: _Origin | None = None, *, verbatim: bool = False) -> None:
        super().__init__(reason)
        self.kind, self.reason, self.verbatim = kind, " ".join(reason.split()), verbatim
        self.origin = origin or _Origin()

    def result(self, url: str) -> FetchResult:
        o = self.origin
        head = str(o.status) if self.kind == "http_status" and o.status else self.kind
        message = self.reason if self.verbatim else f"FETCH_FAILED: {head} - {self.reason}; choose another source"
        return FetchResult(ok=False, error_kind=self.kind, error=message, url=url, final_url=o.final_url,
                           status=o.status, content_type=o.content_type)


@dataclass
class _Attempt:
    """Whether one load took a `fetches` unit (set as soon as it does, so a failure after it still says so)."""

    charged: bool = False


@dataclass(frozen=True)
class _Origin:
    """Where a failure happened, for the FetchResult: the URL reached, its status and media type."""

    final_url: str | None = None
    status: int | None = None
    content_type: str | None = None


@dataclass(frozen=True)
class _Page:
    final_url: str
    status: int
    media_type: str
    charset: str | None
    kind: Kind
    body: bytes
    truncated: bool = False
    title: str | None = None
    published: str | None = None


@dataclass(frozen=True)
class Loaded:
    """One page load that no cache answered: its result, whether it took a `fetches` unit, and whether it was served
    from a recording (`replayed`) or refused for lack of one (`not_recorded`)."""

    result: FetchResult
    charged: bool
    replayed: bool = False
    not_recorded: bool = False


class PageLoader(Protocol):
    """Loads one page, uncached; every outcome is a FetchResult, never an exception."""

    def load(self, url: str, phase: Phase) -> Loaded: ...


class Fetcher:
    """Fetches pages for one run under the policy in the module docstring; safe to share between threads.

    Pages come from `loader`, by default WebPages built from the arguments here (the guarded web, or the corpus);
    the Fetcher adds the run's cache and remembered failures, and reports every fetch as a FetchEvent.
    """

    def __init__(self, settings: Settings, *, resolve: Resolver = default_resolver,
                 network_backend: httpcore.NetworkBackend | None = None, ssl_context: ssl.SSLContext | None = None,
                 budget: Budget | None = None, events: EventSink | None = None, corpus: CorpusLike | None = None,
                 extract: Extractor = read_in_worker, clock: Callable[[], float] = time.monotonic,
                 loader: PageLoader | None = None) -> None:
        self._loader = loader or WebPages(settings, resolve=resolve, network_backend=network_backend,
                                          ssl_context=ssl_context, budget=budget, corpus=corpus, extract=extract,
                                          clock=clock)
        self._events = events or NullSink()
        self._clock = clock
        self._lock = threading.Lock()
        self._url_locks: dict[str, threading.Lock] = {}
        self._done: dict[str, FetchResult] = {}
        self._failed: dict[str, ErrorKind] = {}

    def fetch(self, url: str, phase: Phase = Phase.RESEARCH) -> FetchResult:
        """The page at `url`, extracted; or ok=False with error_kind and a one-line message for the model."""
        started = self._clock()
        key = url_key(url)
        with self._lock:
            url_lock = self._url_locks.setdefault(key, threading.Lock())
        loaded: Loaded | None = None
        with url_lock:  # a second thread asking for the same URL waits and then reads the cache
            result = self._remembered(key, url)
            if result is None:
                loaded = self._loader.load(url, phase)
                result = loaded.result
                self._remember(key, result)
        self._events.emit(FetchEvent(
            **result.model_dump(), cached=loaded is None, charged=loaded is not None and loaded.charged,
            replayed=loaded is not None and loaded.replayed, not_recorded=loaded is not None and loaded.not_recorded,
        ), ms=(self._clock() - started) * 1000)
        return result

    def _remembered(self, key: str, url: str) -> FetchResult | None:
        with self._lock:
            done, failed = self._done.get(key), self._failed.get(key)
        if done is not None:
            return done.model_copy(update={"url": url})
        if failed is not None:
            return _Failure("repeat_failure", f"this URL already failed in this run ({failed})").result(url)
        return None

    def _remember(self, key: str, result: FetchResult) -> None:
        with self._lock:
            if result.ok:
                self._done[key] = result
                if result.final_url:
                    self._done.setdefault(url_key(result.final_url), result)
            elif result.error_kind != "budget":
                self._failed[key] = result.error_kind or "network"


class WebPages:
    """Loads pages from the web through the guard, or from the offline corpus when there is one; each request made
    takes a `fetches` unit from the budget. Safe to share between threads."""

    def __init__(self, settings: Settings, *, resolve: Resolver = default_resolver,
                 network_backend: httpcore.NetworkBackend | None = None, ssl_context: ssl.SSLContext | None = None,
                 budget: Budget | None = None, corpus: CorpusLike | None = None,
                 extract: Extractor = read_in_worker, clock: Callable[[], float] = time.monotonic) -> None:
        self._settings, self._resolve, self._budget, self._corpus = settings, resolve, budget, corpus
        self._backend = network_backend or httpcore.SyncBackend()
        self._ssl = ssl_context or httpx.create_ssl_context()
        self._extract, self._clock = extract, clock

    def load(self, url: str, phase: Phase) -> Loaded:
        attempt = _Attempt()
        try:
            page = (self._from_corpus(url, phase, attempt) if self._corpus is not None
                    else self._from_web(url, phase, attempt))
            return Loaded(self._extracted(url, page), attempt.charged)
        except _Failure as failure:
            return Loaded(failure.result(url), attempt.charged)

    def _spend(self, phase: Phase, attempt: _Attempt) -> None:
        refusal = self._budget.spend("fetches", phase) if self._budget is not None else None
        if refusal is not None:
            raise _Failure("budget", refusal.message, verbatim=True)
        attempt.charged = True

    def _from_corpus(self, url: str, phase: Phase, attempt: _Attempt) -> _Page:
        assert self._corpus is not None
        saved = self._corpus.get(url)
        if saved is None:
            raise _Failure("blocked", "this run reads only the offline corpus, which does not hold this URL")
        self._spend(phase, attempt)
        media, charset = _content_type(saved.content_type)
        if saved.status >= 400:  # the frozen web holds failures too: a paywall (403), a server error (500)
            raise _Failure("http_status", _status_reason(saved.status), _Origin(saved.final_url, saved.status,
                                                                                media or None))
        return _Page(saved.final_url, 200, media, charset, _kind(media, saved.body, charset=charset), saved.body,
                     title=saved.title, published=saved.published)

    def _from_web(self, url: str, phase: Phase, attempt: _Attempt) -> _Page:
        vetted = check_url(url, self._settings, self._resolve)
        if isinstance(vetted, Blocked):
            raise _Failure(vetted.error_kind, vetted.reason)
        self._spend(phase, attempt)
        backend = DeadlineBackend(self._backend, self._clock() + self._settings.fetch_deadline, self._clock)
        try:
            for hop in range(MAX_REDIRECTS + 1):
                answer = self._request(vetted, backend)
                if isinstance(answer, _Page):
                    return answer
                if hop == MAX_REDIRECTS:
                    raise _Failure("blocked", f"the page redirects more than {MAX_REDIRECTS} times",
                                   _Origin(final_url=vetted.url))
                try:
                    target = urljoin(vetted.url, answer)
                except ValueError as e:  # e.g. a bracket that opens an IPv6 host and never closes
                    raise _Failure("blocked", f"it redirects to a URL that cannot be parsed ({e})",
                                   _Origin(final_url=vetted.url)) from None
                checked = check_url(target, self._settings, self._resolve)
                if isinstance(checked, Blocked):
                    raise _Failure(checked.error_kind, f"it redirects to a refused URL: {checked.reason}",
                                   _Origin(final_url=target))
                vetted = checked
        except (httpx.TimeoutException, httpcore.TimeoutException):
            raise _Failure("timeout", "the site did not deliver the page within "
                                      f"{self._settings.fetch_deadline:g} s") from None
        except httpx.RemoteProtocolError as e:
            if "location header" in str(e).lower():  # httpx could not parse where the redirect points
                raise _Failure("blocked", "it redirects to a URL that cannot be parsed (its Location header is "
                                          "malformed)", _Origin(final_url=vetted.url)) from None
            raise _Failure("network", f"the connection failed ({type(e).__name__})") from None
        except (httpx.HTTPError, httpx.InvalidURL, httpcore.NetworkError, httpcore.ProtocolError,
                httpcore.UnsupportedProtocol, ssl.SSLError) as e:
            raise _Failure("network", f"the connection failed ({type(e).__name__})") from None
        raise AssertionError("unreachable: the redirect loop returns or raises")

    def _request(self, vetted: Vetted, backend: DeadlineBackend) -> _Page | str:
        """One request: a finished _Page, or the Location of a redirect."""
        limit = min(10.0, self._settings.fetch_deadline)
        extensions = {"sni_hostname": vetted.host} if vetted.scheme == "https" else {}
        with httpx.Client(transport=GuardedTransport(backend, self._ssl), trust_env=False,
                          follow_redirects=False, timeout=httpx.Timeout(limit, connect=min(5.0, limit))) as client:
            request = client.build_request("GET", vetted.connect_url, headers={**_HEADERS, "Host": vetted.host_header},
                                           extensions=extensions)
            response = client.send(request, stream=True)
            try:
                media, charset = _content_type(response.headers.get("content-type", ""))
                status = response.status_code
                if status in _REDIRECTS and response.headers.get("location", "").strip():
                    return response.headers["location"].strip()
                if not 200 <= status < 300:
                    raise _Failure("http_status", _status_reason(status), _Origin(vetted.url, status, media or None))
                return self._read(response, vetted.url, media, charset, backend)
            finally:
                response.close()

    def _read(self, response: httpx.Response, final_url: str, media: str, charset: str | None,
              backend: DeadlineBackend) -> _Page:
        cap = self._settings.fetch_max_bytes
        origin = _Origin(final_url, response.status_code, media or None)
        if media not in _KINDS and media not in _UNLABELLED:
            raise _Failure("unsupported_type", f"the page is {media}, not HTML, text or PDF", origin)
        declared = response.headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > cap:
            raise _Failure("too_large", f"the page is {int(declared):,} bytes; the limit is {cap:,}", origin)
        inflater = _Inflater(response.headers.get("content-encoding", ""), origin)
        may_cut = _KINDS.get(media) in ("html", "text")
        body, raw, truncated = bytearray(), 0, False
        for chunk in response.iter_raw():
            backend.check()  # also bounds a server that streams fast but forever within each read timeout
            raw += len(chunk)
            piece = inflater.feed(chunk, cap - len(body))
            if len(body) + len(piece) > cap or raw > cap:
                if inflater.compressed or not may_cut:
                    raise _Failure("too_large", f"the page is larger than the {cap:,}-byte limit", origin)
                body += piece[: cap - len(body)]
                truncated = True
                break
            body += piece
        data = bytes(body)
        kind = _kind(media, data, origin, charset=charset)
        return _Page(final_url, response.status_code, media, charset, kind, data, truncated)

    def _extracted(self, url: str, page: _Page) -> FetchResult:
        doc = Document(kind=page.kind, body=page.body, url=page.final_url, charset=page.charset,
                       truncated=page.truncated)
        origin = _Origin(page.final_url, page.status, page.media_type)
        try:
            extracted = self._extract(doc)  # decoded and read in a worker process, under its budgets
        except TooCostly as e:
            raise _Failure("too_large", str(e), origin) from None  # "too_slow: ... 8 s of CPU"
        except ExtractionError as e:
            raise _Failure("unsupported_type", f"the {page.kind.upper()} could not be read: {e}", origin) from None
        return FetchResult(ok=True, url=url, final_url=page.final_url, status=page.status,
                           content_type=page.media_type, title=page.title or extracted.title,
                           text=extracted.text, published=page.published or extracted.published,
                           truncated=page.truncated or extracted.truncated, bytes=len(page.body))


def failed(url: str, kind: ErrorKind, reason: str) -> FetchResult:
    """A failed fetch of `url`, worded for the model like every other fetch failure."""
    return _Failure(kind, reason).result(url)


def _content_type(header: str) -> tuple[str, str | None]:
    media, _, params = header.partition(";")
    charset = re.search(r"charset\s*=\s*[\"']?([^\"';\s]+)", params, re.I)
    return media.strip().lower(), charset.group(1) if charset else None


def _kind(media: str, body: bytes, origin: _Origin | None = None, *, charset: str | None = None) -> Kind:
    """The document kind from the media type, or sniffed from the bytes when the type says nothing.

    Two sniffs override the label, because a wrong label would put junk where quotes are checked: a body that
    starts with the PDF signature is read as a PDF (its source is no page text), and a body labelled as text that
    holds binary bytes (a NUL, or more than 5% of WHATWG's "binary data bytes", in its first 1,445 bytes, unless
    it is UTF-16 or UTF-32, where NULs are text) is refused; a stray vertical tab or DOS end-of-file byte is not.
    """
    head = body[:1024].lstrip().lower()
    if head.startswith(b"%pdf-"):
        return "pdf"
    if media in _KINDS:
        kind = _KINDS[media]
        if kind != "pdf" and _is_binary(body[:1445], charset):
            raise _Failure("unsupported_type", f"the page is labelled {media} but holds binary data, not text",
                           origin)
        return kind
    if head.startswith((b"<!doctype html", b"<html")) or b"<html" in head:
        return "html"
    raise _Failure("unsupported_type", f"the page is {media or 'unlabelled'} and not recognisably HTML or PDF",
                   origin)


_BINARY = re.compile(rb"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")
_WIDE_BOMS = (b"\xff\xfe", b"\xfe\xff")  # UTF-16 (and UTF-32 LE starts the same)


def _is_binary(head: bytes, charset: str | None) -> bool:
    if head.startswith(_WIDE_BOMS) or (charset or "").lower().replace("_", "-").startswith(("utf-16", "utf-32")):
        return False
    return b"\x00" in head or len(_BINARY.findall(head)) > 0.05 * max(1, len(head))


def _status_reason(status: int) -> str:
    if status in (401, 403):
        return "the site refused access"
    if status in (404, 410):
        return "the page does not exist"
    if status == 429:
        return "the site is limiting requests"
    if status >= 500:
        return "the site had a server error"
    return f"the site answered HTTP {status} without a page"


class _Inflater:
    """Content-Encoding decoding that never produces more than asked for, so a bomb stops at the cap."""

    def __init__(self, encoding: str, origin: _Origin) -> None:
        encoding = encoding.strip().lower()
        self.compressed = encoding not in ("", "identity")
        if encoding in ("gzip", "x-gzip"):
            self._z: zlib._Decompress | None = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._z = zlib.decompressobj(zlib.MAX_WBITS)
        elif not self.compressed:
            self._z = None
        else:
            raise _Failure("unsupported_type", f"the page uses content encoding {encoding[:40]}", origin)
        self._raw_deflate_tried = encoding != "deflate"
        self._origin = origin

    def feed(self, data: bytes, room: int) -> bytes:
        """Decode `data`, returning at most room + 1 bytes (one more than fits means: over the cap)."""
        if self._z is None:
            return data
        try:
            return self._z.decompress(data, max(room, 0) + 1)
        except zlib.error:
            if not self._raw_deflate_tried:  # some servers send "deflate" without the zlib wrapper
                self._raw_deflate_tried = True
                self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                return self.feed(data, room)
            raise _Failure("network", "the compressed page is corrupt", self._origin) from None
