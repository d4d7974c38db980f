"""Database figures on both backends (a SQLite file; PostgreSQL on loopback): event writes, listing, reservations,
and the app's memory with its database open.

    .venv/bin/python benchmarks/perf/db_bench.py [--runs 10000] [--events 2000] [--reservations 400]

PostgreSQL is the throwaway server of the tests (tests/fakes/postgres_server.py: Debian's postgresql package,
fsync off as in the tests, so its figures are of the code and the protocol, not of a disk), or the one
RESEARCH_TEST_POSTGRES_URL names. For each backend:
1. event write: `--events` real-shaped events (a step, a search, a fetch with page text, a model call of a few KiB)
   emitted through a run's recorder, each its own commit as during a run: p50 and p99 per event;
2. listing: a store filled with `--runs` finished runs (each with a RunResult), then `runs()`: best and median;
3. reservations: 8 processes, each with its own database connection, reserving $0.01 in a loop against a ceiling
   no one reaches: reservations per second in all;
4. memory: the app (`python -m ui.serve`) with the backend as RESEARCH_DB, after the Benchmarks page and the live
   page unlocked (which opens the database: the SQLite connection, or the PostgreSQL pool), resident memory.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.perf import browser  # noqa: E402
from benchmarks.perf.procstat import memory_kb  # noqa: E402
from pipeline.core.event_types import FetchEvent, ModelResponseEvent, SearchEvent, StepEvent  # noqa: E402
from pipeline.core.schema import RunOptions, RunResult  # noqa: E402
from pipeline.store import migrated_database  # noqa: E402
from pipeline.store.database import open_database  # noqa: E402
from pipeline.store.sql import SqlRunStore  # noqa: E402
from tests.fakes.docker_build import lay_out, run_image, stop  # noqa: E402
from tests.fakes.postgres_server import postgres_server  # noqa: E402
from ui.ledger import SpendLedger  # noqa: E402

PAGE = ("Qdrant Cloud pricing starts at 25 dollars per month for the smallest cluster. " * 60)[:4000]


def events(n: int) -> Iterator[tuple[object, int]]:
    """A run's mix of events: a step, a search, a fetch with its page text, a model call (and the tokens)."""
    for i in range(n):
        match i % 4:
            case 0:
                yield StepEvent(name="research", status="started", part=f"Q{i % 3 + 1}"), 0
            case 1:
                yield SearchEvent(query=f"qdrant cloud pricing {i}", count=5, results=[]), 0
            case 2:
                yield FetchEvent(url=f"https://example.com/page/{i}", ok=True, status=200, text=PAGE), 0
            case _:
                yield ModelResponseEvent(purpose="analyst", model="claude-haiku-5-5", cost_usd=0.002,
                                         response={"content": [{"type": "text", "text": PAGE[:2000]}]}), 2400


def event_writes(url: str, n: int) -> tuple[float, float]:
    """p50 and p99 milliseconds per emitted event."""
    with SqlRunStore(open_database(url)) as store:
        rec = store.recorder("bench-events")
        rec.start(question="How fast are event writes?", options=RunOptions(), models={}, prompt_version="bench")
        laps = []
        for event, tokens in events(n):
            t0 = time.perf_counter()
            rec.emit(event, tokens=tokens)  # type: ignore[arg-type]
            laps.append((time.perf_counter() - t0) * 1000)
        rec.stop()
    laps.sort()
    return statistics.median(laps), laps[int(len(laps) * 0.99)]


def listing(url: str, n: int) -> tuple[float, float, float]:
    """Seconds to fill `n` finished runs, then best and median milliseconds of runs()."""
    result = RunResult(run_id="x", question="How long does listing take?", mode="fixed", status="complete")
    with SqlRunStore(open_database(url)) as store:
        t0 = time.perf_counter()
        for i in range(n):
            rec = store.recorder(f"list{i:06d}")
            rec.start(question=f"Question {i}?", options=RunOptions(), models={"lead": "m"}, prompt_version="b")
            rec.finish(result.model_copy(update={"run_id": f"list{i:06d}"}))
        fill = time.perf_counter() - t0
        store.runs()
        laps = []
        for _ in range(5):
            t0 = time.perf_counter()
            assert len(store.runs()) >= n
            laps.append((time.perf_counter() - t0) * 1000)
    return fill, min(laps), statistics.median(laps)


def _reserver(url: str, k: int, n: int, start: float, out: multiprocessing.Queue[float]) -> None:
    ledger = SpendLedger(open_database(url))
    while time.time() < start:
        time.sleep(0.001)
    t0 = time.perf_counter()
    for i in range(n):
        assert ledger.reserve(f"bench-{k}-{i}", 0.01, 1e9, 0.001) == 0.01
    out.put(time.perf_counter() - t0)


def reservations(url: str, per_writer: int, writers: int = 8) -> float:
    """Reservations per second with `writers` processes reserving at once."""
    queue: multiprocessing.Queue[float] = multiprocessing.Queue()
    start = time.time() + 2.0  # every process connected before the first reservation
    procs = [multiprocessing.Process(target=_reserver, args=(url, k, per_writer, start, queue))
             for k in range(writers)]
    for p in procs:
        p.start()
    longest = max(queue.get(timeout=300) for _ in procs)
    for p in procs:
        p.join()
    return writers * per_writer / longest


def app_memory(url: str, home: Path) -> str:
    """The app's resident memory after the Benchmarks page and the live page unlocked."""
    if not browser.available():
        return "skipped: no Chromium"
    image = lay_out(ROOT, home / "image")
    image.env.update({"RESEARCH_DB": url, "ACCESS_CODE": "bench-access-code-42"})
    started = run_image(image, Path(sys.executable).parent, home)
    try:
        with browser.page() as page:
            page.goto(started.url + "/")
            page.get_by_role("heading", name="Benchmarks").wait_for()
            page.goto(started.url + "/live")
            page.get_by_label("Access code").fill("bench-access-code-42")
            page.get_by_role("button", name="Unlock").click()
            page.get_by_text("Server limits:").wait_for()
        mem = memory_kb(started.proc.pid)
        return f"{mem['VmRSS'] / 1024:.0f} MiB (peak {mem['VmHWM'] / 1024:.0f} MiB)"
    finally:
        stop(started)


@contextmanager
def backends(tmp: Path) -> Iterator[list[tuple[str, str]]]:
    with postgres_server() as server, server.database() as pg_url:
        yield [("SQLite", str(tmp / "bench.sqlite")), ("PostgreSQL", pg_url)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--events", type=int, default=2_000)
    ap.add_argument("--reservations", type=int, default=400, help="per writer process (8 of them)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, backends(Path(tmp)) as dbs:
        for name, url in dbs:
            migrated_database(url).close()
            p50, p99 = event_writes(url, args.events)
            print(f"[{name}] event write: p50 {p50:.3f} ms, p99 {p99:.3f} ms ({args.events:,} events, each its own "
                  "commit)")
            fill, best, median = listing(url, args.runs)
            print(f"[{name}] listing {args.runs:,} runs: best {best:.0f} ms, median {median:.0f} ms "
                  f"(filled in {fill:.1f} s)")
            rate = reservations(url, args.reservations)
            print(f"[{name}] spend reservations, 8 writer processes: {rate:,.0f} per second")
            home = Path(tmp) / f"home-{name}"
            home.mkdir()
            print(f"[{name}] app memory, Benchmarks page and the live page unlocked: {app_memory(url, home)}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    main()
