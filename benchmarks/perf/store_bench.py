"""Run-store figures: time per event written, database size per run, and `runs` listing with 10,000 stored runs.

    .venv/bin/python benchmarks/store_bench.py [--runs 10000]

Real runs (both modes) against the local fake model over the offline corpus of saved news pages give the events
and RunResults; the per-event time is measured by writing those same events again through a recorder, each one
committed on its own (as during a run). The listing figure fills a store with `--runs` finished runs, each with
a real RunResult, and times SqliteRunStore.runs() in-process and `python -m pipeline runs --json` as a whole command.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.config import Settings  # noqa: E402
from pipeline.core.schema import BudgetLimits, RunOptions, RunResult  # noqa: E402
from pipeline.research.orchestrator import research  # noqa: E402
from pipeline.store.sql import SqliteRunStore, StoredEvent  # noqa: E402
from pipeline.web.corpus import corpus_from_extraction_set  # noqa: E402
from tests.fakes.anthropic_api import FakeAnthropic  # noqa: E402
from tests.fakes.research_brain import ResearchBrain  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from pipeline_bench import PAGES, PLAN, QUESTION  # noqa: E402


def _size(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.iterdir() if p.name.startswith(db.name))


def record_runs(work: Path) -> tuple[Path, list[RunResult]]:
    """One tools-mode and one fixed-mode run, recorded in a fresh store; the store's path and the results."""
    db = work / "runs.sqlite"
    with ExitStack() as stack:
        fake = stack.enter_context(FakeAnthropic(ResearchBrain(plans={"benchmark": PLAN})))
        corpus = work / "corpus"
        corpus_from_extraction_set(PAGES, corpus)
        settings = Settings(anthropic_api_key="sk-ant-bench", anthropic_base_url=fake.base_url,
                            search_provider="corpus", corpus_dir=str(corpus), db_path=str(db))
        limits = BudgetLimits(searches=100, fetches=100, model_calls=500, cost_usd=50)
        with SqliteRunStore(db) as store:
            results = [research(QUESTION, settings, options=RunOptions(mode=m, limits=limits), store=store)
                       for m in ("tools", "fixed")]
    return db, results


def time_events(events: list[StoredEvent], work: Path, repeat: int) -> list[float]:
    """Seconds per emit, writing `events` `repeat` times into a fresh store (each emit is one commit)."""
    times = []
    typed = [(e.event(), e.tokens, e.ms) for e in events]  # as a run emits them: typed events
    with SqliteRunStore(work / "timing.sqlite") as store:
        for r in range(repeat):
            rec = store.recorder(f"t{r}", secrets=["sk-ant-bench"])
            for event, tokens, ms in typed:
                t0 = time.perf_counter()
                rec.emit(event, tokens=tokens, ms=ms)
                times.append(time.perf_counter() - t0)
    return times


def fill(db: Path, results: list[RunResult], n: int) -> None:
    """`n` finished runs with real RunResults, written through recorders as runs write them."""
    with SqliteRunStore(db) as store:
        for i in range(n):
            r = results[i % len(results)].model_copy(update={"run_id": f"bench{i:06d}"})
            rec = store.recorder(r.run_id)
            rec.start(question=f"{r.question} #{i}", options=RunOptions(mode=r.mode), models=r.models,
                      prompt_version="bench")
            rec.finish(r)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10_000, help="stored runs for the listing figure (default 10000)")
    ap.add_argument("--repeat", type=int, default=5, help="times the recorded events are rewritten (default 5)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        db, results = record_runs(work)
        with SqliteRunStore(db) as store:
            per_run = {r.mode: store.events(r.run_id) for r in results}
        total = _size(db)
        print(f"database size per run (both runs, WAL folded in): {total / len(results) / 1024:.0f} KiB average")
        for mode, events in per_run.items():
            payload = sum(len(e.model_dump_json()) for e in events)
            biggest = max(events, key=lambda e: len(e.model_dump_json()))
            print(f"  [{mode}] {len(events)} events, {payload / 1024:.0f} KiB of event JSON "
                  f"(largest: {biggest.kind}, {len(biggest.model_dump_json()) / 1024:.0f} KiB)")

        events = [e for evs in per_run.values() for e in evs]
        times = time_events(events, work, args.repeat)
        ms = sorted(t * 1000 for t in times)
        print(f"time per event written ({len(ms)} events, each its own commit, WAL, synchronous=NORMAL): "
              f"mean {statistics.mean(ms):.3f} ms, median {statistics.median(ms):.3f} ms, "
              f"p99 {ms[int(len(ms) * 0.99)]:.3f} ms, max {ms[-1]:.2f} ms (target: under 1 ms)")

        listing_db = work / "listing.sqlite"
        t0 = time.perf_counter()
        fill(listing_db, results, args.runs)
        print(f"filled a store with {args.runs:,} finished runs in {time.perf_counter() - t0:.1f} s "
              f"({_size(listing_db) / 2**20:.0f} MiB)")
        with SqliteRunStore(listing_db) as store:
            store.runs()  # warm the page cache, as a second listing would find it
            laps = []
            for _ in range(5):
                t0 = time.perf_counter()
                rows = store.runs()
                laps.append(time.perf_counter() - t0)
        print(f"SqliteRunStore.runs() over {len(rows):,} runs: best {min(laps) * 1000:.0f} ms, "
              f"median {statistics.median(laps) * 1000:.0f} ms (target: under 200 ms)")
        env = {**os.environ, "RESEARCH_DB": str(listing_db), "PYTHONPATH": str(ROOT)}
        laps = []
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "pipeline", "runs", "--json"], env=env, check=True,
                           stdout=subprocess.DEVNULL)
            laps.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import pipeline.__main__"], env=env, check=True)
        startup = time.perf_counter() - t0
        print(f"`python -m pipeline runs --json` over {len(rows):,} runs, whole command: "
              f"best {min(laps) * 1000:.0f} ms (of which interpreter start and imports: {startup * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
