"""What every search provider shares: the interface, the failure the model is told about, retried JSON requests.

Retry policy (3 tries in all): 5xx, timeouts and connection errors back off exponentially (1 s, 2 s); 429 waits
the server's Retry-After (seconds or HTTP date), or the backoff when absent, and fails at once when the server asks
for longer than `max_retry_after`. Other 4xx are not retried: they will not change on a second try (401/403 say
to check the key). A 2xx whose body is not the documented JSON shape is not retried either: it means a wrong base
URL, an interposed proxy page or an API change, none of which a retry fixes, and each retry costs quota.
"""
from __future__ import annotations

import html
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal, Protocol

import httpx
from pydantic import BaseModel, ValidationError

from pipeline.core.schema import SearchResult

Sleep = Callable[[float], None]
_TAG = re.compile(r"<[^>]{0,500}>")
_SPACE = re.compile(r"\s+")


class SearchFailed(Exception):
    """A search could not be done; str() is a one-line message written for the model (never a key)."""


class SearchProvider(Protocol):
    """One search backend: up to `n` results, optionally only pages from the last `recency_days` days."""

    name: str

    def search(self, query: str, n: int = 10, recency_days: int | None = None) -> list[SearchResult]: ...


@dataclass(frozen=True)
class RetryPolicy:
    tries: int = 3
    base_delay: float = 1.0
    max_retry_after: float = 30.0


def default_http_client(timeout: float = 15.0) -> httpx.Client:
    """The client providers use in production: no proxy or netrc from the environment, bounded waits."""
    return httpx.Client(trust_env=False, timeout=httpx.Timeout(timeout, connect=5.0), follow_redirects=False)


def plain(text: object) -> str:
    """Provider markup (Brave wraps matches in <strong>) and entities removed, whitespace collapsed."""
    return _SPACE.sub(" ", html.unescape(_TAG.sub("", str(text or "")))).strip()


def iso_date(value: object) -> str | None:
    """YYYY-MM-DD for ISO-8601, RFC 2822 and "Month D, YYYY" dates; other non-empty text (e.g. "2 days ago") as is."""
    text = str(value or "").strip()
    if not text:
        return None
    parsers: list[Callable[[str], datetime]] = [
        lambda s: datetime.fromisoformat(s.replace("Z", "+00:00")),
        parsedate_to_datetime,
        lambda s: datetime.strptime(s, "%B %d, %Y"),
        lambda s: datetime.strptime(s, "%b %d, %Y"),
    ]
    for parse in parsers:
        try:
            return parse(text).date().isoformat()
        except (ValueError, TypeError, IndexError):
            continue
    return text


def recency_bucket(days: int | None) -> Literal["day", "week", "month", "year"] | None:
    """The narrowest provider time window that still includes every page from the last `days` days."""
    if days is None or days <= 0:
        return None
    for limit, bucket in ((1, "day"), (7, "week"), (31, "month"), (365, "year")):
        if days <= limit:
            return bucket  # type: ignore[return-value]
    return None


def days_ago(days: int, today: Callable[[], date]) -> date:
    return date.fromordinal(today().toordinal() - days)


def _retry_after(response: httpx.Response, clock: Callable[[], float]) -> float | None:
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - clock())
    except (TypeError, ValueError, IndexError):
        return None


class JsonApi:
    """One remote JSON API called with retries; every failure becomes a SearchFailed worded for the model."""

    def __init__(self, name: str, base_url: str, http: httpx.Client, *, headers: dict[str, str] | None = None,
                 auth_fix: str = "check the service's access settings", sleep: Sleep = time.sleep,
                 policy: RetryPolicy = RetryPolicy(), clock: Callable[[], float] = time.time):
        self.name = name
        self.base_url = base_url.rstrip("/")
        self._http = http
        self._headers = {"Accept": "application/json", **(headers or {})}
        self._auth_fix = auth_fix
        self._sleep = sleep
        self._policy = policy
        self._clock = clock
        self._secrets = [v.split()[-1] for k, v in self._headers.items() if k.lower() != "accept" and v]

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        return text

    def _refused(self, response: httpx.Response) -> SearchFailed:
        status = response.status_code
        if status in (401, 403):
            return SearchFailed(f"SEARCH_FAILED: {self.name} refused the request (HTTP {status}); {self._auth_fix}.")
        excerpt = self._scrub(plain(response.text)[:160])
        return SearchFailed(f"SEARCH_FAILED: {self.name} rejected the request (HTTP {status}: {excerpt}); "
                            "rephrase the query or use what you have.")

    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                json: dict[str, Any] | None = None) -> Any:
        """The decoded JSON body of a 2xx answer, after up to `policy.tries` attempts."""
        url = f"{self.base_url}{path}"
        problem = "no answer"
        for attempt in range(1, self._policy.tries + 1):
            delay = self._policy.base_delay * 2 ** (attempt - 1)
            try:
                response = self._http.request(method, url, params=params, json=json, headers=self._headers)
            except httpx.TimeoutException:
                problem = "timed out"
            except httpx.TransportError as e:
                problem = f"connection failed: {type(e).__name__}"
            else:
                status = response.status_code
                if 200 <= status < 300:
                    try:
                        return response.json()
                    except ValueError:
                        raise SearchFailed(f"SEARCH_FAILED: {self.name} answered with a body that is not JSON; "
                                           "the search service or its base URL is misconfigured.") from None
                if status == 429:
                    wait = _retry_after(response, self._clock)
                    if wait is not None and wait > self._policy.max_retry_after:
                        raise SearchFailed(f"SEARCH_FAILED: {self.name} is rate-limiting us for {wait:.0f} s; "
                                           "search later or use what you have.")
                    delay = delay if wait is None else wait
                    problem = "HTTP 429 rate-limited"
                elif status >= 500:
                    problem = f"HTTP {status}"
                else:
                    raise self._refused(response)
            if attempt < self._policy.tries:
                self._sleep(delay)
        raise SearchFailed(f"SEARCH_FAILED: the search service is unavailable ({problem} after "
                           f"{self._policy.tries} tries); try again later or use what you have.")


def validated(model: type[BaseModel], body: Any, provider: str) -> Any:
    """`body` parsed into the provider's documented response model, or SearchFailed naming the mismatch."""
    try:
        return model.model_validate(body)
    except ValidationError as e:
        where = ".".join(str(p) for p in e.errors()[0]["loc"]) or "top level"
        raise SearchFailed(f"SEARCH_FAILED: {provider} answered in an unexpected shape (at {where}); "
                           "the search service or its base URL is misconfigured: check RESEARCH_SEARCH_BASE_URL "
                           "(or RESEARCH_SEARXNG_URL).") from None
