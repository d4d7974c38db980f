"""The public pages' work per view, counted by ui/costs.py and held to benchmarks/perf/budgets.json: each saved run,
summary, table, scoreboard and rendered report is computed once per data change and shared by every session; a
page view whose inputs did not change computes none of them again."""
from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pipeline.bench.saved import SUMMARY
from tests.test_scoreboard import saved_suite
from ui import costs
from ui.views import RESCAN_SECONDS

ROOT = Path(__file__).resolve().parents[1]
BUDGET = json.loads((ROOT / "benchmarks/perf/budgets.json").read_text("utf-8"))["app"]["max"]
REPORT = "smoke-q1-tools"


@pytest.fixture()
def bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RESEARCH_BENCHMARK_DIR", str(tmp_path / "bench"))
    monkeypatch.setenv("RESEARCH_DB", str(tmp_path / "state" / "research.sqlite"))
    saved_suite(tmp_path / "bench")
    return tmp_path / "bench"


def view(page: str = "benchmarks", **query: str) -> AppTest:
    """One page view in a new session, as a visitor following a link."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
    if page != "benchmarks":
        at.switch_page(f"ui/pages/{page}.py")
    at.query_params.update(query)
    at.run()
    assert not at.exception, at.exception
    return at


def counted(*pages: tuple[str, dict[str, str]]) -> Counter[str]:
    """The heavy computations the views of `pages` did, each in a session of its own."""
    before = costs.snapshot()
    for page, query in pages:
        view(page, **query)
    return costs.snapshot() - before


def over(got: Counter[str], budget: dict[str, int], **per: int) -> dict[str, tuple[int, int]]:
    """Each kind whose count is over its budget: (count, budget). A budget "KIND per X" counts `per[X]` times toward
    KIND (files, reports, suites); a plain one is for the views together."""
    limits: Counter[str] = Counter()
    for name, value in budget.items():
        kind, _, unit = name.partition(" per ")
        limits[kind] += value * (per[unit + "s"] if unit else 1)
    return {k: (n, limits[k]) for k, n in got.items() if n > limits[k]}


def test_first_views_compute_each_thing_once_and_repeat_views_nothing(bench: Path) -> None:
    files = len([p for p in bench.rglob("*.json") if p.name != SUMMARY and not p.name.endswith(".timeline.json")])
    first = counted(("benchmarks", {}), ("report", {"run": REPORT}))
    assert first["runs table built"] == 1 and first["scoreboard built"] == 1 and first["report rendered"] == 1
    assert first["grading rendered"] == 1
    assert not over(first, BUDGET["first_view"], files=files, reports=1, suites=1), first
    repeat = counted(*[("benchmarks", {}), ("report", {"run": REPORT})] * 3)
    assert not over(repeat, BUDGET["repeat_view"]), f"recomputed on unchanged data: {dict(repeat)}"


def test_a_changed_run_file_is_computed_again_once(bench: Path) -> None:
    counted(("benchmarks", {}), ("report", {"run": REPORT}))
    path = bench / "smoke" / f"{REPORT}.json"
    path.write_text(path.read_text().replace("Question", "Question (revised)"))
    time.sleep(RESCAN_SECONDS + 0.1)  # the pages look at the folder at most once a second
    again = counted(("benchmarks", {}), ("report", {"run": REPORT}), ("benchmarks", {}), ("report", {"run": REPORT}))
    assert again["runs table built"] == 1 and again["scoreboard built"] == 1 and again["report rendered"] == 1
    assert again["run file parsed"] == 2  # the library's row, then the report's full run: once each
    assert again["summary parsed"] == 0


def test_a_new_run_appears_within_the_rescan_interval(bench: Path) -> None:
    at = view()
    shown = len(at.dataframe[-2].value)  # "All saved runs"
    extra = bench / "smoke" / "extra.json"
    extra.write_text((bench / "smoke" / f"{REPORT}.json").read_text().replace(REPORT, "extra"))
    time.sleep(RESCAN_SECONDS + 0.1)
    assert len(view().dataframe[-2].value) == shown + 1
    assert "Run extra" in " ".join(str(c.value) for c in view("report", run="extra").caption)
