"""Extraction in worker processes against extraction in the agent's process: CPU per page, parallel fetches,
throughput and start-up.

Usage: python benchmarks/perf/workers_bench.py [--skip-before] [--news DIR] [--diverse DIR]

Pages: the 121 news and 47 diverse shared pages (../shared/data/extraction*, gzip HTML) and the slow-page corpus
(tests/fakes/slow_pages.py). "before" reads each in this process with documents.read_document (no budget, under
extract.py's process-wide lxml lock, as fetches did before the pool); "after" reads it in a WorkerPool at its
default limits (8 s of CPU for a page, 20 s for a PDF) and takes the CPU seconds the worker reports.
Prints: per-page CPU p50 / p99 / max, each slow page's outcome, the wall time of 8 parallel reads with one
100k-paragraph page among them (all 8, and the 7 small ones), pages/s over the shared pages with 1 and 2 workers,
and a worker's start-up time.
"""
from __future__ import annotations

import argparse
import gzip
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import mean, quantiles

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pipeline.web.documents import Document, read_document
from pipeline.web.extract import ExtractionError
from pipeline.web.workers import WorkerPool
from tests.fakes.slow_pages import slow_pages

SHARED = Path(__file__).resolve().parents[3] / "shared/data"
_LOCK = threading.Lock()  # the former process-wide lock around extraction


def shared_pages(*dirs: Path) -> list[Document]:
    return [Document(kind="html", body=gzip.decompress(p.read_bytes()), url=f"https://example.com/{p.name}")
            for d in dirs if d.is_dir() for p in sorted((d / "html").glob("*.html.gz"))]


def in_process(doc: Document) -> tuple[str, float]:
    """The outcome and CPU seconds of reading `doc` here, one page at a time."""
    with _LOCK:
        started = time.process_time()
        try:
            got = read_document(doc)
            outcome = f"text, {len(got.text):,} chars" + (" (truncated)" if got.truncated else "")
        except ExtractionError as e:
            outcome = f"refused: {e}"
        return outcome, time.process_time() - started


def in_worker(pool: WorkerPool, doc: Document) -> tuple[str, float]:
    costs: list[float] = []
    try:
        got = pool.read(doc, costs)
        outcome = f"text, {len(got.text):,} chars" + (f" ({got.truncated_reason})" if got.truncated else "")
    except ExtractionError as e:
        outcome = f"refused: {e}"
    return outcome, sum(costs)


def spread(costs: list[float]) -> str:
    cuts = quantiles(costs, n=100, method="inclusive")
    return f"p50 {cuts[49] * 1000:8.1f} ms   p99 {cuts[98] * 1000:9.1f} ms   max {max(costs) * 1000:9.1f} ms"


def parallel(read: object, docs: list[Document]) -> tuple[float, float]:
    """Wall seconds until all of `docs` are read with one thread each, and until all but the first are."""
    done: dict[int, float] = {}
    started = time.monotonic()

    def one(i: int) -> None:
        read(docs[i])  # type: ignore[operator]
        done[i] = time.monotonic() - started

    with ThreadPoolExecutor(max_workers=len(docs)) as threads:
        list(threads.map(one, range(len(docs))))
    return max(done.values()), max(v for k, v in done.items() if k != 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-before", action="store_true", help="skip the in-process figures (slow)")
    parser.add_argument("--news", type=Path, default=SHARED / "extraction")
    parser.add_argument("--diverse", type=Path, default=SHARED / "extraction-diverse")
    args = parser.parse_args()
    real = shared_pages(args.news, args.diverse)
    slow = [(p.name, Document(kind=p.kind, body=p.body, url="https://example.com/slow")) for p in slow_pages()]
    hog = next(d for name, d in slow if name == "100k paragraphs")
    eight = [hog, *real[:7]]
    pool = WorkerPool()
    print(f"{len(real)} shared pages, {len(slow)} slow pages; pool of {pool.size} workers")

    rows = [("after (workers)", lambda d: in_worker(pool, d))]
    if not args.skip_before:
        rows.insert(0, ("before (in process)", in_process))
    for label, read in rows:
        costs = [read(d)[1] for d in real]
        print(f"\n{label}\n  shared pages   {spread(costs)}")
        slow_costs = []
        for name, d in slow:
            outcome, cpu = read(d)
            slow_costs.append(cpu)
            print(f"  {name:32} {cpu:7.2f} s CPU  {outcome[:110]}")
        print(f"  all pages      {spread(costs + slow_costs)}")
        every, small = parallel(lambda d, r=read: r(d), eight)  # type: ignore[misc]
        print(f"  8 parallel reads, one of 100k paragraphs: all done {every:.2f} s, the 7 small ones {small:.2f} s")

    for size in (1, 2):
        sized = WorkerPool(size=size)
        sized.read(real[0])  # started before timing
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=size) as threads:
            list(threads.map(lambda d, p=sized: in_worker(p, d), real))  # type: ignore[misc]
        print(f"\nthroughput, {size} worker(s): {len(real) / (time.monotonic() - started):.1f} pages/s")
        sized.close()
    print(f"worker start-up: {mean(pool.startup_seconds) * 1000:.0f} ms mean over {pool.started} starts "
          f"(imports of lxml, trafilatura, pypdf, htmldate)")
    pool.close()


if __name__ == "__main__":
    main()
