"""The app under load: 30 browsing sessions while 2 live runs work, then access-code guessing from many sessions.

    .venv/bin/python benchmarks/perf/load_bench.py [--sessions 30] [--guessers 20] [--addresses 5]

Starts the app (`python -m ui.serve`) on the committed benchmark_runs/ with the local fakes of the model, the search
API and a page (tests/fakes), the access code, and one trusted proxy (so X-Forwarded-For names the visitor, as
on Cloud Run). In one headless Chromium:
1. two sessions unlock the live page and start a fixed-mode run each (the fake model answers after 0.5 s);
2. `--sessions` sessions at once each open the Benchmarks page and then a saved report: time to the rendered page,
   p50 and p95, and errors; the server's resident memory afterwards; whether both live runs finished complete;
3. `--guessers` sessions from `--addresses` addresses each try 5 wrong codes at once: the wrong codes the server
   counted (at most 5 per address and 50 in all), and what the right code from a new address gets then: unlocked
   while the total is under 50, refused for everyone once it is reached (try --addresses 20).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.perf import browser  # noqa: E402
from benchmarks.perf.procstat import memory_kb  # noqa: E402
from tests.fakes.anthropic_api import FakeAnthropic  # noqa: E402
from tests.fakes.research_brain import ResearchBrain  # noqa: E402
from tests.fakes.search_apis import FakeSearchApi, Hit  # noqa: E402
from tests.fakes.web_server import Route, WebServer  # noqa: E402

CODE = "load-bench-access-code-42"
QUOTE = "Qdrant Cloud pricing starts at 25 dollars per month for the smallest cluster."


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


async def unlock(page: Any, url: str) -> None:
    await page.goto(url + "/live")
    await page.get_by_label("Access code").fill(CODE)
    await page.get_by_role("button", name="Unlock").click()


async def start_run(ctx: Any, url: str, question: str) -> str:
    page = await ctx.new_page()
    page.set_default_timeout(120_000)
    await unlock(page, url)
    await page.get_by_role("textbox", name="Question").fill(question)
    await page.get_by_role("button", name="Start research").click()
    await page.get_by_role("heading", name="Running").wait_for()
    return str(page.url.split("run=")[-1])


async def browse(ctx: Any, url: str, runs: int, report: tuple[str, str]) -> tuple[float, float, str | None]:
    page = await ctx.new_page()
    page.set_default_timeout(180_000)
    try:
        t0 = time.monotonic()
        await page.goto(url + "/")
        await page.get_by_text(f"{runs} of {runs} runs shown.").wait_for()
        first = time.monotonic() - t0
        t0 = time.monotonic()
        await page.goto(f"{url}/report?run={report[0]}")
        await page.get_by_text(report[1]).first.wait_for()
        return first, time.monotonic() - t0, None
    except Exception as e:  # counted as an error of this session
        return 0.0, 0.0, f"{type(e).__name__}: {str(e)[:120]}"


async def guess(pw_browser: Any, url: str, address: str) -> list[str]:
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


async def run(url: str, sessions: int, guessers: int, addresses: int, server_pid: int, db: Path) -> dict[str, Any]:
    from playwright.async_api import async_playwright

    runs = sorted(p for p in (ROOT / "benchmark_runs").rglob("*.json")
                  if not p.name.endswith(".timeline.json") and p.name != "summary.json")
    saved = json.loads(runs[0].read_text(encoding="utf-8"))
    async with async_playwright() as p:
        pw_browser = await p.chromium.launch(executable_path=browser.CHROMIUM, args=browser.ARGS)
        live_ctx = [await pw_browser.new_context() for _ in range(2)]
        live_runs = await asyncio.gather(*(start_run(c, url, f"What does Qdrant Cloud pricing start at? ({i})")
                                           for i, c in enumerate(live_ctx)))
        contexts = [await pw_browser.new_context() for _ in range(sessions)]
        started = time.monotonic()
        results = await asyncio.gather(*(browse(c, url, len(runs), (saved["run_id"], saved["question"]))
                                         for c in contexts))
        wall = time.monotonic() - started
        memory = memory_kb(server_pid)
        for c in contexts:
            await c.close()
        guesses = await asyncio.gather(*(guess(pw_browser, url, f"203.0.113.{i % addresses + 1}")
                                         for i in range(guessers)))
        right = await pw_browser.new_context(extra_http_headers={"X-Forwarded-For": "198.51.100.77"})
        page = await right.new_page()
        page.set_default_timeout(120_000)
        await unlock(page, url)
        unlocked, refused = page.get_by_text("Server limits:"), page.get_by_role("alert")
        await unlocked.or_(refused).first.wait_for()
        right_outcome = ("unlocked" if await unlocked.count() else
                         await refused.first.inner_text())
        await pw_browser.close()
    deadline = time.monotonic() + 180
    statuses: list[str] = []
    while time.monotonic() < deadline:
        with sqlite3.connect(db) as con:
            statuses = [row[0] for row in con.execute(
                f"SELECT status FROM runs WHERE id IN ({','.join('?' * len(live_runs))})", live_runs)]
        if len(statuses) == len(live_runs) and "running" not in statuses:
            break
        await asyncio.sleep(1)
    with sqlite3.connect(db) as con:
        counted = con.execute("SELECT COUNT(*), COUNT(DISTINCT visitor) FROM wrong_codes").fetchone()
        per_visitor = [n for (n,) in con.execute("SELECT COUNT(*) FROM wrong_codes GROUP BY visitor")]
    return {"results": results, "wall": wall, "memory": memory, "statuses": statuses, "guesses": guesses,
            "counted": counted, "per_visitor": per_visitor, "right": right_outcome}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--guessers", type=int, default=20)
    ap.add_argument("--addresses", type=int, default=5)
    args = ap.parse_args()
    if not browser.available():
        raise SystemExit("needs Debian's chromium at /usr/bin/chromium")
    brain = ResearchBrain()
    brain.latency = 0.5
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
            out = asyncio.run(run(f"http://127.0.0.1:{port}", args.sessions, args.guessers, args.addresses,
                                  proc.pid, db))
        finally:
            proc.terminate()
            proc.wait(15)
    ok = [r for r in out["results"] if r[2] is None]
    errors = [r[2] for r in out["results"] if r[2] is not None]
    for name, times in (("Benchmarks page", [r[0] for r in ok]), ("report page", [r[1] for r in ok])):
        if times:
            times.sort()
            print(f"{name}, {len(times)} sessions at once: p50 {statistics.median(times):.1f} s, "
                  f"p95 {times[max(0, int(len(times) * 0.95) - 1)]:.1f} s, max {times[-1]:.1f} s")
    print(f"errors: {len(errors)} of {len(out['results'])} sessions" + (f" (first: {errors[0]})" if errors else ""))
    print(f"all sessions done in {out['wall']:.1f} s; server memory {out['memory']['VmRSS'] / 1024:.0f} MiB "
          f"(peak {out['memory']['VmHWM'] / 1024:.0f} MiB)")
    print(f"live runs during the load: {out['statuses']}")
    total, visitors = out["counted"]
    print(f"guessing: {args.guessers} sessions from {args.addresses} addresses, 5 wrong codes each: {total} counted "
          f"from {visitors} visitors (at most {max(out['per_visitor'] or [0])} per visitor; limits 5 and 50)")
    print(f"the right code from a new address afterwards: {' '.join(out['right'].split())[:140]}")


if __name__ == "__main__":
    main()
