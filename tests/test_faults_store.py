"""The fault matrix, run store column: the database fills up or turns read-only at each step of a run.

Each cell asserts that the run stops there with RunNotRecorded (a StoreError) carrying its RunResult (status
"failed", or "partial" when only the result itself could not be saved) and a "store_failed" problem naming the
database, RESEARCH_DB and the fix; that what was recorded before stays recorded; and that once the database is
writable again `resume` completes the run, sending only the calls whose answers were never recorded.

A full disk is SQLite's own "database or disk is full" (PRAGMA max_page_count caps the file where it stands), a
read-only one its "attempt to write a readonly database" (PRAGMA query_only): both on the store's connection, from
the moment the step's first request reaches the fake model (or, for fixed mode's research, its first page is
served). The CLI subset is in tests/test_faults_cli.py, which also fills a real (tmpfs) disk under a CLI process.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pipeline.research.orchestrator import RunNotRecorded
from pipeline.store.base import StoreError
from pipeline.store.database import Database
from tests.fakes.anthropic_api import MessagesRequest
from tests.fakes.web_server import Route
from tests.test_faults import (  # noqa: F401  (servers, _one_certificate: fixtures)
    PAGES,
    STEPS,
    TARGET,
    World,
    _one_certificate,
    baseline,
    once,
    open_world,
    servers,
    step_of,
)


def fill_disk(db: Database) -> None:
    """The database file may not grow any more (SQLite's max_page_count), and the room left in its pages is taken by
    rows of a run that does not exist, as other files take a disk's last bytes: the next event written needs a page
    there is no room for, and fails as on a full disk ("database or disk is full")."""
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').rows[0][0]}")
    seq = 0
    for size in (4096, 512, 64, 8, 1, 0):
        try:
            while True:
                seq += 1
                db.execute("INSERT INTO events (run_id, seq, kind, payload, tokens, ms, at) VALUES (?,?,?,?,0,0,0)",
                           ("~disk-filler", seq, "filler", "x" * size))
        except StoreError:
            continue


FILL: dict[str, Callable[[Database], object]] = {
    "disk-full": fill_disk,
    "read-only": lambda db: db.execute("PRAGMA query_only = 1"),
}
FREE: dict[str, Callable[[Database], object]] = {
    "disk-full": lambda db: db.execute("PRAGMA max_page_count = 1073741823"),
    "read-only": lambda db: db.execute("PRAGMA query_only = 0"),
}
SAYS = {"disk-full": "database or disk is full", "read-only": "readonly database"}
# The orchestrator step running when the store fails at each point of the run ("fetch": fixed mode's first page).
# Support judging overlaps tools mode's workers; fixed mode judges in batches once the analyst is done.
AT = {"plan": "plan", "fetch": "research", "worker": "research", "analyst": "analyse",
      "support_judge": {"fixed": "judge", "tools": "research"}, "writer": "write", "sentence_judge": "write",
      "result": "result"}
POINTS = {"fixed": ("plan", "fetch", "analyst", "support_judge", "writer", "sentence_judge", "result"),
          "tools": ("plan", "worker", "support_judge", "writer", "sentence_judge", "result")}
assert all(set(POINTS[m]) - {"fetch", "result"} <= set(STEPS[m]) for m in POINTS)
CELLS = [pytest.param(mode, point, how, id=f"{mode}-{point}-{how}")
         for mode in POINTS for point in POINTS[mode] for how in FILL]


@pytest.fixture()
def world(servers, tmp_path: Path, mode: str, point: str, how: str) -> Iterator[World]:
    """The usual world, with the store's disk filling (or turning read-only) at `point`."""
    routes = dict(PAGES)
    holder: list[World] = []
    fill = once(lambda: FILL[how](holder[0].store.db))
    if point == "fetch":
        body = PAGES["/a"].body

        def first_page() -> Iterator[bytes]:
            fill()
            yield body

        routes["/a"] = Route.streamed(first_page)
    with open_world(servers, tmp_path, routes) as w:
        holder.append(w)
        if point == "result":
            finish = w.store.finish_run

            def fill_then_finish(*args: object, **kwargs: object) -> None:
                fill()
                finish(*args, **kwargs)  # type: ignore[arg-type]

            w.store.finish_run = fill_then_finish  # type: ignore[method-assign]
        elif point != "fetch":
            hits = TARGET.get(point) or (lambda r, p=point: step_of(r) == p)  # type: ignore[misc]

            def watch(r: MessagesRequest) -> None:
                if hits(r):
                    fill()

            w.fake.on_request(watch)
        yield w


@pytest.mark.parametrize(("mode", "point", "how"), CELLS)
def test_store_fault(world: World, mode: str, point: str, how: str, tmp_path_factory: pytest.TempPathFactory
                     ) -> None:
    base = baseline(mode, 1, tmp_path_factory.mktemp(f"baseline-{mode}"))
    with pytest.raises(RunNotRecorded) as stopped:
        world.run(mode)
    result = stopped.value.result
    run_id = result.run_id
    assert not world.fake.handler_errors

    # Honest status, the problem named with the store, its error and the fix; the run is resumable, not finished.
    assert result.status == ("partial" if point == "result" else "failed")
    [problem] = [p for p in result.problems if p.kind == "store_failed"]
    at = AT[point] if isinstance(AT[point], str) else AT[point][mode]  # type: ignore[index]
    assert problem.step == at and str(stopped.value) == problem.message
    for said in (str(world.db), SAYS[how], "RESEARCH_DB", "Free space", f"resume run {run_id}"):
        assert said in problem.message, problem.message
    row = world.store.run(run_id)
    assert row is not None and row.status == "running" and world.store.result(run_id) is None

    # Nothing recorded is lost: every finding recorded is in the result; from the judge on, all of them.
    recorded = [e.payload["id"] for e in world.store.events(run_id, ["finding"])]
    assert set(recorded) <= {f.id for f in result.findings}
    if at in ("judge", "write", "result"):
        assert {f.quote for f in result.findings} == base.quotes and len(recorded) == len(base.quotes)

    # Once the disk has room again, resume finishes the run, sending only what was never recorded.
    FREE[how](world.store.db)
    answered = len(world.store.events(run_id, ["model_response"]))
    sent_before = len(world.fake.requests)
    resumed = world.resume(run_id)
    assert resumed.run_id == run_id and (resumed.status, resumed.problems) == ("complete", [])
    assert {f.quote for f in resumed.findings} == base.quotes
    assert len(world.fake.requests) - sent_before == sum(base.counts.values()) - answered
    assert resumed.usage.model_calls == base.model_calls
    assert world.store.result(run_id) == resumed
    assert world.web.count("/a") <= 2 and world.web.count("/b") <= 2 and len(world.search.requests) == 1
