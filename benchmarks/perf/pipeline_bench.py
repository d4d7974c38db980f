"""Pipeline figures against the local fakes with a fixed artificial model latency (no network, no keys).

    .venv/bin/python benchmarks/pipeline_bench.py [--latency 0.2]

Prints: tools-mode wall time of 3 parallel workers against the same workers one at a time; input tokens per
report (the fake's count: ~1 token per 4 request characters) against a naive baseline that puts every fetched
page whole into one context, and the share of input served from the prompt cache.
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.config import Settings  # noqa: E402
from pipeline.core.schema import BudgetLimits, RunOptions  # noqa: E402
from pipeline.research.orchestrator import build_context, research  # noqa: E402
from pipeline.research.steps.plan import make_plan  # noqa: E402
from pipeline.research.steps.worker import run_worker  # noqa: E402
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


def page_sizes(corpus_dir: Path) -> dict[str, int]:
    """Characters of each saved page's raw HTML, by URL (the naive baseline puts them whole into one context)."""
    sizes = {}
    for line in (corpus_dir / "manifest.jsonl").read_text().splitlines():
        entry = json.loads(line)
        data = (corpus_dir / entry["path"]).read_bytes()
        sizes[entry["url"]] = len(gzip.decompress(data) if entry["path"].endswith(".gz") else data)
    return sizes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per model request (default 0.2)")
    args = ap.parse_args()
    brain = ResearchBrain(plans={"benchmark": PLAN}, latency=args.latency)
    with ExitStack() as stack:
        fake = stack.enter_context(FakeAnthropic(brain))
        corpus_dir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        corpus_from_extraction_set(PAGES, corpus_dir)  # the frozen web: BM25 search and saved pages
        raw = page_sizes(corpus_dir)
        settings = Settings(anthropic_api_key="sk-ant-bench", anthropic_base_url=fake.base_url,
                            search_provider="corpus", corpus_dir=str(corpus_dir))
        limits = BudgetLimits(searches=100, fetches=100, model_calls=500, cost_usd=50)

        context = None

        print(f"model latency {args.latency:.2f} s per request; 3 sub-questions; "
              f"{len(raw)} saved pages (offline corpus)\n")
        for mode in ("tools", "fixed"):
            before = len(fake.requests)
            t0 = time.perf_counter()
            result = research(QUESTION, settings, options=RunOptions(mode=mode, limits=limits), context=context)
            wall = time.perf_counter() - t0
            u = result.usage
            total_in = u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens
            fetched = {s.final_url for s in result.sources}
            naive_html = sum(raw.get(url, 0) for url in fetched) // 4
            print(f"[{mode}] status={result.status} wall={wall:.2f}s research={result.timings.get('research', 0):.2f}s "
                  f"model_calls={len(fake.requests) - before} findings={len(result.findings)} "
                  f"rejected={len(result.rejected)} sources={len(result.sources)}")
            print(f"[{mode}] input tokens per report: {total_in:,} (uncached {u.input_tokens:,}, cache read "
                  f"{u.cache_read_input_tokens:,}, cache write {u.cache_creation_input_tokens:,}); cached share "
                  f"{u.cache_read_input_tokens / max(total_in, 1):.0%}")
            print(f"[{mode}] naive baseline (every fetched page's HTML whole in one context): {naive_html:,} tokens;"
                  f" reference design: 87,200; ours / reference = {total_in / 87_200:.2f}\n")

        # One worker at a time, on the same plan, against the same parallel run.
        ctx = build_context(settings, RunOptions(mode="tools", limits=limits), _null())
        plan = make_plan(QUESTION, ctx, RunOptions(mode="tools"))
        singles = []
        for sq in plan.sub_questions:
            t0 = time.perf_counter()
            run_worker(sq, ctx, RunOptions(mode="tools"))
            singles.append(time.perf_counter() - t0)
        ctx2 = build_context(settings, RunOptions(mode="tools", limits=limits), _null())
        from pipeline.research.steps.worker import research_tools
        t0 = time.perf_counter()
        research_tools(plan, ctx2, RunOptions(mode="tools"))
        parallel = time.perf_counter() - t0
        slowest = max(singles)
        print(f"tools mode, 3 workers: one at a time {sum(singles):.2f}s (slowest single {slowest:.2f}s); "
              f"in parallel {parallel:.2f}s = {parallel / slowest:.2f}x the slowest single worker (target <= 1.5x)")


def _null():  # type: ignore[no-untyped-def]
    from pipeline.core.events import NullSink
    return NullSink()


if __name__ == "__main__":
    main()
