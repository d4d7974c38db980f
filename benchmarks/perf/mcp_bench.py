"""MCP server figures: `python -m pipeline mcp` as a subprocess over stdio, driven by the `mcp` SDK's client against
the local fakes (a page server, a Brave-shaped search API, the fake Anthropic API; no network, no real keys).

    .venv/bin/python benchmarks/perf/mcp_bench.py [--runs 5] [--fetches 20] [--latency 0.0]

Prints: the server's start time (spawn to initialised session); for an extractive research and a fixed research, the
time from the tool call to the first progress notification and to the result (p50, min and max over --runs calls),
with the number of progress notifications per run; fetch_page latency for a local page (p50, p90) and for a refused
URL; and a list_runs round trip.
`--latency` adds that many seconds to each fake model request (the fixed run's figures grow with it).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from tests.fakes.anthropic_api import FakeAnthropic  # noqa: E402
from tests.fakes.research_brain import ResearchBrain  # noqa: E402
from tests.fakes.search_apis import FakeSearchApi, Hit  # noqa: E402
from tests.fakes.web_server import Route, WebServer  # noqa: E402

QUESTION = "What does Qdrant Cloud pricing start at?"
PAGES = {
    "/qdrant": ("Qdrant pricing", ["Qdrant is an open-source vector database with many GitHub stars.",
                                   "Qdrant Cloud pricing starts at 25 dollars per month for the smallest cluster."]),
    "/milvus": ("Milvus pricing", ["Milvus is an open-source vector database with the most GitHub stars.",
                                   "Zilliz Cloud pricing for Milvus starts at 65 dollars per month."]),
    "/weaviate": ("Weaviate pricing", ["Weaviate is an open-source vector database written in Go.",
                                       "Weaviate Cloud pricing starts at 25 dollars per month for serverless."]),
}


def page(title: str, paragraphs: list[str]) -> Route:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return Route.html(f"<html><head><title>{title}</title><meta property='article:published_time' "
                      f"content='2025-01-15'></head><body><article><h1>{title}</h1>{body}</article></body></html>")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


async def research_figures(session: ClientSession, mode: str, runs: int) -> tuple[list[float], list[float], list[int]]:
    """(seconds to the first progress notification, seconds to the result, notifications) per call."""
    first, done, counts = [], [], []
    for _ in range(runs):
        seen: list[float] = []

        async def on_progress(value: float, total: float | None, message: str | None, seen: list[float] = seen
                              ) -> None:
            seen.append(time.perf_counter())

        started = time.perf_counter()
        result = await session.call_tool("research", {"question": QUESTION, "mode": mode, "budget": "small"},
                                         read_timeout_seconds=120, progress_callback=on_progress)
        ended = time.perf_counter()
        if result.is_error or not seen:
            raise SystemExit(f"{mode} research failed: {result.content}")
        first.append(seen[0] - started)
        done.append(ended - started)
        counts.append(len(seen))
    return first, done, counts


async def bench(env: dict[str, str], url: str, runs: int, fetches: int) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "pipeline", "mcp", "--log-level", "WARNING"],
                                   env=env, cwd=str(ROOT))
    spawned = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        print(f"server start (spawn to initialised session): {ms(time.perf_counter() - spawned)}")
        await session.list_tools()  # the client caches the output schemas it validates results against
        print(f"\nresearch, {runs} calls each (budget small; p50 [min, max]):")
        for mode in ("extractive", "fixed"):
            first, done, counts = await research_figures(session, mode, runs)
            print(f"  {mode:<10}  first progress {ms(statistics.median(first))} [{ms(min(first))}, "
                  f"{ms(max(first))}]   result {ms(statistics.median(done))} [{ms(min(done))}, {ms(max(done))}]   "
                  f"{statistics.median(counts):.0f} notifications")
        took = []
        for _ in range(fetches):
            started = time.perf_counter()
            result = await session.call_tool("fetch_page", {"url": url})
            took.append(time.perf_counter() - started)
            if result.is_error:
                raise SystemExit(f"fetch_page failed: {result.content}")
        took.sort()
        listed = []
        for _ in range(fetches):
            started = time.perf_counter()
            await session.call_tool("list_runs", {"limit": 1})
            listed.append(time.perf_counter() - started)
        refused = time.perf_counter()
        blocked = await session.call_tool("fetch_page", {"url": "http://169.254.169.254/latest/meta-data/"})
        refused = time.perf_counter() - refused
        print(f"\nfetch_page of a local page, {fetches} calls: p50 {ms(statistics.median(took))}, "
              f"p90 {ms(took[int(0.9 * (len(took) - 1))])}; a refused URL (metadata address): {ms(refused)} "
              f"(isError={blocked.is_error})")
        print(f"a list_runs round trip (the SDK's and the run store's overhead): p50 {ms(statistics.median(listed))}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="research calls per mode (default 5)")
    ap.add_argument("--fetches", type=int, default=20, help="fetch_page calls (default 20)")
    ap.add_argument("--latency", type=float, default=0.0, help="seconds per fake model request (default 0)")
    args = ap.parse_args()
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        web = stack.enter_context(WebServer({path: page(t, ps) for path, (t, ps) in PAGES.items()}))
        hits = [Hit(title=t, url=web.url(path), snippet="pricing") for path, (t, _) in PAGES.items()]
        search = stack.enter_context(FakeSearchApi("brave", hits, api_key="brave-bench-key"))
        model = stack.enter_context(FakeAnthropic(ResearchBrain(latency=args.latency)))
        base: dict[str, Any] = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "RESEARCH_"))}
        env = {**base, "PYTHONPATH": str(ROOT), "ANTHROPIC_API_KEY": "sk-ant-bench-key-0000",
               "ANTHROPIC_BASE_URL": model.base_url, "RESEARCH_SEARCH_PROVIDER": "brave",
               "BRAVE_API_KEY": "brave-bench-key", "RESEARCH_SEARCH_BASE_URL": search.base_url,
               "RESEARCH_FETCH_ALLOW": web.host_port, "RESEARCH_DB": str(tmp / "runs.sqlite")}
        print(f"MCP server figures ({os.cpu_count()} cores; fake model latency {args.latency:g} s per request)\n")
        anyio.run(bench, env, web.url("/qdrant"), args.runs, args.fetches)


if __name__ == "__main__":
    main()
