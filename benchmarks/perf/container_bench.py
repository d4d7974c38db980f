"""Container figures without Docker: start to healthy, memory after the Benchmarks page and one report, image size.

    .venv/bin/python benchmarks/perf/container_bench.py [--venv DIR] [--starts 3]

1. Makes a clean virtualenv from requirements-runtime.lock exactly as the Dockerfile's builder stage does
   (`pip install --no-deps`, then `pip check`), unless DIR already holds one; this needs the package registry.
2. Lays out the final stage's files (tests/fakes/docker_build.py), compiles them and indexes the corpora with that
   virtualenv's Python, as the Dockerfile's RUN step does.
3. Starts the image's CMD there with only the image's environment and PORT, --starts times: seconds to a healthy
   /_stcore/health.
4. Opens the Benchmarks page and one saved report in headless Chromium (timing the first page) and reads the
   server's resident memory (VmRSS now, VmHWM peak) from /proc; then SIGTERM, as Cloud Run stops an instance.
   Then one extractive run on the shipped corpus in a process of its own: its peak memory is what a live run adds.
5. Estimates the image size: the base image (python:3.11-slim-bookworm, about 125 MB unpacked, from Docker Hub's
   listing, as no registry is reachable here) plus the virtualenv and the app folder as measured on disk.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.perf import browser  # noqa: E402
from benchmarks.perf.procstat import memory_kb  # noqa: E402
from tests.fakes.docker_build import lay_out, run_image, stop  # noqa: E402

BASE_IMAGE_MB = 125  # python:3.11-slim-bookworm unpacked (Docker Hub lists about 45 MB compressed)


def _mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6


def make_venv(venv: Path) -> float:
    """The builder stage: a virtualenv of the runtime lock; seconds taken (0 when one of this lock was there)."""
    lock = (ROOT / "requirements-runtime.lock").read_bytes()
    stamp = venv / ".complete"
    if stamp.exists() and stamp.read_text() == hashlib.sha256(lock).hexdigest():
        return 0.0
    shutil.rmtree(venv, ignore_errors=True)
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    subprocess.run([*pip, "install", "--quiet", "--no-deps", "--no-cache-dir", "--requirement",
                    str(ROOT / "requirements-runtime.lock")], check=True)
    subprocess.run([*pip, "check"], check=True)
    stamp.write_text(hashlib.sha256(lock).hexdigest())
    return time.monotonic() - started


def browse(url: str, app: Path) -> float:
    """The Benchmarks page, then one saved report, in headless Chromium; seconds until the Benchmarks page showed."""
    runs = sorted(p for p in (app / "benchmark_runs").rglob("*.json")
                  if not p.name.endswith(".timeline.json") and p.name != "summary.json")
    one = json.loads(runs[0].read_text(encoding="utf-8"))
    with browser.page() as page:
        started = time.monotonic()
        page.goto(url + "/")
        page.get_by_text(f"{len(runs)} of {len(runs)} runs shown.").wait_for()
        first_page = time.monotonic() - started
        page.goto(f"{url}/report?run={one['run_id']}")
        page.get_by_text(one["question"]).first.wait_for()
    return first_page


def live_run_memory(python: Path, app: Path, home: Path) -> tuple[int, float]:
    """Peak resident memory (KiB) and seconds of one extractive run on the shipped corpus, in a process of its own."""
    started = time.monotonic()
    proc = subprocess.run([str(python), "-m", "pipeline", "run", "How many employees does WeWork have?", "--mode",
                           "extractive"], cwd=app, capture_output=True, text=True, timeout=300,
                          env={"PATH": f"{python.parent}:/usr/bin:/bin", "HOME": str(home)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "verbatim-runtime-venv")
    parser.add_argument("--starts", type=int, default=3)
    args = parser.parse_args()

    seconds = make_venv(args.venv)
    python = args.venv / "bin" / "python"
    print(f"runtime virtualenv: {_mb(args.venv):.0f} MB"
          + (f", built in {seconds:.0f} s" if seconds else " (already built)"))
    with tempfile.TemporaryDirectory() as tmp:
        image = lay_out(ROOT, Path(tmp) / "image")
        app = image.workdir
        subprocess.run([str(python), "-m", "compileall", "-q", "app.py", "pipeline", "ui"], cwd=app, check=True)
        subprocess.run([str(python), "-m", "pipeline.web.index_corpora", "benchmarks/corpora"], cwd=app, check=True,
                       capture_output=True)
        app_mb = _mb(app)
        home = Path(tmp) / "home"
        home.mkdir()
        starts = []
        for _ in range(args.starts):
            started = run_image(image, python.parent, home)
            starts.append(started.seconds_to_healthy)
            if len(starts) < args.starts:
                assert stop(started) == 0
        print(f"start to healthy (/_stcore/health): median {statistics.median(starts):.2f} s, "
              f"max {max(starts):.2f} s over {len(starts)} starts")
        idle = memory_kb(started.proc.pid)
        if browser.available():
            first_page = browse(started.url, app)
            loaded = memory_kb(started.proc.pid)
            print(f"first visit: the Benchmarks page showed {first_page:.2f} s after it was requested")
            print(f"server memory: {idle['VmRSS'] / 1024:.0f} MiB when healthy; {loaded['VmRSS'] / 1024:.0f} MiB "
                  f"after the Benchmarks page and one report (peak {loaded['VmHWM'] / 1024:.0f} MiB)")
        else:
            print(f"server memory: {idle['VmRSS'] / 1024:.0f} MiB when healthy (no Chromium: pages not opened)")
        code = stop(started)
        print(f"SIGTERM: exit code {code}")
        peak, seconds = live_run_memory(python, app, home)
        print(f"one extractive run on the shipped corpus, in its own process: peak {peak / 1024:.0f} MiB, "
              f"{seconds:.1f} s")
    venv_mb = _mb(args.venv)
    print(f"image estimate: {BASE_IMAGE_MB} MB base + {venv_mb:.0f} MB virtualenv + {app_mb:.0f} MB app (code, "
          f"bytecode, corpora and their indexes, saved runs) = {BASE_IMAGE_MB + venv_mb + app_mb:.0f} MB unpacked")


if __name__ == "__main__":
    main()
