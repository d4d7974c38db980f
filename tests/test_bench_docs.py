"""A benchmark over a documents corpus (a folder of files, no manifest): runs research it as `run --docs` does, the
grader checks that a cited page is where the quote is and that the answer's page is the question's, and the BM25
baseline reads the same files."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.bench.grade import grade_run
from pipeline.bench.pages import PageTexts
from pipeline.bench.runner import BenchConfig, run_bench
from pipeline.bench.suite import Suite, load_suite
from pipeline.config import Settings
from pipeline.core.schema import Location, RunResult
from pipeline.store.files import read_run_file
from tests.fakes.documents import pdf_bytes, report_pages, write

PAGE_14 = "The reactor output rose to 41 megawatts in March 2023.\nOperators confirmed the new reactor output figure."
QUESTIONS: list[dict[str, Any]] = [
    {"id": "d1", "split": "dev", "kind": "single_page", "answer_page": 14, "answer_terms": ["41 megawatts"],
     "gold_pages": ["doc:reports/annual%20review.pdf"],
     "question": "According to the annual review, what was the reactor output in March 2023?"},
    {"id": "d2", "split": "test", "kind": "unanswerable", "expect_gap": True,
     "question": "How many employees did the plant have at the end of 2023?"},
]


@pytest.fixture()
def corpora(tmp_path: Path) -> Path:
    write(tmp_path / "corpora" / "docsmini", {
        "reports/annual review.pdf": pdf_bytes(report_pages(20, {14: PAGE_14}), title="Annual review"),
        "notes/tides.md": "---\ntitle: Notes on tides\n---\n# Tides\n\nThe moon pulls the water twice a day.\n"})
    return tmp_path / "corpora"


def suite_file(tmp_path: Path, questions: list[dict[str, Any]] = QUESTIONS) -> Suite:
    path = tmp_path / "docsmini.json"
    path.write_text(json.dumps({"name": "docsmini", "version": "1", "corpus": "docsmini", "questions": questions}))
    return load_suite(path)


def settings_for(tmp_path: Path) -> Settings:
    return Settings(db_path=str(tmp_path / "runs.sqlite"), cache_dir=str(tmp_path / "cache"))


def test_an_extractive_bench_over_documents_cites_the_answers_page(tmp_path: Path, corpora: Path) -> None:
    before = sorted(p.name for p in (corpora / "docsmini").rglob("*"))
    outcome = run_bench(suite_file(tmp_path), settings_for(tmp_path),
                        BenchConfig(modes=["extractive"], out=tmp_path / "out", corpora=corpora))
    assert sorted(p.name for p in (corpora / "docsmini").rglob("*")) == before  # nothing written into the folder
    grades = {g.question_id: g for g in outcome.summary.grades}
    expected = {e.name: e for e in grades["d1"].expectations}
    assert expected["answer_page"].passed and expected["answer_page"].detail.endswith("on p. 14")
    assert expected["citations_verified"].passed and grades["d1"].citation_precision == 1.0
    assert grades["d1"].gold_page_recall == 1.0 and grades["d1"].passed
    assert grades["d2"].passed  # the gap is named
    baseline = {g.question_id: g for g in outcome.summary.baseline}
    assert {e.name: e.passed for e in baseline["d1"].expectations}["answer_page"]  # BM25 reads the same files
    run = next(read_run_file(p) for p in (tmp_path / "out" / "docsmini").glob("*.json")
               if p.name != "summary.json" and not p.name.endswith(".timeline.json")
               and read_run_file(p).question.startswith("According"))
    assert run.sources[0].kind == "document" and run.sources[0].path == "reports/annual review.pdf"


def _moved(run: RunResult, page: int) -> RunResult:
    findings = [f.model_copy(update={"location": Location(page=page, page_start=0, page_end=10)})
                for f in run.findings]
    return run.model_copy(update={"findings": findings})


def test_the_grader_fails_a_run_that_cites_the_wrong_page(tmp_path: Path, corpora: Path) -> None:
    suite = suite_file(tmp_path)
    settings = settings_for(tmp_path)
    outcome = run_bench(suite, settings, BenchConfig(modes=["extractive"], out=tmp_path / "out", corpora=corpora))
    run_id = next(g.run_id for g in outcome.summary.grades if g.question_id == "d1")
    run = next(read_run_file(p) for p in (tmp_path / "out" / "docsmini").glob(f"{run_id}.json"))
    pages = PageTexts(settings, corpora)
    try:
        right = grade_run(suite.questions[0], run, pages.for_run(run, "docsmini"), layout_of=pages.layouts("docsmini"))
        wrong = grade_run(suite.questions[0], _moved(run, 5), pages.for_run(run, "docsmini"),
                          layout_of=pages.layouts("docsmini"))
    finally:
        pages.close()
    assert right.passed
    verdicts = {e.name: e for e in wrong.expectations}
    assert not verdicts["citations_verified"].passed and "cites p. 5 but its quote is at p. 14" in \
        verdicts["citations_verified"].detail
    assert not verdicts["answer_page"].passed and not wrong.passed and wrong.citation_precision == 0.0


def test_a_question_that_names_a_page_is_wrong_when_the_answer_is_elsewhere(tmp_path: Path, corpora: Path) -> None:
    moved = [{**QUESTIONS[0], "answer_page": 3}]
    outcome = run_bench(suite_file(tmp_path, moved), settings_for(tmp_path),
                        BenchConfig(modes=["extractive"], out=tmp_path / "out", corpora=corpora))
    verdict = {e.name: e for e in outcome.summary.grades[0].expectations}["answer_page"]
    assert not verdict.passed and verdict.detail.startswith("expected p. 3; cited: ") and "p. 14" in verdict.detail


def test_a_suite_checks_its_page_expectations(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="answer_page needs answer_terms"):
        suite_file(tmp_path, [{**QUESTIONS[0], "answer_terms": []}])
    with pytest.raises(ValueError, match="doc: identifier"):
        suite_file(tmp_path, [{**QUESTIONS[0], "gold_pages": ["file:///etc/passwd"]}])


def test_every_answer_page_of_the_shipped_docs_suite_holds_its_answer_terms() -> None:
    from benchmarks.corpora.docs_build import check_suite

    suite = load_suite(Path(__file__).resolve().parents[1] / "benchmarks/suites/docs.json")
    assert sum(q.answer_page is not None for q in suite.questions) >= 20
    assert check_suite() == []
