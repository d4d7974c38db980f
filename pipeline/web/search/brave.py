"""Brave Search API (web search): GET {base}/res/v1/web/search, key in the X-Subscription-Token header.

Documented response used here: {"web": {"results": [{"title", "url", "description", "page_age", "age"}]}};
"web" is absent when nothing matched. Recency maps to `freshness`: pd, pw, pm, py, or a
"YYYY-MM-DDtoYYYY-MM-DD" range beyond a year.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from datetime import date
from typing import Literal

import httpx
from pydantic import BaseModel, ConfigDict

from pipeline.core.schema import SearchResult
from pipeline.web.search.base import JsonApi, Sleep, days_ago, iso_date, plain, recency_bucket, validated

DEFAULT_BASE_URL = "https://api.search.brave.com"
MAX_COUNT = 20
_FRESHNESS = {"day": "pd", "week": "pw", "month": "pm", "year": "py"}


class _Result(BaseModel):
    model_config = ConfigDict(extra="ignore")
    title: str = ""
    url: str = ""
    description: str = ""
    page_age: str | None = None
    age: str | None = None


class _Web(BaseModel):
    model_config = ConfigDict(extra="ignore")
    results: list[_Result] = []


class _Response(BaseModel):
    model_config = ConfigDict(extra="ignore")
    # Every web search answer says so; without it the JSON came from another service (a wrong base URL), whose
    # answer would otherwise read as "no results".
    type: Literal["search"]
    web: _Web | None = None


def freshness(recency_days: int | None, today: Callable[[], date] = date.today) -> str | None:
    """Brave's `freshness` value covering the last `recency_days` days."""
    if recency_days is None or recency_days <= 0:
        return None
    bucket = recency_bucket(recency_days)
    if bucket:
        return _FRESHNESS[bucket]
    return f"{days_ago(recency_days, today).isoformat()}to{today().isoformat()}"


class BraveSearch:
    """Brave web search behind the SearchProvider interface."""

    name = "brave"

    def __init__(self, api_key: str, http: httpx.Client, *, base_url: str | None = None, sleep: Sleep = time.sleep,
                 today: Callable[[], date] = date.today):
        self._api = JsonApi("Brave Search", base_url or DEFAULT_BASE_URL, http, sleep=sleep,
                            auth_fix="check BRAVE_API_KEY", headers={"X-Subscription-Token": api_key})
        self._today = today

    def search(self, query: str, n: int = 10, recency_days: int | None = None) -> list[SearchResult]:
        params: dict[str, str | int] = {"q": query, "count": max(1, min(n, MAX_COUNT))}
        fresh = freshness(recency_days, self._today)
        if fresh:
            params["freshness"] = fresh
        body = validated(_Response, self._api.request("GET", "/res/v1/web/search", params=params), "Brave Search")
        results = body.web.results if body.web else []
        return [SearchResult(title=plain(r.title) or r.url, url=r.url, snippet=plain(r.description),
                             published=iso_date(r.page_age or r.age)) for r in results if r.url][:n]
