"""The app under load: 30 browsing sessions while 2 live runs work, then access-code guessing from many sessions.

    .venv/bin/python benchmarks/perf/load_bench.py [--client ws|browser] [--sessions 30] [--reports 3]
                                                   [--guessers 20] [--addresses 5] [--no-assets]
    .venv/bin/python benchmarks/perf/load_bench.py --compare 3    # the ws client checked against Chromium

Starts the app (`python -m ui.serve`) on the committed benchmark_runs/ with the local fakes of the model, the search
API and a page (tests/fakes), the access code, and one trusted proxy (so X-Forwarded-For names the visitor, as
on Cloud Run). Each session is either a WebSocket-level Streamlit client (`--client ws`, the default:
benchmarks/perf/st_client.py, all sessions on one asyncio loop, so 30 of them cost the 2-core machine little and the
figures are the server's) or a headless Chromium context (`--client browser`: 30 of them saturate 2 cores, and the
times are mostly the browsers' own contention). In order:
1. two sessions unlock the live page and start a fixed-mode run each (the fake model answers after 0.5 s); they stay
   open, polling the run's progress fragment every second as the page's timer does, until the run is finished;
2. `--sessions` sessions at once each open the Benchmarks page and then `--reports` saved reports, one after another
   (a page load each, as following a shared link): time to the rendered page (from the request for the page to
   the script's successful finish, with no exception element, and the page's text there: "N of N runs shown.", the
   report's question), p50 and p95, and errors; the server's resident memory and CPU during and after the load, the
   load average; whether both live runs finished complete;
3. `--guessers` sessions from `--addresses` addresses each try 5 wrong codes: the wrong codes the server counted (at
   most 5 per address and 50 in all), and what the right code from a new address gets then: unlocked while the
   total is under 50, refused for everyone once it is reached (try --addresses 20).
With `--compare N`, only the browsing of step 2, N sessions with each client, and per page whether both saw the
same page: the expected text, the title, the number of elements.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.perf import browser  # noqa: E402
from benchmarks.perf.procstat import memory_kb  # noqa: E402
from benchmarks.perf.st_client import Run, Session, plain  # noqa: E402
from tests.fakes.anthropic_api import FakeAnthropic  # noqa: E402
from tests.fakes.research_brain import ResearchBrain  # noqa: E402
from tests.fakes.search_apis import FakeSearchApi, Hit  # noqa: E402
from tests.fakes.web_server import Route, WebServer  # noqa: E402

CODE = "load-bench-access-code-42"
QUOTE = "Qdrant Cloud pricing starts at 25 dollars per month for the smallest cluster."
TIMEOUT = 180.0


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_app(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "ui.serve"], cwd=ROOT, env={**env, "PORT": str(port)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the app did not start")


# -- what the sessions open ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """One page a session opens, and the text that shows it is rendered."""

    kind: str  # "Benchmarks page" or "report page"
    path: str
    query: str
    expected: str


@dataclass
class Visit:
    kind: str
    seconds: float
    error: str | None
    elements: int = 0  # ws: the page's elements; browser: its element containers in the DOM
    title: str = ""


def saved_runs() -> list[tuple[str, str]]:
    """(run id, question) of every saved run in benchmark_runs/, in file order, as the Benchmarks page counts them."""
    files = sorted(p for p in (ROOT / "benchmark_runs").rglob("*.json")
                   if not p.name.endswith(".timeline.json") and p.name != "summary.json")
    out = []
    for p in files:
        saved = json.loads(p.read_text(encoding="utf-8"))
        out.append((str(saved["run_id"]), str(saved["question"])))
    return out


def targets(session: int, reports: int, runs: list[tuple[str, str]]) -> list[Target]:
    """The Benchmarks page, then `reports` saved reports: session i takes the runs after session i-1's, so the
    sessions together open many different reports, not one."""
    pages = [Target("Benchmarks page", "/", "", f"{len(runs)} of {len(runs)} runs shown.")]
    for k in range(reports):
        run_id, question = runs[(session * reports + k) % len(runs)]
        pages.append(Target("report page", "/report", f"run={run_id}", question))
    return pages


# -- the ws client ---------------------------------------------------------------------------------------------------

def visit_of(t: Target, run: Run) -> Visit:
    error = run.error() or (None if run.has_text(t.expected) else f"{t.expected[:60]!r} is not on the page")
    return Visit(t.kind, run.seconds, error, run.elements, run.headings[0] if run.headings else "")


async def browse_ws(url: str, pages: list[Target], assets: bool) -> list[Visit]:
    s = Session(url, assets=assets, timeout=TIMEOUT)
    visits = []
    try:
        for t in pages:
            visits.append(visit_of(t, await s.open(t.path, t.query)))
    finally:
        await s.close()
    return visits


@dataclass
class Watch:
    """A live run's page, left open: its progress polls and what it showed at the end."""

    session: Session
    run_id: str
    polls: list[float] = field(default_factory=list)
    poll_errors: list[str] = field(default_factory=list)
    final: str = ""
    finished_at: float = 0.0  # time.monotonic() when the page showed the finished run


async def start_run_ws(url: str, question: str, assets: bool) -> Watch:
    s = Session(url, assets=assets, timeout=TIMEOUT)
    run = await s.open("/live")
    for step in ((lambda r: s.submit({"Access code": CODE}, "Unlock", r)),
                 (lambda r: s.submit({"Question": question}, "Start research", r))):
        if run.error() or not run.widgets:
            break
        run = await step(run)
    run_id = parse_qs(s.query_string).get("run", [""])[0]
    if run.error() or not run_id or "Running" not in run.headings:
        raise RuntimeError(f"the live run did not start: {run.error() or run.alerts or run.headings}")
    return Watch(s, run_id)


async def watch_ws(w: Watch) -> None:
    """Poll the progress fragment as the browser's timer does (`auto_rerun`: every second) until the fragment sees the
    run end and reruns the whole page, which then shows the finished run and has no timer left."""
    s = w.session
    while s.auto_reruns:
        fragment, every = next(iter(s.auto_reruns.items()))
        await asyncio.sleep(every)
        run = await s.rerun_fragment(fragment)
        w.polls.append(run.seconds)
        if run.error():
            w.poll_errors.append(run.error() or "")
            if s.ws is None or run.status in ("connection lost", "timed out"):
                break
        if run.status == "finished":  # the fragment's st.rerun(): the whole page, now the finished run
            w.finished_at = time.monotonic()
            w.final = next((plain(body) for kind, body in run.alerts if kind == "SUCCESS"), "") or \
                (run.error() or "no result shown")
    await s.close()


async def guess_ws(url: str, address: str, assets: bool) -> list[str]:
    s = Session(url, headers={"X-Forwarded-For": address}, assets=assets, timeout=TIMEOUT)
    outcomes = []
    try:
        run = await s.open("/live")
        for attempt in range(5):
            if "Access code" not in run.widgets:
                outcomes.append(f"no form: {run.error() or run.alerts}")
                break
            run = await s.submit({"Access code": f"wrong-code-{address}-{attempt}"}, "Unlock", run)
            alerts = [plain(body) for kind, body in run.alerts if kind == "ERROR"]
            outcomes.append(alerts[0] if alerts else f"no alert ({run.error()})")
    finally:
        await s.close()
    return outcomes


async def right_code_ws(url: str, assets: bool) -> str:
    s = Session(url, headers={"X-Forwarded-For": "198.51.100.77"}, assets=assets, timeout=TIMEOUT)
    try:
        run = await s.submit({"Access code": CODE}, "Unlock", await s.open("/live"))
    finally:
        await s.close()
    if run.has_text("Server limits:"):
        return "unlocked"
    return next((plain(body) for kind, body in run.alerts if kind == "ERROR"), run.error() or "neither")


# -- the browser client ----------------------------------------------------------------------------------------------

async def unlock(page: Any, url: str) -> None:
    await page.goto(url + "/live")
    await page.get_by_label("Access code").fill(CODE)
    await page.get_by_role("button", name="Unlock").click()


async def start_run_browser(ctx: Any, url: str, question: str) -> str:
    page = await ctx.new_page()
    page.set_default_timeout(120_000)
    await unlock(page, url)
    await page.get_by_role("textbox", name="Question").fill(question)
    await page.get_by_role("button", name="Start research").click()
    await page.get_by_role("heading", name="Running").wait_for()
    return str(page.url.split("run=")[-1])


async def browse_browser(ctx: Any, url: str, pages: list[Target]) -> list[Visit]:
    page = await ctx.new_page()
    page.set_default_timeout(TIMEOUT * 1000)
    visits = []
    for t in pages:
        try:
            t0 = time.monotonic()
            await page.goto(url + t.path + (f"?{t.query}" if t.query else ""))
            await page.get_by_text(t.expected).first.wait_for()
            seconds = time.monotonic() - t0
            # For the counts, wait for the moment the ws client stops at: the script run finished.
            await page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for()
            elements = await page.locator('[data-testid="stElementContainer"]').count()
            title = await page.locator("h1").first.inner_text()
            visits.append(Visit(t.kind, seconds, None, elements, plain(title)))
        except Exception as e:  # counted as an error of this page view
            visits.append(Visit(t.kind, 0.0, f"{type(e).__name__}: {str(e)[:120]}"))
    await page.close()
    return visits


async def guess_browser(pw_browser: Any, url: str, address: str) -> list[str]:
    ctx = await pw_browser.new_context(extra_http_headers={"X-Forwarded-For": address})
    page = await ctx.new_page()
    page.set_default_timeout(120_000)
    outcomes = []
    await page.goto(url + "/live")
    for attempt in range(5):
        await page.get_by_label("Access code").fill(f"wrong-code-{address}-{attempt}")
        await page.get_by_role("button", name="Unlock").click()
        await page.get_by_role("alert").first.wait_for()
        outcomes.append(await page.get_by_role("alert").first.inner_text())
    await ctx.close()
    return outcomes


async def right_code_browser(pw_browser: Any, url: str) -> str:
    right = await pw_browser.new_context(extra_http_headers={"X-Forwarded-For": "198.51.100.77"})
    page = await right.new_page()
    page.set_default_timeout(120_000)
    await unlock(page, url)
    unlocked, refused = page.get_by_text("Server limits:"), page.get_by_role("alert")
    await unlocked.or_(refused).first.wait_for()
    return "unlocked" if await unlocked.count() else str(await refused.first.inner_text())


# -- measuring the server --------------------------------------------------------------------------------------------

def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


@dataclass
class Sampler:
    """The server's resident memory and the machine's 1-minute load average, sampled every `every` seconds."""

    pid: int
    every: float = 0.5
    rss_kb: list[int] = field(default_factory=list)
    load: list[float] = field(default_factory=list)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.rss_kb.append(memory_kb(self.pid)["VmRSS"])
            self.load.append(loadavg())
            try:
                await asyncio.wait_for(stop.wait(), self.every)
            except TimeoutError:
                pass


async def measured(pid: int, work: Awaitable[Any]) -> tuple[Any, dict[str, Any]]:
    """Run `work`, sampling the server meanwhile: its result and the figures (wall, memory, CPU, load)."""
    stop, sampler = asyncio.Event(), Sampler(pid)
    rss_before, cpu_before, load_before = memory_kb(pid)["VmRSS"], cpu_seconds(pid), loadavg()
    client_before = resource.getrusage(resource.RUSAGE_SELF)
    task = asyncio.create_task(sampler.run(stop))
    t0 = time.monotonic()
    try:
        result = await work
    finally:
        wall = time.monotonic() - t0
        stop.set()
        await task
    client = resource.getrusage(resource.RUSAGE_SELF)
    return result, {
        "t0": t0, "wall": wall, "rss_before": rss_before, "rss_peak": max(sampler.rss_kb or [0]),
        "rss_end": memory_kb(pid)["VmRSS"], "hwm": memory_kb(pid)["VmHWM"],
        "server_cpu": cpu_seconds(pid) - cpu_before,
        "client_cpu": client.ru_utime + client.ru_stime - client_before.ru_utime - client_before.ru_stime,
        "load": [load_before, *sampler.load, loadavg()]}


def db_statuses(db: Path, run_ids: list[str]) -> list[str]:
    with sqlite3.connect(db) as con:
        found = dict(con.execute(f"SELECT id, status FROM runs WHERE id IN ({','.join('?' * len(run_ids))})",
                                 run_ids).fetchall())
    return [str(found.get(r, "missing")) for r in run_ids]


# -- the whole load, either client -----------------------------------------------------------------------------------

async def run_load(url: str, client: str, sessions: int, reports: int, guessers: int, addresses: int, assets: bool,
                   pid: int, db: Path) -> dict[str, Any]:
    runs = saved_runs()
    plans = [targets(i, reports, runs) for i in range(sessions)]
    questions = [f"What does Qdrant Cloud pricing start at? ({i})" for i in range(2)]
    out: dict[str, Any] = {}
    if client == "ws":
        watches = list(await asyncio.gather(*(start_run_ws(url, q, assets) for q in questions)))
        live_ids = [w.run_id for w in watches]
        watchers = [asyncio.create_task(watch_ws(w)) for w in watches]
        out["live_at_start"] = db_statuses(db, live_ids)
        results, out["load"] = await measured(pid, asyncio.gather(*(browse_ws(url, p, assets) for p in plans)))
        out["live_at_end"] = db_statuses(db, live_ids)
        out["memory_after"] = memory_kb(pid)
        out["guesses"] = await asyncio.gather(*(guess_ws(url, f"203.0.113.{i % addresses + 1}", assets)
                                                for i in range(guessers)))
        out["right"] = await right_code_ws(url, assets)
        try:
            await asyncio.wait_for(asyncio.gather(*watchers), TIMEOUT)
        except TimeoutError:
            pass
        out["watches"] = watches
    else:
        from playwright.async_api import async_playwright

        async with async_playwright() as p:
            pw_browser = await p.chromium.launch(executable_path=browser.CHROMIUM, args=browser.ARGS)
            live_ctx = [await pw_browser.new_context() for _ in questions]
            live_ids = list(await asyncio.gather(*(start_run_browser(c, url, q)
                                                   for c, q in zip(live_ctx, questions, strict=True))))
            out["live_at_start"] = db_statuses(db, live_ids)
            contexts = [await pw_browser.new_context() for _ in range(sessions)]
            results, out["load"] = await measured(pid, asyncio.gather(*(browse_browser(c, url, p)
                                                                        for c, p in zip(contexts, plans, strict=True))))
            out["live_at_end"] = db_statuses(db, live_ids)
            out["memory_after"] = memory_kb(pid)
            for c in contexts:
                await c.close()
            out["guesses"] = await asyncio.gather(*(guess_browser(pw_browser, url, f"203.0.113.{i % addresses + 1}")
                                                    for i in range(guessers)))
            out["right"] = await right_code_browser(pw_browser, url)
            await pw_browser.close()
        out["watches"] = []
    out["visits"] = [v for session in results for v in session]
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        out["statuses"] = db_statuses(db, live_ids)
        if "running" not in out["statuses"]:
            break
        await asyncio.sleep(1)
    out["live_ids"] = live_ids
    with sqlite3.connect(db) as con:
        out["counted"] = con.execute("SELECT COUNT(*), COUNT(DISTINCT visitor) FROM wrong_codes").fetchone()
        out["per_visitor"] = [n for (n,) in con.execute("SELECT COUNT(*) FROM wrong_codes GROUP BY visitor")]
    return out


async def run_compare(url: str, sessions: int, reports: int,
                      assets: bool) -> tuple[list[Target], list[Visit], list[Visit]]:
    """`sessions` sessions with each client, the ws ones first, then the browsers, each set at once."""
    from playwright.async_api import async_playwright

    runs = saved_runs()
    plans = [targets(i, reports, runs) for i in range(sessions)]
    ws = list(await asyncio.gather(*(browse_ws(url, p, assets) for p in plans)))
    async with async_playwright() as p:
        pw_browser = await p.chromium.launch(executable_path=browser.CHROMIUM, args=browser.ARGS)
        contexts = [await pw_browser.new_context() for _ in range(sessions)]
        br = list(await asyncio.gather(*(browse_browser(c, url, p) for c, p in zip(contexts, plans, strict=True))))
        await pw_browser.close()
    return [t for plan in plans for t in plan], [v for s in ws for v in s], [v for s in br for v in s]


# -- printing --------------------------------------------------------------------------------------------------------

def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile: the smallest value with at least q of the values at or below it."""
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def times_line(name: str, times: list[float]) -> str:
    times = sorted(times)
    return (f"{name}: p50 {statistics.median(times):.2f} s, p95 {percentile(times, 0.95):.2f} s, "
            f"max {times[-1]:.2f} s ({len(times)} views)")


def mib(kb: int) -> str:
    return f"{kb / 1024:.0f} MiB"


def report(out: dict[str, Any], args: argparse.Namespace) -> None:
    visits: list[Visit] = out["visits"]
    ok = [v for v in visits if v.error is None]
    errors = [v.error for v in visits if v.error is not None]
    how = ("ws: WebSocket-level Streamlit clients on one asyncio loop" + (
        ", each fetching the entry scripts index.html names with its first page" if args.assets else "")
        if args.client == "ws" else "browser: headless Chromium contexts in one browser")
    print(f"client: {how}")
    print(f"{args.sessions} sessions at once, each: the Benchmarks page, then {args.reports} report pages")
    for kind in ("Benchmarks page", "report page"):
        times = [v.seconds for v in ok if v.kind == kind]
        if times:
            print("  " + times_line(f"{kind}, time to rendered page", times))
    if ok:
        print("  " + times_line("every page", [v.seconds for v in ok]))
    print(f"  errors: {len(errors)} of {len(visits)} page views" + (f" (first: {errors[0]})" if errors else ""))
    if args.client == "ws" and ok:
        per_kind = {k: sorted({v.elements for v in ok if v.kind == k}) for k in ("Benchmarks page", "report page")}
        print("  elements per rendered page: " + "; ".join(f"{k} {v[0]}-{v[-1]}" if v[0] != v[-1] else f"{k} {v[0]}"
                                                        for k, v in per_kind.items() if v))
    load = out["load"]
    print(f"  all sessions done in {load['wall']:.1f} s; server CPU {load['server_cpu']:.1f} s in that time "
          f"({100 * load['server_cpu'] / load['wall']:.0f}% of one core); this script's CPU {load['client_cpu']:.1f} s")
    print(f"  server memory (RSS): {mib(load['rss_before'])} before the sessions, peak {mib(load['rss_peak'])} "
          f"sampled during them (VmHWM {mib(load['hwm'])}), {mib(load['rss_end'])} at their end, "
          f"{mib(out['memory_after']['VmRSS'])} after the sockets closed")
    la = load["load"]
    print(f"  load average (1 min) during the sessions: {la[0]:.2f} at the start, max {max(la):.2f}, "
          f"{la[-1]:.2f} at the end (2 cores)")
    print(f"live runs {out['live_ids']}: {out['live_at_start']} when the sessions started, {out['live_at_end']} when "
          f"they ended; finally {out['statuses']}")
    for w in out["watches"]:
        polls = sorted(w.polls)
        if polls:
            print(f"  run {w.run_id}'s page: {len(polls)} progress polls, p50 {statistics.median(polls):.2f} s, "
                  f"p95 {percentile(polls, 0.95):.2f} s, {len(w.poll_errors)} errors; then showed: "
                  f"{w.final or 'nothing final'}"
                  + (f" ({w.finished_at - load['t0']:.1f} s after the sessions started)" if w.finished_at else ""))
    total, visitors = out["counted"]
    print(f"guessing: {args.guessers} sessions from {args.addresses} addresses, 5 wrong codes each: {total} counted "
          f"from {visitors} visitors (at most {max(out['per_visitor'] or [0])} per visitor; limits 5 and 50)")
    answers: dict[str, int] = {}
    for outcomes in out["guesses"]:
        for o in outcomes:
            key = " ".join(o.split())[:70]
            answers[key] = answers.get(key, 0) + 1
    for text, n in sorted(answers.items(), key=lambda kv: -kv[1])[:4]:
        print(f"  {n} x {text}")
    print(f"the right code from a new address afterwards: {' '.join(out['right'].split())[:140]}")


def report_compare(pages: list[Target], flat_ws: list[Visit], flat_br: list[Visit]) -> None:
    print("page                                 | ws: s, elements, text, title         | browser: s, elements, text")
    same = 0
    for t, w, b in zip(pages, flat_ws, flat_br, strict=True):
        name = (t.path + ("?" + t.query if t.query else ""))[:36]
        agree = w.error is None and b.error is None and w.title == b.title
        same += agree
        print(f"{name:36} | {w.seconds:5.2f} {w.elements:3} {'ok' if w.error is None else w.error[:30]:>4} "
              f"{w.title[:22]!r:24} | {b.seconds:5.2f} {b.elements:3} {'ok' if b.error is None else b.error[:30]:>4}"
              + ("" if w.title == b.title else f" title {b.title[:30]!r}"))
    print(f"{same} of {len(flat_ws)} page views: both clients saw the page's text and the same title")
    for name, visits in (("ws", flat_ws), ("browser", flat_br)):
        ok = [v.seconds for v in visits if v.error is None]
        if ok:
            print(times_line(f"{name}, time to rendered page", ok))


@contextmanager
def app_with_fakes(latency: float) -> Iterator[tuple[str, int, Path]]:
    """The app on a free port with the fake model, search and page: its URL, its PID and its database."""
    brain = ResearchBrain()
    brain.latency = latency
    page = Route.html(f"<html><head><title>Qdrant pricing</title></head><body><article><h1>Qdrant pricing</h1>"
                      f"<p>Qdrant is an open-source vector database.</p><p>{QUOTE}</p></article></body></html>")
    with tempfile.TemporaryDirectory() as tmp, WebServer({"/qdrant": page}) as web, \
            FakeSearchApi("brave", [Hit(title="Qdrant", url=web.url("/qdrant"), snippet="pricing")],
                          api_key="brave-key") as search, FakeAnthropic(brain) as model:
        db = Path(tmp) / "state" / "research.sqlite"
        env = {**os.environ, "RESEARCH_DB": str(db), "ACCESS_CODE": CODE, "ANTHROPIC_API_KEY": "sk-ant-load",
               "ANTHROPIC_BASE_URL": model.base_url, "RESEARCH_SEARCH_PROVIDER": "brave",
               "BRAVE_API_KEY": "brave-key", "RESEARCH_SEARCH_BASE_URL": search.base_url,
               "RESEARCH_FETCH_ALLOW": web.host_port, "RESEARCH_TRUSTED_PROXIES": "1",
               "RESEARCH_LIVE_MAX_CONCURRENT": "2", "HOME": tmp}
        port = free_port()
        proc = start_app(env, port)
        try:
            yield f"http://127.0.0.1:{port}", proc.pid, db
        finally:
            proc.terminate()
            proc.wait(15)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--client", choices=("ws", "browser"), default="ws")
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--reports", type=int, default=3, help="report pages each session opens after the Benchmarks page")
    ap.add_argument("--guessers", type=int, default=20)
    ap.add_argument("--addresses", type=int, default=5)
    ap.add_argument("--no-assets", dest="assets", action="store_false",
                    help="ws: skip the entry scripts a new browser fetches with its first page")
    ap.add_argument("--model-latency", type=float, default=0.5, help="seconds the fake model takes per answer")
    ap.add_argument("--compare", type=int, metavar="N", default=0,
                    help="only browse, N sessions with each client, and compare what they saw")
    args = ap.parse_args()
    if (args.client == "browser" or args.compare) and not browser.available():
        raise SystemExit("needs Debian's chromium at /usr/bin/chromium")
    with app_with_fakes(args.model_latency) as (url, pid, db):
        if args.compare:
            compared = asyncio.run(run_compare(url, args.compare, args.reports, args.assets))
        else:
            out = asyncio.run(run_load(url, args.client, args.sessions, args.reports, args.guessers, args.addresses,
                                       args.assets, pid, db))
    if args.compare:
        report_compare(*compared)
    else:
        report(out, args)


if __name__ == "__main__":
    main()
