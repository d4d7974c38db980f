"""Server CPU per page view of the public pages, against an empty two-page Streamlit app measured in the same run.

    .venv/bin/python benchmarks/perf/page_cost_bench.py [--views 20] [--sessions 30] [--reports 3] [--assets]
                                                        [--json out.json]

Starts two servers on this machine, one after the other: the app (`streamlit run app.py`) on the committed
benchmark_runs/, and a control app of two pages that each show a title and a line of text, with the app's own
.streamlit/config.toml. On each:
1. `--views` page loads one after another, each a new tab (the ws client of benchmarks/perf/st_client.py, a new
   WebSocket session per load, as following a shared link): the Benchmarks page, then as many saved reports (the
   control: its first page, then its second). Server CPU per page view is the server's CPU time over those loads,
   split by page, and its ratio to the control's is the figure to hold near 2x;
2. a crowd: `--sessions` sessions at once, each opening the Benchmarks page and then `--reports` reports: time to
   the rendered page (p50, p95 per page), server CPU per page view, and page loads per second of server CPU. With
   `--assets` each session's first load also fetches the entry scripts index.html names, as a browser with an empty
   cache does: a crowd of new visitors, most of whose cost is Streamlit serving its own bundles.
Also: the cold start (process start to the first rendered Benchmarks page) and each server's memory after the crowd.
Times and CPU are the bench's printed figures, never assertions in tests (tests/test_app_costs.py holds the counts).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.perf.load_bench import Target, cpu_seconds, free_port, percentile, saved_runs  # noqa: E402
from benchmarks.perf.procstat import memory_kb  # noqa: E402
from benchmarks.perf.st_client import Session  # noqa: E402

CONTROL_APP = '''import streamlit as st

st.set_page_config(page_title="Control", layout="wide")
st.navigation([st.Page("one.py", title="One", default=True), st.Page("two.py", title="Two", url_path="two")]).run()
'''
CONTROL_PAGE = 'import streamlit as st\n\nst.title("{title}")\nst.write("A line of text on page {title}.")\n'
TIMEOUT = 120.0


@contextmanager
def server(argv: list[str], cwd: Path, env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """A Streamlit server started by `argv` in `cwd`, once healthy: its URL and PID."""
    port = free_port()
    proc = subprocess.Popen([*argv, f"--server.port={port}", "--server.address=127.0.0.1"], cwd=cwd,
                            env={**env, "PORT": str(port)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"{argv} did not start") from None
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}", proc.pid
    finally:
        proc.terminate()
        proc.wait(15)


def app_pages(session: int, reports: int, runs: list[tuple[str, str]]) -> list[Target]:
    """The Benchmarks page, then `reports` saved reports (each session its own)."""
    pages = [Target("Benchmarks page", "/", "", f"{len(runs)} of {len(runs)} runs shown.")]
    for k in range(reports):
        run_id, question = runs[(session * reports + k * 7) % len(runs)]
        pages.append(Target("report page", "/report", f"run={run_id}", question))
    return pages


def control_pages(session: int, reports: int, runs: list[tuple[str, str]]) -> list[Target]:
    """The control's first page, then its second `reports` times: the same number of loads as the app's."""
    return [Target("Benchmarks page", "/", "", "A line of text on page One."),
            *[Target("report page", "/two", "", "A line of text on page Two.") for _ in range(reports)]]


async def load(url: str, t: Target, assets: bool = False) -> tuple[str, float, str | None]:
    """One page load in a new tab (with `assets`, also the entry scripts, as a browser with an empty cache): (page
    kind, seconds to the rendered page, error or None)."""
    s = Session(url, timeout=TIMEOUT, assets=assets)
    try:
        run = await s.open(t.path, t.query)
    finally:
        await s.close()
    error = run.error() or (None if run.has_text(t.expected) else f"{t.expected[:60]!r} is not on the page")
    return t.kind, run.seconds, error


async def serial(url: str, pid: int, plan: list[Target]) -> dict[str, Any]:
    """Each page of `plan` loaded one after another: server CPU per view, by page kind."""
    cpu: dict[str, list[float]] = {}
    errors = []
    for t in plan:
        before = cpu_seconds(pid)
        kind, _, error = await load(url, t)
        await asyncio.sleep(0.05)  # the session's end (closing its socket) is the server's work too
        cpu.setdefault(kind, []).append(cpu_seconds(pid) - before)
        errors += [error] if error else []
    return {"cpu_ms": {k: round(1000 * statistics.mean(v), 1) for k, v in cpu.items()}, "errors": errors}


async def crowd(url: str, pid: int, plans: list[list[Target]], assets: bool = False) -> dict[str, Any]:
    """Every session at once, each loading its pages in order (with `assets`, the first with the entry scripts):
    times per page kind and server CPU per view."""
    async def one(plan: list[Target]) -> list[tuple[str, float, str | None]]:
        return [await load(url, t, assets and i == 0) for i, t in enumerate(plan)]

    before, t0 = cpu_seconds(pid), time.monotonic()
    visits = [v for session in await asyncio.gather(*(one(p) for p in plans)) for v in session]
    wall, used = time.monotonic() - t0, cpu_seconds(pid) - before
    by_kind: dict[str, list[float]] = {}
    for kind, seconds, _ in visits:
        by_kind.setdefault(kind, []).append(seconds)
    return {"wall_s": round(wall, 1), "server_cpu_s": round(used, 1), "views": len(visits),
            "cpu_ms_per_view": round(1000 * used / len(visits), 1),
            "views_per_cpu_s": round(len(visits) / used, 1) if used else None,
            "errors": [e for _, _, e in visits if e],
            "seconds": {k: {"p50": round(percentile(sorted(v), 0.5), 2), "p95": round(percentile(sorted(v), 0.95), 2)}
                        for k, v in by_kind.items()}}


def measure(views: int, sessions: int, reports: int, assets: bool = False) -> dict[str, Any]:
    """Both servers' figures: serial CPU per view by page, then the crowd's."""
    runs = saved_runs()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        control = home / "control"
        (control / ".streamlit").mkdir(parents=True)
        shutil.copy(ROOT / ".streamlit" / "config.toml", control / ".streamlit" / "config.toml")
        (control / "app.py").write_text(CONTROL_APP)
        for name, title in (("one.py", "One"), ("two.py", "Two")):
            (control / name).write_text(CONTROL_PAGE.format(title=title))
        env = {**os.environ, "HOME": str(home), "RESEARCH_DB": str(home / "state" / "research.sqlite")}
        env.pop("ANTHROPIC_API_KEY", None)
        streamlit = [sys.executable, "-m", "streamlit", "run"]
        for name, argv, cwd, pages in (("app", [*streamlit, str(ROOT / "app.py")], ROOT, app_pages),
                                       ("control", [*streamlit, str(control / "app.py")], control, control_pages)):
            started = time.monotonic()
            with server(argv, cwd, env) as (url, pid):
                first, *rest = pages(0, 1, runs)
                asyncio.run(serial(url, pid, [first]))  # first loads import the modules: not a page view's cost
                cold = time.monotonic() - started
                asyncio.run(serial(url, pid, rest))
                plan = [t for i in range(views) for t in pages(i + 1, 1, runs)]
                out[name] = {"cold_start_s": round(cold, 2), "serial": asyncio.run(serial(url, pid, plan)),
                             "crowd": asyncio.run(crowd(url, pid, [pages(i, reports, runs)
                                                                   for i in range(sessions)], assets)),
                             "memory_mb": {k: round(v / 1024) for k, v in memory_kb(pid).items()}}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--views", type=int, default=20, help="serial loads of each page")
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--reports", type=int, default=3)
    ap.add_argument("--assets", action="store_true",
                    help="each crowd session fetches the entry scripts with its first page, as a new browser does")
    ap.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = ap.parse_args()
    out = measure(args.views, args.sessions, args.reports, args.assets)
    app, control = out["app"], out["control"]
    for kind in app["serial"]["cpu_ms"]:
        mine, base = app["serial"]["cpu_ms"][kind], control["serial"]["cpu_ms"][kind]
        print(f"[serial] {kind}: {mine:.0f} ms of server CPU per view; empty app {base:.0f} ms; "
              f"ratio {mine / base:.1f}x")
    for name in ("app", "control"):
        c = out[name]["crowd"]
        times = "; ".join(f"{k} p50 {v['p50']:.2f} s, p95 {v['p95']:.2f} s" for k, v in c["seconds"].items())
        print(f"[crowd {name}] {args.sessions} sessions x {args.reports + 1} pages: {times}; "
              f"{c['cpu_ms_per_view']:.0f} ms CPU per view, {c['views_per_cpu_s']} views per CPU second; "
              f"wall {c['wall_s']} s; errors {len(c['errors'])}")
    print(f"[cold start] process start to the first rendered Benchmarks page: app {app['cold_start_s']:.1f} s, "
          f"empty app {control['cold_start_s']:.1f} s")
    for name in ("app", "control"):
        mem = out[name]["memory_mb"]
        print(f"[memory {name}] after the crowd: resident {mem['VmRSS']} MB, peak {mem['VmHWM']} MB")
    ratio = app["crowd"]["cpu_ms_per_view"] / control["crowd"]["cpu_ms_per_view"]
    print(f"[crowd] CPU per view, app over empty app: {ratio:.1f}x")
    for name in ("app", "control"):
        for e in (out[name]["serial"]["errors"] + out[name]["crowd"]["errors"])[:3]:
            print(f"  {name} error: {e}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
