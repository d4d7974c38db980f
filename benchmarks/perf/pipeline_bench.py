"""Pipeline figures against the local fakes with a fixed artificial model latency (no network, no keys).

    .venv/bin/python benchmarks/perf/pipeline_bench.py [--latency 0.2] [--json figures.json]

Prints, per mode: model calls, sequential model rounds (counted from the run's events; `--latency 1` makes wall time
over latency the same figure), input tokens per report (the fake's count: ~1 token per 4 request characters) raw and
cost-weighted, cost at default prices, against a naive baseline that puts every fetched page whole into one context;
then tools-mode wall time of 3 parallel workers against the same workers one at a time. The counts are held to
benchmarks/perf/budgets.json by tests/test_perf_budget.py.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.bench.rounds import sequential_rounds  # noqa: E402
from pipeline.config import Settings  # noqa: E402
from pipeline.core.events import ListSink, NullSink  # noqa: E402
from pipeline.core.schema import BudgetLimits, RunOptions, Usage  # noqa: E402
from pipeline.research.orchestrator import build_context, research  # noqa: E402
from pipeline.research.steps.plan import make_plan  # noqa: E402
from pipeline.research.steps.worker import research_tools, run_worker  # noqa: E402
from pipeline.web.corpus import corpus_from_extraction_set  # noqa: E402
from tests.fakes.anthropic_api import FakeAnthropic  # noqa: E402
from tests.fakes.research_brain import ResearchBrain  # noqa: E402

PAGES = ROOT / "tests/fixtures/pages"
PLAN = {"premise_analysis": "No questionable premise.", "sub_questions": [
    {"question": "What did NASA find about water vapor plumes on Jupiter's moon Europa?",
     "success_criterion": "A source states what was detected.", "proxy": None,
     "queries": ["Europa water vapor plumes NASA"], "is_premise_check": False},
    {"question": "Why is the New York attorney general investigating Google?",
     "success_criterion": "A source states the reason.", "proxy": None,
     "queries": ["New York attorney general Google investigation"], "is_premise_check": False},
    {"question": "What does the global geological map of Saturn's moon Titan show?",
     "success_criterion": "A source describes the map.", "proxy": None,
     "queries": ["Titan global geological map"], "is_premise_check": False}]}
QUESTION = "Three space and tech news questions for the benchmark"
LIMITS = BudgetLimits(searches=100, fetches=100, model_calls=500, cost_usd=50)


def page_sizes(corpus_dir: Path) -> dict[str, int]:
    """Characters of each saved page's raw HTML, by URL (the naive baseline puts them whole into one context)."""
    sizes = {}
    for line in (corpus_dir / "manifest.jsonl").read_text().splitlines():
        entry = json.loads(line)
        data = (corpus_dir / entry["path"]).read_bytes()
        sizes[entry["url"]] = len(gzip.decompress(data) if entry["path"].endswith(".gz") else data)
    return sizes


def cost_weighted(usage: Usage) -> int:
    """Input tokens weighted as they are billed: a cache write at 1.25x, a cache read at 0.1x, the rest at 1x."""
    return round(usage.input_tokens + 1.25 * usage.cache_creation_input_tokens + 0.1 * usage.cache_read_input_tokens)


# The fake writes a cache entry only for a prefix this long: the smallest minimum Anthropic publishes (Sonnet 4.x;
# Haiku 4.5 and Opus 4.5 need 4,096). With no minimum, prompts of a few hundred tokens would look cached.
MIN_CACHE_TOKENS = 1024


def measure(latency: float, *, parallel_check: bool = False,
            min_cache_tokens: int = MIN_CACHE_TOKENS) -> dict[str, dict[str, Any]]:
    """One report per mode against the fakes at `latency` seconds per model request: each mode's figures (counts,
    then wall times); with `parallel_check`, also the tools workers one at a time against in parallel."""
    brain = ResearchBrain(plans={"benchmark": PLAN}, latency=latency, parallel_tools=True)
    figures: dict[str, dict[str, Any]] = {}
    with ExitStack() as stack:
        fake = stack.enter_context(FakeAnthropic(brain, min_cache_tokens=min_cache_tokens))
        corpus_dir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        corpus_from_extraction_set(PAGES, corpus_dir)  # the frozen web: BM25 search and saved pages
        raw = page_sizes(corpus_dir)
        settings = Settings(anthropic_api_key="sk-ant-bench", anthropic_base_url=fake.base_url,
                            search_provider="corpus", corpus_dir=str(corpus_dir))
        for mode in ("tools", "fixed"):
            fake.reset()  # each mode starts with an empty prompt cache, as a report of its own would
            before, events = len(fake.requests), ListSink()
            t0 = time.perf_counter()
            result = research(QUESTION, settings, options=RunOptions(mode=mode, limits=LIMITS), events=events)
            wall = time.perf_counter() - t0
            u = result.usage
            fetched = {s.final_url for s in result.sources}
            figures[mode] = {
                "status": result.status, "model_calls": len(fake.requests) - before,
                "rounds": sequential_rounds(e.event for e in events.events),
                "input_tokens": u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens,
                "uncached_tokens": u.input_tokens, "cache_read_tokens": u.cache_read_input_tokens,
                "cache_write_tokens": u.cache_creation_input_tokens, "cost_weighted_tokens": cost_weighted(u),
                "output_tokens": u.output_tokens, "cost_usd": round(u.cost_usd, 4),
                "findings": len(result.findings), "rejected": len(result.rejected), "sources": len(result.sources),
                "naive_tokens": sum(raw.get(url, 0) for url in fetched) // 4,
                "wall_s": round(wall, 2), "research_s": round(result.timings.get("research", 0), 2),
            }
        if parallel_check:
            figures["parallel"] = _parallel_check(settings)
    return figures


def _parallel_check(settings: Settings) -> dict[str, Any]:
    """Wall times of the tools workers of one plan, one at a time and then in parallel."""
    ctx = build_context(settings, RunOptions(mode="tools", limits=LIMITS), NullSink())
    plan = make_plan(QUESTION, ctx, RunOptions(mode="tools"))
    singles = []
    for sq in plan.sub_questions:
        t0 = time.perf_counter()
        run_worker(sq, ctx, RunOptions(mode="tools"))
        singles.append(time.perf_counter() - t0)
    ctx2 = build_context(settings, RunOptions(mode="tools", limits=LIMITS), NullSink())
    t0 = time.perf_counter()
    research_tools(plan, ctx2, RunOptions(mode="tools"))
    return {"serial_s": round(sum(singles), 2), "slowest_s": round(max(singles), 2),
            "parallel_s": round(time.perf_counter() - t0, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per model request (default 0.2)")
    ap.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    ap.add_argument("--min-cache-tokens", type=int, default=MIN_CACHE_TOKENS,
                    help=f"shortest prefix the fake caches (default {MIN_CACHE_TOKENS})")
    args = ap.parse_args()
    figures = measure(args.latency, parallel_check=True, min_cache_tokens=args.min_cache_tokens)
    print(f"model latency {args.latency:.2f} s per request; 3 sub-questions; saved pages of {PAGES.name} "
          f"(offline corpus)\n")
    for mode in ("tools", "fixed"):
        f = figures[mode]
        print(f"[{mode}] status={f['status']} wall={f['wall_s']:.2f}s research={f['research_s']:.2f}s "
              f"model_calls={f['model_calls']} sequential rounds={f['rounds']} (wall / latency "
              f"{f['wall_s'] / max(args.latency, 1e-9):.1f}) findings={f['findings']} rejected={f['rejected']} "
              f"sources={f['sources']}")
        print(f"[{mode}] input tokens per report: {f['input_tokens']:,} (uncached {f['uncached_tokens']:,}, cache "
              f"read {f['cache_read_tokens']:,}, cache write {f['cache_write_tokens']:,}); cached share "
              f"{f['cache_read_tokens'] / max(f['input_tokens'], 1):.0%}; cost-weighted (write 1.25x, read 0.1x) "
              f"{f['cost_weighted_tokens']:,}; cost ${f['cost_usd']:.4f}")
        print(f"[{mode}] naive baseline (every fetched page's HTML whole in one context): {f['naive_tokens']:,} "
              f"tokens; reference design: 87,200; ours / reference = {f['input_tokens'] / 87_200:.2f}\n")
    p = figures["parallel"]
    print(f"tools mode, 3 workers: one at a time {p['serial_s']:.2f}s (slowest single {p['slowest_s']:.2f}s); "
          f"in parallel {p['parallel_s']:.2f}s = {p['parallel_s'] / p['slowest_s']:.2f}x the slowest single worker "
          f"(target <= 1.5x)")
    if args.json:
        args.json.write_text(json.dumps({"latency_s": args.latency, **figures}, indent=2) + "\n")
        print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
