"""SearXNG (self-hosted metasearch): GET {RESEARCH_SEARXNG_URL}/search?q=...&format=json.

The JSON format must be enabled in the instance's settings.yml (search.formats), else it answers 403.
Documented response used here: {"results": [{"title", "url", "content", "publishedDate"?}]}. SearXNG has no
result-count parameter, so the first `n` of page 1 are kept. Recency maps to `time_range` day/week/month/year.
"""
from __future__ import annotations

import time

import httpx
from pydantic import BaseModel, ConfigDict, Field

from pipeline.core.schema import SearchResult
from pipeline.web.search.base import JsonApi, Sleep, iso_date, plain, recency_bucket, validated


class _Result(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    title: str = ""
    url: str = ""
    content: str | None = ""
    published: str | None = Field(None, alias="publishedDate")


class _Response(BaseModel):
    model_config = ConfigDict(extra="ignore")
    results: list[_Result]


class SearxngSearch:
    """A SearXNG instance's JSON API behind the SearchProvider interface."""

    name = "searxng"

    def __init__(self, base_url: str, http: httpx.Client, *, sleep: Sleep = time.sleep):
        self._api = JsonApi("SearXNG", base_url, http, sleep=sleep, auth_fix=(
            "enable `json` under search.formats in the instance's settings.yml, and check RESEARCH_SEARXNG_URL"))

    def search(self, query: str, n: int = 10, recency_days: int | None = None) -> list[SearchResult]:
        params = {"q": query, "format": "json", "pageno": 1}
        window = recency_bucket(recency_days)
        if window:
            params["time_range"] = window
        body = validated(_Response, self._api.request("GET", "/search", params=params), "SearXNG")
        return [SearchResult(title=plain(r.title) or r.url, url=r.url, snippet=plain(r.content),
                             published=iso_date(r.published)) for r in body.results if r.url][:n]
