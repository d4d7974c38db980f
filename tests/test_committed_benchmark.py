"""The committed benchmark runs re-grade to their committed summaries, every quote found at its offsets again."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.bench.baseline import baseline_grades
from pipeline.bench.pages import PageTexts
from pipeline.bench.runner import find_suite, grade_saved, saved_runs
from pipeline.bench.saved import read_summary
from pipeline.bench.summary import grade_suite
from pipeline.config import SHIPPED_CORPORA, Settings

ROOT = Path(__file__).resolve().parents[1]
SAVED = sorted(p.parent for p in (ROOT / "benchmark_runs").glob("*/summary.json"))


def test_the_public_page_has_graded_suites() -> None:
    assert {p.name for p in SAVED} >= {"news", "pydocs", "failure-set"}


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the shipped corpora, so grading builds no index inside the repository."""
    dest = tmp_path_factory.mktemp("corpora")
    shutil.copytree(SHIPPED_CORPORA, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".index*"))
    return dest


@pytest.mark.parametrize("folder", SAVED, ids=lambda p: p.name)
def test_saved_runs_regrade_to_the_committed_summary(folder: Path, corpora: Path) -> None:
    suite = find_suite(folder.name)
    committed = read_summary(folder)
    assert committed is not None and committed.version == suite.version
    saved = saved_runs(folder, suite)
    assert len(saved) == len(committed.grades) > 0
    for rr in saved.values():  # real runs of the real program, labelled with what made them
        assert rr.bench is not None and rr.bench.suite == suite.name and rr.bench.date
        assert "fake" not in " ".join(rr.models.values()).lower()
    pages = PageTexts(Settings(), corpora)
    try:
        grades = grade_saved(suite, saved, pages)
    finally:
        pages.close()
    for grade in grades:  # each cited quote is the corpus page's text at its offsets, the page unchanged
        assert grade.quote_failures == [], (grade.question_id, grade.quote_failures)
        assert grade.citation_precision in (None, 1.0)
    assert [g.model_dump() for g in grades] == [g.model_dump() for g in committed.grades]
    # The baseline row is recomputed from the frozen web, never taken from the file.
    graded = {g.question_id for g in grades}
    baseline = baseline_grades(suite, [q for q in suite.questions if q.id in graded], corpora, Settings())
    assert [g.model_dump() for g in baseline] == [g.model_dump() for g in committed.baseline]
    assert grade_suite([*grades, *baseline], committed.summary.repeats) == committed.summary
