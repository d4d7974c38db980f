"""The scoreboard's logic without Streamlit: suite summaries in the run library, each mode's figures side by side,
and every question's verdict per mode. `saved_suite` builds a graded suite on disk for the app and browser tests."""
from __future__ import annotations

from pathlib import Path

from pipeline.bench.grade import Expectation, RunGrade
from pipeline.bench.saved import SUMMARY, BenchSummary
from pipeline.bench.summary import grade_suite
from pipeline.core.schema import (
    BenchInfo,
    BudgetLimits,
    BudgetState,
    Finding,
    Plan,
    Report,
    RunResult,
    Source,
    SubQuestion,
    Usage,
)
from pipeline.store.files import save_run_file
from ui.library import RunLibrary
from ui.scoreboard import RUN_FAILED, scoreboard, verdict

QUOTE = "Qdrant Cloud pricing starts at 25 dollars per month for the smallest cluster."
QUESTIONS = {"q1": "What does Qdrant Cloud pricing start at?", "q2": "How many Qdrant Cloud tiers are there?"}
LEAD, WORKER = "claude-sonnet-5-5", "claude-haiku-5-5"
MISSING = "not quoted by a cited finding: ['three tiers']"
BENCH_DATE = "2025-11-30T08:00:00+00:00"  # the fixed and tools runs carry it; the extractive runs only a start time
EXTRACTIVE_STARTED = 1_764_547_200.0  # 2025-12-01 00:00:00 UTC


def bench_run(run_id: str, qid: str, mode: str, *, limits: BudgetLimits | None = None, date: str = BENCH_DATE,
              started: float = EXTRACTIVE_STARTED) -> RunResult:
    """A saved bench run of question `qid` in `mode`: extractive runs use no model and record no bench date."""
    extractive = mode == "extractive"
    models = {"lead": "none", "worker": "none"} if extractive else {"lead": LEAD, "worker": WORKER}
    return RunResult(
        run_id=run_id, question=QUESTIONS[qid], mode=mode, models=models, status="complete",  # type: ignore[arg-type]
        plan=Plan(sub_questions=[SubQuestion(id="Q1", question=QUESTIONS[qid])]),
        sources=[Source(id="S1", url="https://qdrant.example/pricing", final_url="https://qdrant.example/pricing",
                        title="Qdrant pricing", published="2025-01-15", fetched_at="2025-11-30T07:59:00+00:00",
                        sha256="0" * 64, chars=300)],
        findings=[Finding(id="F1", sub_question="Q1", source="S1", claim="It starts at 25 dollars.", quote=QUOTE,
                          start=0, end=len(QUOTE), support="supported", confidence="high")],
        report=Report(markdown=f"# {QUESTIONS[qid]}\n\nQdrant Cloud starts at 25 dollars per month [F1].\n"),
        usage=Usage(cost_usd=0.0 if extractive else 0.02, model_calls=0 if extractive else 4,
                    input_tokens=0 if extractive else 1000, output_tokens=0 if extractive else 200),
        budget=BudgetState(limits=limits or BudgetLimits()),
        timings={"total": 2.0, **({"started_at": started} if extractive else {})},
        bench=None if extractive else BenchInfo(
            suite="smoke", suite_version="1", question_id=qid, corpus="news", code_version="0.1.0",
            prompt_hash="p" * 12, models=models, date=date))


def grade(run_id: str, qid: str, mode: str, *, answered: bool = True, status: str = "complete",
          detail: str = MISSING) -> RunGrade:
    """A grade as the grader makes it: the answer expectation met or not, with its detail."""
    extractive = mode == "extractive"
    return RunGrade(
        question_id=qid, mode=mode, run_id=run_id, repeat=1, status=status,  # type: ignore[arg-type]
        citation_precision=1.0, quotes_checked=1, gold_page_recall=1.0, answer_recall=1.0 if answered else 0.0,
        expectations=[Expectation(name="answer", passed=answered, detail="" if answered else detail),
                      Expectation(name="citations_verified", passed=True)],
        passed=answered and status != "failed", sentences_cited=0.5, numbers_in_quotes=1.0,
        cost_usd=0.0 if extractive else 0.02, input_tokens=0 if extractive else 1000,
        output_tokens=0 if extractive else 200, model_calls=0 if extractive else 4, wall_seconds=2.0)


def saved_suite(folder: Path, *, suite: str = "smoke", stopped: str | None = None, question: str | None = None,
                detail: str = MISSING, description: str = "A small graded suite.", date: str = BENCH_DATE,
                started: float = EXTRACTIVE_STARTED) -> Path:
    """`folder/<suite>/`: q1, q2 in each mode with summary.json; all pass but extractive q2 (answer fails: `detail`)."""
    where = folder / suite
    grades = []
    for qid in QUESTIONS:
        for mode in ("fixed", "tools", "extractive"):
            run_id = f"{suite}-{qid}-{mode}"
            save_run_file(where, bench_run(run_id, qid, mode, date=date, started=started))
            grades.append(grade(run_id, qid, mode, answered=not (qid == "q2" and mode == "extractive"),
                                detail=detail))
    questions = {**QUESTIONS, **({"q2": question} if question else {})}
    summary = BenchSummary(suite=suite, version="1", corpus="news", description=description,
                           graded_at="2025-12-01T09:00:00+00:00", code_version="0.1.0", git_commit="abc123def4567890",
                           stopped=stopped, questions=questions, grades=grades, summary=grade_suite(grades, 1))
    (where / SUMMARY).write_text(summary.model_dump_json(indent=1))
    return where


def test_a_summary_is_read_as_the_suite_summary_not_reported_as_a_bad_run_file(tmp_path: Path) -> None:
    saved_suite(tmp_path)
    save_run_file(tmp_path / "ungraded", bench_run("u1", "q1", "fixed"))
    lib = RunLibrary(tmp_path)
    rows, errors = lib.refresh()
    assert errors == [] and len(rows) == 7
    assert list(lib.summaries()) == ["smoke"] and lib.summaries()["smoke"].summary.modes["fixed"].pass_rate == 1.0
    found = lib.grading("smoke-q2-extractive")
    assert found is not None and found[0].suite == "smoke"
    assert (found[1].run_id, found[1].passed, found[1].failed()) == ("smoke-q2-extractive", False, ["answer"])
    assert lib.grading("u1") is None and lib.grading("missing") is None  # no summary, no such run
    (tmp_path / "smoke" / SUMMARY).write_text('{"suite": "smoke"}')
    rows, errors = lib.refresh()
    assert len(rows) == 7 and lib.summaries() == {} and lib.grading("smoke-q1-fixed") is None
    assert errors == [("smoke/summary.json", "it is not a valid benchmark summary, so this suite has no scoreboard")]


def test_a_summary_written_after_the_last_refresh_grades_the_report(tmp_path: Path) -> None:
    summary = saved_suite(tmp_path) / SUMMARY
    text = summary.read_text()
    summary.unlink()
    lib = RunLibrary(tmp_path)
    lib.refresh()
    assert lib.grading("smoke-q1-fixed") is None
    summary.write_text(text)  # the bench (or a shard's merge) writes it while the app runs
    assert lib.grading("smoke-q1-fixed") is not None


def test_a_runs_date_is_the_bench_date_else_its_start_time(tmp_path: Path) -> None:
    saved_suite(tmp_path)
    dates = {r.run_id: r.date for r in RunLibrary(tmp_path).refresh()[0]}
    assert dates["smoke-q1-fixed"] == "2025-11-30 08:00:00" and dates["smoke-q1-extractive"] == "2025-12-01 00:00:00"


def test_the_scoreboard_puts_the_modes_side_by_side_with_their_models_dates_and_budget(tmp_path: Path) -> None:
    saved_suite(tmp_path)
    lib = RunLibrary(tmp_path)
    rows, _ = lib.refresh()
    board = scoreboard("smoke", lib.summaries()["smoke"], rows)
    assert board.columns == ["fixed", "tools", "extractive (no model)"]
    metrics = {m["metric"]: m for m in board.metrics}
    assert metrics["lead model"] == {"metric": "lead model", "fixed": LEAD, "tools": LEAD,
                                     "extractive (no model)": "no model"}
    assert metrics["worker model"]["tools"] == WORKER and metrics["worker model"]["extractive (no model)"] == "no model"
    assert metrics["dates (UTC)"]["fixed"] == "2025-11-30" and metrics["dates (UTC)"]["extractive (no model)"] == \
        "2025-12-01"
    assert metrics["pass rate"]["fixed"] == "100%" and metrics["pass rate"]["extractive (no model)"] == "50%"
    assert metrics["pass^1 (every repeat passes)"]["extractive (no model)"] == "50%"
    assert metrics["expectation: answer"]["extractive (no model)"] == "50%"
    assert metrics["expectation: citations_verified"]["tools"] == "100%"
    assert metrics["answer recall"]["extractive (no model)"] == "50%"
    assert metrics["citation precision"]["fixed"] == "100%" and metrics["gold-page recall"]["tools"] == "100%"
    assert metrics["sentences cited"]["fixed"] == "50%" and metrics["numbers in quotes"]["fixed"] == "100%"
    assert metrics["cost"]["fixed"] == "$0.0400" and metrics["cost per question"]["fixed"] == "$0.0200"
    assert metrics["cost"]["extractive (no model)"] == "$0" == metrics["cost per question"]["extractive (no model)"]
    assert metrics["tokens (in / out)"]["tools"] == "2,000 / 400" and metrics["tokens per question"]["tools"] == "1,200"
    assert metrics["model calls"]["fixed"] == "8" and metrics["model calls per question"]["fixed"] == "4.0"
    assert metrics["wall time per question"]["fixed"] == "2.00 s"
    assert board.budget.startswith("Compared at equal budget: every run of every mode had 30 searches, 40 fetches")
    assert [(q.question_id, {m: v.text for m, v in q.verdicts.items()}) for q in board.questions] == [
        ("q1", {"fixed": "pass", "tools": "pass", "extractive": "pass"}),
        ("q2", {"fixed": "pass", "tools": "pass", "extractive": "fail: answer"})]
    (failing,) = board.question_rows(failing_only=True)
    assert failing == {"question": f"q2: {QUESTIONS['q2']}", "fixed": "pass", "fixed run": "smoke-q2-fixed",
                       "tools": "pass", "tools run": "smoke-q2-tools", "extractive (no model)": "fail: answer",
                       "extractive (no model) run": "smoke-q2-extractive"}
    assert [m for m, _ in board.question("q2")] == ["fixed", "tools", "extractive"]


def test_differing_budgets_are_not_called_equal(tmp_path: Path) -> None:
    saved_suite(tmp_path)
    save_run_file(tmp_path / "smoke", bench_run("smoke-q1-tools", "q1", "tools", limits=BudgetLimits(searches=8)))
    lib = RunLibrary(tmp_path)
    rows, _ = lib.refresh()
    budget = scoreboard("smoke", lib.summaries()["smoke"], rows).budget
    assert budget.startswith("Budgets differ between runs, so the modes are not compared at equal budget")
    assert "tools: 30 searches" in budget and " or 8 searches" in budget


def test_a_failed_run_fails_even_when_its_expectations_were_met() -> None:
    v = verdict(grade("r1", "q1", "fixed", status="failed"))
    assert not v.passed and v.failed == [RUN_FAILED] and v.text == "fail: run failed"
