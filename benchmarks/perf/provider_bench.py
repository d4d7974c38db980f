"""The same research on both model providers, against the local fakes (a page server, a Brave-shaped search API, and
the fake Anthropic Messages API or the fake OpenAI Chat Completions API behind the same brain; no network, no keys).

    .venv/bin/python benchmarks/perf/provider_bench.py [--runs 5] [--latency 0.0]

For each provider and researcher mode, prints the model calls, the input tokens (uncached, cache writes, cache reads),
the output tokens and the wall time (p50 of --runs runs) of a three-part question. Both fakes cache prompt prefixes
from 1,024 tokens: the Anthropic one at the request's cache_control breakpoints (written, then read), the OpenAI
one automatically on the longest prefix shared with an earlier request, in steps of 128 tokens, as OpenAI documents.
For the OpenAI path it then says which requests that automatic caching applied to, by step.
`--latency` adds that many seconds to each fake model request.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.config import Settings  # noqa: E402
from pipeline.core.schema import RunOptions, RunResult  # noqa: E402
from pipeline.models.openai import TOOLS_PROBE  # noqa: E402
from pipeline.research.orchestrator import build_context, research  # noqa: E402
from pipeline.web.search.service import make_provider  # noqa: E402
from tests.fakes.anthropic_api import FakeAnthropic, MessagesRequest  # noqa: E402
from tests.fakes.openai_api import FakeOpenAI  # noqa: E402
from tests.fakes.research_brain import ResearchBrain  # noqa: E402
from tests.fakes.search_apis import FakeSearchApi, Hit  # noqa: E402
from tests.fakes.web_server import Route, WebServer  # noqa: E402

QUESTION = "Qdrant, Milvus and Pinecone cloud pricing in three parts"
TOPICS = ["Qdrant Cloud smallest cluster pricing", "Zilliz Cloud pricing for Milvus", "Pinecone Standard plan pricing"]
PLAN = {"premise_analysis": "fine", "sub_questions": [
    {"question": t, "success_criterion": "stated", "proxy": None, "queries": [t], "is_premise_check": False}
    for t in TOPICS]}
FILLER = ("The managed service runs in several regions and bills by the hour for compute and storage, with "
          "discounts for committed use and a free tier for small experiments. ")
PAGES = {
    "/qdrant": ("Qdrant pricing", "Qdrant Cloud smallest cluster pricing starts at 25 dollars per month."),
    "/milvus": ("Milvus pricing", "Zilliz Cloud pricing for Milvus starts at 65 dollars per month."),
    "/pinecone": ("Pinecone pricing", "Pinecone Standard plan pricing is 50 dollars per month."),
}
MODELS = {"anthropic": ("claude-sonnet-5-5", "claude-haiku-5-5"), "openai": ("gpt-4.1", "gpt-4.1-mini")}


def page(title: str, fact: str) -> Route:
    body = f"<p>{FILLER * 6}</p><p>{fact}</p><p>{FILLER * 6}</p>"
    return Route.html(f"<html><head><title>{title}</title><meta property='article:published_time' "
                      f"content='2025-01-15'></head><body><article><h1>{title}</h1>{body}</article></body></html>")


def step_of(req: MessagesRequest) -> str:
    """The step a request belongs to, read from its first user message as the brain reads it."""
    first = req.user_texts[0] if req.user_texts else ""
    if req.has_tool("record_finding"):
        return "probe" if first == TOOLS_PROBE else "worker"
    for tag, step in (("<max_sub_questions>", "planner"), ("<plan>", "plan judge"), ("<sentence>", "sentence judge"),
                      ("<findings>", "writer"), ("<claim>", "support judge"), ("untrusted_page", "analyst")):
        if tag in first:
            return step
    return "other"


def run_once(provider: str, mode: str, latency: float) -> tuple[RunResult, float, FakeAnthropic | FakeOpenAI]:
    brain = ResearchBrain(latency=latency)
    brain.plans["three parts"] = PLAN
    with ExitStack() as stack:
        web = stack.enter_context(WebServer({path: page(*p) for path, p in PAGES.items()}))
        search = stack.enter_context(FakeSearchApi("brave", [Hit(title=path.strip("/"), url=web.url(path),
                                                                 snippet="snippet", published=None)
                                                             for path in PAGES], api_key="brave-key"))
        fake: FakeAnthropic | FakeOpenAI = stack.enter_context(
            FakeOpenAI(brain) if provider == "openai" else FakeAnthropic(brain, min_cache_tokens=1024))
        lead, worker = MODELS[provider]
        model: dict[str, Any] = ({"model_provider": "openai", "openai_api_key": "sk-bench", "openai_base_url":
                                  fake.base_url} if provider == "openai"
                                 else {"anthropic_api_key": "sk-ant-bench", "anthropic_base_url": fake.base_url})
        settings = Settings.model_validate({**model, "lead_model": lead, "worker_model": worker,
                                            "search_provider": "brave", "brave_api_key": "brave-key",
                                            "search_base_url": search.base_url, "fetch_allow_raw": web.host_port})
        searcher = make_provider(settings, sleep=lambda _s: None)
        started = time.perf_counter()
        result = research(QUESTION, settings, options=RunOptions(mode=mode),
                          context=lambda s, o, e: build_context(s, o, e, provider=searcher))
        return result, time.perf_counter() - started, fake


def caching_by_step(fake: FakeOpenAI) -> dict[str, tuple[int, int, int]]:
    """Per step: (requests, requests with cached tokens, cached tokens / prompt tokens as a percentage)."""
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for rec, view in zip(fake.requests, fake.chat_requests, strict=True):
        if rec.cached_tokens is None or rec.response is None:
            continue
        row = table[step_of(view)]
        row[0] += 1
        row[1] += rec.cached_tokens > 0
        row[2] += rec.cached_tokens
        row[3] += rec.response["usage"]["prompt_tokens"]
    return {k: (n, hit, round(100 * cached / prompt) if prompt else 0) for k, (n, hit, cached, prompt) in table.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.0)
    args = parser.parse_args()
    print(f"{'provider':<10} {'mode':<6} {'status':<9} {'calls':>5} {'input':>7} {'cache wr':>8} {'cache rd':>8} "
          f"{'output':>7} {'findings':>8} {'p50 wall':>9}")
    last_openai: dict[str, FakeOpenAI] = {}
    for mode in ("fixed", "tools"):
        for provider in ("anthropic", "openai"):
            walls = []
            for _ in range(args.runs):
                result, wall, fake = run_once(provider, mode, args.latency)
                walls.append(wall)
            if isinstance(fake, FakeOpenAI):
                last_openai[mode] = fake
            u = result.usage
            print(f"{provider:<10} {mode:<6} {result.status:<9} {u.model_calls:>5} {u.input_tokens:>7} "
                  f"{u.cache_creation_input_tokens:>8} {u.cache_read_input_tokens:>8} {u.output_tokens:>7} "
                  f"{len(result.findings):>8} {statistics.median(walls) * 1000:>7.0f} ms")
    print("\nOpenAI automatic prefix caching (from 1,024 tokens, in 128-token steps), by step:")
    print(f"{'mode':<6} {'step':<15} {'requests':>8} {'cached':>7} {'of prompt':>9}")
    for mode, fake in last_openai.items():
        for step, (n, hit, share) in sorted(caching_by_step(fake).items()):
            print(f"{mode:<6} {step:<15} {n:>8} {hit:>7} {share:>8}%")


if __name__ == "__main__":
    main()
