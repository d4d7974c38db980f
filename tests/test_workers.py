"""Extraction in worker processes (pipeline/web/workers.py): pages are read outside this process, under CPU,
memory and output budgets; a worker that overruns or dies is replaced, and the fetch or run goes on."""
from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from pipeline.config import Settings
from pipeline.core.event_types import FetchEvent
from pipeline.core.events import ListSink
from pipeline.core.schema import RunOptions
from pipeline.research.orchestrator import research
from pipeline.web import extract
from pipeline.web.corpus import CorpusPage, build_corpus
from pipeline.web.documents import Document
from pipeline.web.extract import ExtractionError, TooCostly
from pipeline.web.workers import PREFIX_MIN_BYTES, Limits, WorkerPool, default_pool
from tests.fakes.slow_pages import SENTENCE, slow_pages
from tests.fakes.web_server import Route, WebServer
from tests.test_fetch import fetcher_for

ARTICLE = "<html><body><article><p>" + "A sentence of the article body. " * 40 + "</p></article></body></html>"


def paragraphs(n: int, first: str = SENTENCE) -> str:
    """A page of `n` short paragraphs after `first`: about 0.1 ms of CPU each to read."""
    return f"<html><body><p>{first}</p>" + "".join(f"<p>Paragraph {i} of a long page.</p>" for i in range(n)) + \
        "</body></html>"


@pytest.fixture()
def pool() -> Iterator[WorkerPool]:
    p = WorkerPool(size=2, limits=Limits(cpu_seconds=30))  # only a kill, never the budget, stops a page here
    yield p
    p.close()


def doc(body: str | bytes, kind: str = "html") -> Document:
    return Document(kind=kind, body=body.encode() if isinstance(body, str) else body,  # type: ignore[arg-type]
                    url="https://example.com/a")


def test_pages_are_read_in_a_worker_never_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    def in_this_process(html: str, url: str | None) -> extract.Extracted:
        raise AssertionError("a page was parsed in the agent's process")

    monkeypatch.setattr(extract, "_extract_html", in_this_process)
    with WebServer({"/a": Route.html(ARTICLE), "/t": Route.content(b"Plain words.", "text/plain")}) as server:
        fetcher, _ = fetcher_for(server)
        page, text = fetcher.fetch(server.url("/a")), fetcher.fetch(server.url("/t"))
    assert page.ok and page.text and page.text.startswith("A sentence of the article body."), page
    assert text.ok and text.text == "Plain words."
    assert default_pool().started >= 1


def test_a_page_past_its_cpu_budget_is_read_from_its_first_bytes_and_marked_truncated() -> None:
    costs: list[float] = []
    roomy = WorkerPool(size=1, limits=Limits(cpu_seconds=4))
    try:  # about 6 s of CPU whole; its first eighth under 1 s, within the 2 s left for it
        got = roomy.read(doc(paragraphs(100_000)), costs)
    finally:
        roomy.close()
    assert got.truncated and SENTENCE in got.text
    assert got.truncated_reason and "needed more than 4 s of CPU" in got.truncated_reason
    assert "Paragraph 99999" not in got.text
    assert len(costs) == 2 and costs[0] <= 4 + 0.5  # stopped at its budget, then read again from the top


def test_a_page_too_slow_even_from_its_first_bytes_is_refused_with_the_figure() -> None:
    slow = WorkerPool(size=1, limits=Limits(cpu_seconds=0.2))
    nested = next(p for p in slow_pages() if p.name == "200k nested divs")
    try:
        with WebServer({"/deep": Route.content(nested.body, "text/html"), "/a": Route.html(ARTICLE)}) as server:
            fetcher, _ = fetcher_for(server, extract=slow.read)
            refused, after = fetcher.fetch(server.url("/deep")), fetcher.fetch(server.url("/a"))
        assert not refused.ok and refused.error_kind == "too_large", refused
        assert "too_slow" in (refused.error or "") and "0.2 s of CPU" in (refused.error or "")
        assert after.ok  # the overrun worker was replaced; the next page is read
        assert slow.started == 3  # one retired after the whole page, one after its first bytes, one reads /a
    finally:
        slow.close()


def test_the_text_is_capped_and_marked_truncated() -> None:
    capped = WorkerPool(size=1, limits=Limits(max_text_chars=500))
    try:
        got = capped.read(doc(ARTICLE.replace("</p>", "</p><p>" + "Another line of the body. " * 10 + "</p>")))
    finally:
        capped.close()
    assert len(got.text) <= 500 and got.truncated
    assert got.truncated_reason and "output cap" in got.truncated_reason


def test_a_worker_past_its_memory_limit_is_refused_and_replaced() -> None:
    small = WorkerPool(size=1, limits=Limits(cpu_seconds=60, max_memory_mb=200))
    try:
        big = small.read(doc(ARTICLE))  # the worker starts within the limit and reads an ordinary page
        with pytest.raises(TooCostly) as refused:
            small.read(doc(paragraphs(100_000)))  # lxml's tree of 100,000 elements needs more than that
        again = small.read(doc(ARTICLE))
    finally:
        small.close()
    assert big.text and again.text
    assert str(refused.value) == "the page needed more memory than a worker may use (200 MB)"
    assert small.started == 2


def kill_when_busy(pool: WorkerPool, sig: signal.Signals, busy_for: float = 0.3) -> threading.Thread:
    """Kill the first worker seen reading one page for longer than `busy_for` seconds."""
    def watch() -> None:
        since: dict[int, float] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            now = time.monotonic()
            busy = set(pool.busy_pids())
            since = {pid: since.get(pid, now) for pid in busy}
            for pid, started in since.items():
                if now - started > busy_for:
                    os.kill(pid, sig)
                    return
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    return watcher


def test_a_worker_killed_mid_page_refuses_that_page_and_is_replaced(pool: WorkerPool) -> None:
    watcher = kill_when_busy(pool, signal.SIGKILL)
    with pytest.raises(ExtractionError) as refused:
        pool.read(doc(paragraphs(30_000)))
    watcher.join()
    assert "extraction worker stopped while reading the page (killed by SIGKILL)" in str(refused.value)
    assert pool.read(doc(ARTICLE)).text
    assert pool.started == 2


def table(rows: int, columns: int = 50) -> str:
    cells = "".join("<tr>" + "".join(f"<td>r{r}c{c}</td>" for c in range(columns)) + "</tr>" for r in range(rows))
    return f"<html><body><p>{SENTENCE}</p><table>{cells}</table></body></html>"


def test_a_worker_ended_by_its_cpu_rlimit_is_reported_as_too_slow(pool: WorkerPool) -> None:
    page = table(250)  # under PREFIX_MIN_BYTES, so it is not read again from its first bytes; about 1 s of CPU
    assert len(page) < PREFIX_MIN_BYTES
    watcher = kill_when_busy(pool, signal.SIGXCPU, busy_for=0.2)  # what the kernel sends at RLIMIT_CPU's soft limit
    with pytest.raises(TooCostly, match=r"^too_slow: the page needed more than 30 s of CPU"):
        pool.read(doc(page))
    watcher.join()


def test_pages_are_read_in_parallel_and_a_slow_one_delays_no_other(pool: WorkerPool) -> None:
    """One page that costs seconds occupies one worker; the small pages fetched meanwhile all finish first."""
    finished: dict[str, float] = {}
    routes = {"/slow": Route.html(paragraphs(40_000))} | {f"/p{i}": Route.html(ARTICLE) for i in range(6)}
    with WebServer(routes) as server:
        fetcher, _ = fetcher_for(server, extract=pool.read)

        def fetch(path: str) -> None:
            if fetcher.fetch(server.url(path)).ok:
                finished[path] = time.monotonic()

        slow = threading.Thread(target=fetch, args=("/slow",))
        slow.start()
        while not pool.busy_pids():
            time.sleep(0.01)
        small = [threading.Thread(target=fetch, args=(f"/p{i}",)) for i in range(6)]
        for t in small:
            t.start()
        for t in [*small, slow]:
            t.join()
    assert all(finished[f"/p{i}"] < finished["/slow"] for i in range(6)), finished


def test_every_slow_page_ends_within_its_budget_with_text_or_a_named_refusal() -> None:
    limits = Limits(cpu_seconds=3, pdf_cpu_seconds=6)
    slow = WorkerPool(size=2, limits=limits)
    outcomes: dict[str, str] = {}

    def read(name: str, document: Document, has_sentence: bool) -> None:
        if name == "PDF of glyph-name tokens":
            with pytest.raises(ExtractionError, match="garbled"):
                slow.read(document)
            outcomes[name] = "text"  # read, and refused for what it holds
            return
        costs: list[float] = []
        try:
            got = slow.read(document, costs)
            outcomes[name] = "text" if (SENTENCE in got.text) == has_sentence else f"wrong text: {got.text[:80]!r}"
        except ExtractionError as e:
            outcomes[name] = f"refused: {e}"
        budget = limits.pdf_cpu_seconds + limits.cpu_seconds if document.kind == "pdf" else limits.cpu_seconds
        assert all(c <= budget + 1 for c in costs), (name, costs)

    threads = [threading.Thread(target=read, args=(p.name, doc(p.body, p.kind), p.has_sentence))
               for p in slow_pages()]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=3 * (limits.pdf_cpu_seconds + limits.cpu_seconds) + 10 * len(threads))
    finally:
        slow.close()
    assert len(outcomes) == len(threads), outcomes
    for name, outcome in outcomes.items():
        assert outcome == "text" or outcome.startswith("refused: too_slow"), (name, outcome)
    assert outcomes["20k nested divs"] == outcomes["200k nested divs"] == "text"  # deep text is read
    assert outcomes["10 kB glyph-name token"] == outcomes["PDF of 10,000 tiny pages"] == "text"


def test_a_run_completes_when_a_worker_is_killed_mid_page(tmp_path: os.PathLike[str]) -> None:
    root = os.path.join(tmp_path, "web")
    bridge = ("<html><head><title>Harbour bridge budget approved</title></head><body><article>"
              f"<p>{SENTENCE}</p><p>The vote was seven to two.</p></article></body></html>")
    tunnel = paragraphs(60_000, first="The new river tunnel is 4.2 kilometres long, the longest in the region.")
    build_corpus([CorpusPage("https://news.example/bridge", bridge.encode(), title="Harbour bridge budget approved"),
                  CorpusPage("https://slow.example/tunnel", tunnel.encode(), title="How long is the new river tunnel")],
                 root).close()
    pool = default_pool()
    before = pool.started
    watcher = kill_when_busy(pool, signal.SIGKILL, busy_for=1.0)  # only the tunnel page takes this long
    settings = Settings(corpus_dir=root, db_path=os.path.join(tmp_path, "runs.db"))
    sink = ListSink()
    result = research("When did the committee approve the harbour bridge budget, and how long is the new river "
                      "tunnel?", settings, options=RunOptions(mode="extractive"), events=sink)
    watcher.join()
    assert result.status == "complete", result.status
    assert any("Tuesday" in f.quote for f in result.findings), [f.quote for f in result.findings]
    assert not any("tunnel" in f.quote for f in result.findings)  # its page was refused, not read
    fetches = [e.event for e in sink.events if isinstance(e.event, FetchEvent)]  # on the record, with its reason
    refused = [e for e in fetches if e.url == "https://slow.example/tunnel"]
    assert refused and not refused[0].ok and "extraction worker stopped" in (refused[0].error or ""), fetches
    # The killed worker was replaced: as many pages at once as the pool is wide (each about 0.3 s, so they overlap)
    # need a worker more than the ones left alive. (One page may find a live sibling idle: replacement is lazy.)
    with ThreadPoolExecutor(pool.size) as threads:
        texts = list(threads.map(lambda _: pool.read(doc(paragraphs(5_000))).text, range(pool.size)))
    assert all(texts) and pool.started > before
