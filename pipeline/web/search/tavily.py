"""Tavily search API: POST {base}/search with a JSON body, key as `Authorization: Bearer`.

Documented response used here: {"results": [{"title", "url", "content", "score", "published_date"?}]}
(published_date is given for the news topic only). Recency maps to `time_range` day/week/month/year; beyond a
year no filter is sent, since the year window would drop pages the caller asked for.
"""
from __future__ import annotations

import time

import httpx
from pydantic import BaseModel, ConfigDict

from pipeline.core.schema import SearchResult
from pipeline.web.search.base import JsonApi, Sleep, iso_date, plain, recency_bucket, validated

DEFAULT_BASE_URL = "https://api.tavily.com"
MAX_RESULTS = 20


class _Result(BaseModel):
    model_config = ConfigDict(extra="ignore")
    title: str = ""
    url: str = ""
    content: str = ""
    published_date: str | None = None


class _Response(BaseModel):
    model_config = ConfigDict(extra="ignore")
    results: list[_Result]


class TavilySearch:
    """Tavily web search behind the SearchProvider interface."""

    name = "tavily"

    def __init__(self, api_key: str, http: httpx.Client, *, base_url: str | None = None, sleep: Sleep = time.sleep):
        self._api = JsonApi("Tavily", base_url or DEFAULT_BASE_URL, http, sleep=sleep, auth_fix="check TAVILY_API_KEY",
                            headers={"Authorization": f"Bearer {api_key}"})

    def search(self, query: str, n: int = 10, recency_days: int | None = None) -> list[SearchResult]:
        payload: dict[str, object] = {"query": query, "max_results": max(1, min(n, MAX_RESULTS)),
                                      "search_depth": "basic", "topic": "general",
                                      "include_answer": False, "include_raw_content": False}
        window = recency_bucket(recency_days)
        if window:
            payload["time_range"] = window
        body = validated(_Response, self._api.request("POST", "/search", json=payload), "Tavily")
        return [SearchResult(title=plain(r.title) or r.url, url=r.url, snippet=plain(r.content),
                             published=iso_date(r.published_date)) for r in body.results if r.url][:n]
