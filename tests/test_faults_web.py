"""The fault matrix, web columns: the search service down, and pages that are slow, huge or mislabelled.

Page cells serve a good page (/a) beside the faulty one (/b): the run must name /b's failure (its fetch event, and
for a tools worker the FETCH_FAILED result it read), keep what /a gave, and stay "complete", since its report rests
on /a alone; a `sole-` cell serves only the faulty page, and its report must say why nothing could be quoted.
Search cells take the search API down (HTTP 500 or 429 on every try, or nothing listening): the run is "partial"
with a search_failed problem naming the cause, and spends nothing on pages or analysis; a fault a retry clears
leaves the run complete.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline.core.schema import RunResult
from tests.fakes.context import CLOSED_PORT_URL
from tests.fakes.search_apis import Canned
from tests.fakes.web_server import Route
from tests.test_e2e import page
from tests.test_faults import (  # noqa: F401  (servers, world, _one_certificate: fixtures)
    MODES,
    PAGES,
    QUOTE_A,
    QUOTE_B,
    World,
    _one_certificate,
    is_step,
    open_world,
    servers,
    world,
)
from tests.test_fetch import tiny_pdf

CAP = 16_000  # RESEARCH_FETCH_MAX_BYTES in these cells
DEADLINE = 0.5  # RESEARCH_FETCH_DEADLINE
BIG = page("Qdrant plans", QUOTE_B, *["Filler text about vector databases and their many clusters."] * 600)
PRICE_CP1252 = page("Qdrant plans", "Qdrant Cloud pricing for the hybrid plan starts at 99 € or £85 per month.")


@dataclass(frozen=True)
class PageFault:
    """A faulty /b: how it is served, what its fetch must end as, and whether it is a known bug (xfail)."""

    name: str
    route: Route
    error_kind: str | None  # None: fetched (cut at the cap, or decoded)
    bug: str | None = None
    or_readable: bool = False  # also right: fetched as what it really is (a PDF's text, not its source)


def _huge_stream() -> Iterator[bytes]:
    yield BIG.body


def _huge_pdf() -> Iterator[bytes]:
    yield b"%PDF-1.4\n" + b"0" * (2 * CAP)


PAGE_FAULTS = [
    PageFault("slow-body", Route(headers=PAGES["/b"].headers, body=PAGES["/b"].body, drip=0.02), "timeout"),
    PageFault("slow-head", Route(headers=PAGES["/b"].headers, body=PAGES["/b"].body, drip=0.02, drip_head=True),
              "timeout"),
    PageFault("huge-declared", BIG, "too_large"),
    PageFault("huge-streamed", Route.streamed(_huge_stream), None),
    PageFault("huge-pdf", Route.streamed(_huge_pdf, "application/pdf"), "too_large"),
    PageFault("gzip-bomb", Route.gzip_bomb(50 * CAP), "too_large"),
    PageFault("html-as-pdf", Route.content(PAGES["/b"].body, "application/pdf"), "unsupported_type"),
    PageFault("pdf-as-html", Route.content(tiny_pdf(QUOTE_B), "text/html"), "unsupported_type", or_readable=True),
    PageFault("binary-as-text", Route.content(os.urandom(4000), "text/plain"), "unsupported_type"),
    PageFault("wrong-charset", Route.content(PRICE_CP1252.body.decode().encode("cp1252"), "text/html; charset=utf-8"),
              None),
]
SOLE = ("slow-body", "huge-declared")


def _page_cell(mode: str, fault: PageFault, sole: bool = False) -> object:
    marks = [pytest.mark.xfail(strict=True, reason=fault.bug)] if fault.bug else []
    return pytest.param(mode, fault, sole, id=f"{mode}-{'sole-' if sole else ''}{fault.name}", marks=marks)


PAGE_CELLS = ([_page_cell(mode, f) for mode in MODES for f in PAGE_FAULTS]
              + [_page_cell(mode, f, sole=True) for mode in MODES for f in PAGE_FAULTS if f.name in SOLE])


def _fetches(world: World, result: RunResult, path: str) -> list[dict[str, object]]:
    url = world.web.url(path)
    return [e.payload for e in world.store.events(result.run_id, ["fetch"]) if e.payload.get("url") == url]


@pytest.mark.parametrize(("mode", "fault", "sole"), PAGE_CELLS)
def test_page_fault(servers, tmp_path: Path, mode: str, fault: PageFault, sole: bool) -> None:
    routes = {"/b": fault.route} if sole else {"/a": PAGES["/a"], "/b": fault.route}
    with open_world(servers, tmp_path, routes) as world:
        result = world.run(mode, fetch_max_bytes=CAP, fetch_deadline=DEADLINE)
        assert all(p.kind != "internal_error" for p in result.problems), result.problems
        assert (result.status, result.problems) == ("complete", []), result.problems
        [fetched] = _fetches(world, result, "/b")  # fetched once, its failure remembered
        quotes = {f.quote for f in result.findings}
        by_source = {s.url: s.id for s in result.sources}
        for f in result.findings:  # whatever was quoted is verbatim in a page's stored text
            assert f.quote in "".join(str(e.payload.get("text") or "")
                                      for e in world.store.events(result.run_id, ["fetch"]))
        if fault.error_kind is None or (fault.or_readable and fetched["ok"]):  # fetched: cut, decoded or sniffed
            text = str(fetched["text"])
            assert fetched["ok"] and "\ufffd" not in text and "%PDF-" not in text and "endobj" not in text, text
            if fault.name == "huge-streamed":
                assert fetched["truncated"] and any(QUOTE_B in q for q in quotes)  # the top is kept, said to be cut
            return
        assert (fetched["ok"], fetched["error_kind"]) == (False, fault.error_kind), fetched
        assert world.web.url("/b") not in by_source
        if mode == "tools":  # the worker was told why
            told = f"FETCH_FAILED: {fault.error_kind}"
            assert any(r.contains(told) for r in world.fake.message_requests if is_step("worker")(r))
        if sole:  # nothing to quote, and the report says why
            assert result.findings == [] and f"(1 {fault.error_kind})" in result.report.markdown
        else:
            assert QUOTE_A in quotes and QUOTE_B not in quotes
            assert world.fake.count(is_step("analyst")) == (1 if mode == "fixed" else 0)


# -- search ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SearchFault:
    name: str
    canned: Canned | None = None  # served on every request (None: the API is not there at all)
    once: bool = False
    says: str = ""


SEARCH_FAULTS = [
    SearchFault("search-500", Canned.server_error(500), says="HTTP 500"),
    SearchFault("search-429", Canned.rate_limited(retry_after="1"), says="HTTP 429"),
    SearchFault("search-refused", None, says="connection failed"),
    SearchFault("search-500-once", Canned.server_error(500), once=True),
]


@pytest.mark.parametrize("fault", [pytest.param(f, id=f.name) for f in SEARCH_FAULTS])
@pytest.mark.parametrize("mode", MODES)
def test_search_fault(world: World, mode: str, fault: SearchFault) -> None:
    overrides = {}
    if fault.canned is None:
        overrides["search_base_url"] = CLOSED_PORT_URL
    elif fault.once:
        world.search.fail_next(fault.canned)
    else:
        world.search.fail_always(fault.canned)
    result = world.run(mode, **overrides)
    assert all(p.kind != "internal_error" for p in result.problems), result.problems
    if fault.once:  # retried in code, unseen by the model
        assert (result.status, result.problems) == ("complete", [])
        assert len(world.search.requests) == 2 and world.sleeps and {f.quote for f in result.findings} == {
            QUOTE_A, QUOTE_B}
        return
    assert result.status == "partial" and result.findings == [] and world.web.count() == 0
    [problem] = result.problems
    assert (problem.kind, problem.step) == ("search_failed", "research") and fault.says in problem.message
    assert "> All 1 searches failed" in result.report.markdown
    # Nothing was spent on pages that were never found: the plan, and in tools mode the worker's turns.
    assert {is_step(s)(r) for r in world.fake.message_requests for s in ("analyst", "writer", "support_judge")} == {
        False}
    assert len(world.search.requests) == (0 if fault.canned is None else 3)  # three tries, then given up
