"""Anthropic's server-side web search tool as a provider; needs only the Anthropic key.

Only pipeline/models/anthropic.py talks to Anthropic, so this provider is given
`server_web_search(query, n, recency_days)`, which returns the content blocks of one assistant turn
(models.anthropic.LLM.server_web_search). The documented blocks read:
  {"type": "web_search_tool_result", "tool_use_id": ..., "content": [
      {"type": "web_search_result", "title", "url", "page_age", "encrypted_content"}, ...]}
  or, on failure, "content": {"type": "web_search_tool_result_error", "error_code": "unavailable" | ...}
Results carry no readable snippet; the cited_text of the model's `web_search_result_location` citations
(in text blocks) is used as the snippet when the model cited that URL.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipeline.core.schema import SearchResult
from pipeline.web.search.base import SearchFailed, iso_date, plain

ServerWebSearch = Callable[[str, int, "int | None"], list[dict[str, Any]]]

_ERROR_ADVICE = {
    "max_uses_exceeded": "the search tool's use limit was reached",
    "too_many_requests": "the search tool is rate-limited; try again later",
    "unavailable": "the search tool is unavailable; try again later",
    "query_too_long": "the query is too long; use fewer words",
    "invalid_tool_input": "the query was rejected; rephrase it",
    "request_too_large": "the request was too large; use a shorter query",
}


def _cited_snippets(blocks: list[dict[str, Any]]) -> dict[str, str]:
    snippets: dict[str, str] = {}
    for block in blocks:
        if block.get("type") != "text":
            continue
        for citation in block.get("citations") or []:
            text = plain(citation.get("cited_text"))
            if citation.get("type") == "web_search_result_location" and citation.get("url") and text:
                snippets.setdefault(citation["url"], text)  # an empty citation never stands in for a snippet
    return snippets


def parse_web_search_blocks(content_blocks: list[dict[str, Any]]) -> list[SearchResult]:
    """Results of the web_search_tool_result blocks of one turn; SearchFailed when the tool reported an error."""
    snippets = _cited_snippets(content_blocks)
    results: list[SearchResult] = []
    seen: set[str] = set()
    for block in content_blocks:
        if block.get("type") != "web_search_tool_result":
            continue
        content = block.get("content")
        if isinstance(content, dict):
            code = str(content.get("error_code") or "unknown")
            advice = _ERROR_ADVICE.get(code, "the search tool failed")
            raise SearchFailed(f"SEARCH_FAILED: Anthropic web search reported {code}: {advice}.")
        if not isinstance(content, list):
            raise SearchFailed("SEARCH_FAILED: Anthropic web search answered in an unexpected shape "
                               "(web_search_tool_result.content is neither a list nor an error).")
        for item in content:
            if not isinstance(item, dict) or item.get("type") != "web_search_result" or not item.get("url"):
                continue
            url = str(item["url"])
            if url in seen:
                continue
            seen.add(url)
            results.append(SearchResult(title=plain(item.get("title")) or url, url=url,
                                        snippet=snippets.get(url, ""), published=iso_date(item.get("page_age"))))
    return results


class AnthropicWebSearch:
    """Anthropic's server-side web_search tool behind the SearchProvider interface.

    `errors` are the exception types `server_web_search` raises for remote faults (models.base.LLMError); they become
    SearchFailed with their message. The SDK already retried transient HTTP faults before raising.
    """

    name = "anthropic"

    def __init__(self, server_web_search: ServerWebSearch, *, errors: tuple[type[Exception], ...] = ()):
        self._search = server_web_search
        self._errors = errors

    def search(self, query: str, n: int = 10, recency_days: int | None = None) -> list[SearchResult]:
        try:
            blocks = self._search(query, n, recency_days)
        except self._errors as e:
            raise SearchFailed(f"SEARCH_FAILED: Anthropic web search failed ({e}); try again later or use "
                               "what you have.") from None
        return parse_web_search_blocks(blocks)[:n]
