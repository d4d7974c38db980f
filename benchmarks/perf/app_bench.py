"""App figures with many saved runs: server-side render time of the Benchmarks page, and memory of the app process.

    .venv/bin/python benchmarks/app_bench.py [--runs 1000] [--reruns 5] [--no-browser]

Writes N synthetic RunResult files (8 sources, 8 findings, a ~3 KB report each) to a temporary folder, then:
1. times the Benchmarks page script in-process with AppTest: the first run (every file parsed) and the median of the
   reruns after it (files unchanged, so only stat() calls and the table); also RunLibrary.refresh() alone;
2. starts `streamlit run app.py` on a loopback port, opens the Benchmarks page and one report in headless Chromium
   (when Playwright and /usr/bin/chromium are available) and reads the server process's resident memory
   (VmRSS now, VmHWM peak) from /proc.
No network and no keys are used.
"""
from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.perf.procstat import memory_kb  # noqa: E402
from pipeline.core.schema import Finding, Plan, Report, RunResult, Source, SubQuestion, Usage  # noqa: E402
from pipeline.store.files import save_run_file  # noqa: E402
from ui.library import RunLibrary  # noqa: E402

WORDS = ["price", "plan", "cluster", "storage", "vector", "index", "query", "latency", "cloud", "tier", "month",
         "dollars", "open", "source", "database", "throughput", "replica", "region", "support", "enterprise", "free",
         "usage"]


def synthetic_run(i: int, rng: random.Random) -> RunResult:
    """A run shaped like a real one: plan, sources, findings, a cited report with a Sources section."""
    def sentence(n: int = 14) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."

    sources = [Source(id=f"S{k}", url=f"https://site{k}.example/page/{i}", final_url=f"https://site{k}.example/page/{i}",
                      title=f"Page {k} of run {i}", published="2025-01-15",
                      fetched_at=f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}T10:{i % 60:02d}:00+00:00",
                      sha256="0" * 64, chars=20_000) for k in range(1, 9)]
    findings = [Finding(id=f"F{k}", sub_question=f"Q{1 + k % 3}", source=f"S{k}", claim=sentence(), quote=sentence(20),
                        start=100 * k, end=100 * k + 120, support="supported", confidence="high") for k in range(1, 9)]
    body = "\n".join(f"{f.claim[:-1]} [{f.id}]." for f in findings)
    sources_md = "\n".join(f'- [{f.id}] Page, https://site.example/, 2025-01-15: "{f.quote}"' for f in findings)
    mode = "fixed" if i % 2 else "tools"
    return RunResult(
        run_id=f"bench-{i:05d}", question=f"Question {i}: {sentence(10)}", mode=mode, status="complete",
        models={"lead": rng.choice(["claude-sonnet-5-5", "claude-opus-5-5"]), "worker": "claude-haiku-5-5"},
        plan=Plan(sub_questions=[SubQuestion(id=f"Q{q}", question=sentence(8), queries=[sentence(4)])
                                 for q in range(1, 4)]),
        sources=sources, findings=findings,
        report=Report(markdown=f"# Report {i}\n\n_Machine-assisted research report._\n\n{body}\n\n## Sources\n\n"
                               f"{sources_md}\n", gaps=[]),
        usage=Usage(cost_usd=rng.uniform(0.02, 0.4), model_calls=20, searches=8, fetches=10),
        timings={"plan": rng.uniform(1, 3), "research": rng.uniform(5, 40), "write": rng.uniform(2, 8)})


def write_runs(folder: Path, n: int) -> int:
    rng = random.Random(7)
    total = 0
    for i in range(n):
        path = save_run_file(folder / ("smoke" if i % 3 else "full"), synthetic_run(i, rng))
        total += path.stat().st_size
    return total


def time_apptest(folder: Path, state: Path, reruns: int) -> tuple[float, list[float]]:
    from streamlit.testing.v1 import AppTest

    os.environ["RESEARCH_BENCHMARK_DIR"] = str(folder)
    os.environ["RESEARCH_DB"] = str(state / "research.sqlite")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    started = time.perf_counter()
    at.run()
    first = time.perf_counter() - started
    assert not at.exception, at.exception
    assert len(at.dataframe[0].value) == len(list(folder.rglob("*.json")))
    times = []
    for _ in range(reruns):
        started = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - started)
    return first, times


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_memory(folder: Path, state: Path) -> str:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "skipped: the playwright package is not installed"
    if not Path("/usr/bin/chromium").exists():
        return "skipped: /usr/bin/chromium is not installed"
    n = sum(1 for _ in folder.rglob("*.json"))
    port = _free_port()
    env = {**os.environ, "RESEARCH_BENCHMARK_DIR": str(folder), "RESEARCH_DB": str(state / "research.sqlite")}
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true",
                             "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                    break
            except OSError:
                time.sleep(0.3)
        idle = memory_kb(proc.pid)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run"])
            page = browser.new_page()
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(url) else r.abort())
            started = time.perf_counter()
            page.goto(url + "/")
            page.get_by_text(f"of {n} runs shown.").wait_for(timeout=120_000)
            first_view = time.perf_counter() - started
            page.goto(url + "/report?run=bench-00001")
            page.locator(".vb-report").first.wait_for(timeout=60_000)
            browser.close()
        loaded = memory_kb(proc.pid)
        return (f"app process memory: {idle['VmRSS'] / 1024:.0f} MB at start; {loaded['VmRSS'] / 1024:.0f} MB after "
                f"opening Benchmarks and a report (peak {loaded['VmHWM'] / 1024:.0f} MB); first Benchmarks view in "
                f"the browser {first_view:.2f} s (cold: every file parsed)")
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--reruns", type=int, default=5)
    ap.add_argument("--no-browser", action="store_true", help="skip the server memory measurement")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder, state = Path(tmp) / "runs", Path(tmp) / "state"
        size = write_runs(folder, args.runs)
        print(f"{args.runs} saved runs, {size / 1e6:.1f} MB of JSON")
        lib = RunLibrary(folder)
        started = time.perf_counter()
        lib.refresh()
        cold = time.perf_counter() - started
        warm = []
        for _ in range(args.reruns):
            started = time.perf_counter()
            lib.refresh()
            warm.append(time.perf_counter() - started)
        print(f"RunLibrary.refresh(): {cold:.3f} s cold, {statistics.median(warm) * 1000:.1f} ms when unchanged")
        first, times = time_apptest(folder, state, args.reruns)
        print(f"Benchmarks page, server-side (AppTest script run): first load {first:.2f} s; after it median "
              f"{statistics.median(times):.3f} s, max {max(times):.3f} s over {len(times)} reruns (target < 1 s)")
        if not args.no_browser:
            print(server_memory(folder, state))


if __name__ == "__main__":
    main()
