"""The scoreboard's reference row: BM25 top-3 sentences from the frozen web, graded like a run, shown with margins."""
from __future__ import annotations

from pipeline.bench.baseline import CorpusIndex, _Page, baseline_result
from pipeline.bench.grade import BASELINE, grade_run
from pipeline.bench.saved import BenchSummary
from pipeline.bench.suite import SuiteQuestion
from pipeline.bench.summary import grade_suite
from tests.test_scoreboard import QUESTIONS, grade
from ui.scoreboard import scoreboard

PAGES = [
    _Page(url="https://news.example/emirates", title="Emirates orders Dreamliners", published="2019-11-20",
          text="Emirates ordered 30 Boeing 787-9 Dreamliners at the Dubai Air Show. The deal is worth $8.8 billion. "
               "The airline also talked about its A380 fleet."),
    _Page(url="https://news.example/weather", title="Weather", published=None,
          text="It rained all day in Dubai. Forecasters expect sunshine on Friday. Nothing else happened there."),
]


def question(text: str, **kw: object) -> SuiteQuestion:
    return SuiteQuestion.model_validate({"id": "b1", "split": "test", "question": text, "kind": "single_page"} | kw)


def test_the_baseline_quotes_the_top_bm25_sentences_at_their_exact_offsets() -> None:
    index = CorpusIndex(PAGES)
    result = baseline_result(question("How many Dreamliners did Emirates order at the Dubai Air Show?"), index)
    assert result.findings[0].quote == "Emirates ordered 30 Boeing 787-9 Dreamliners at the Dubai Air Show."
    assert len(result.findings) <= 3 and result.usage.model_calls == 0
    for f in result.findings:
        source = next(s for s in result.sources if s.id == f.source)
        text = index.text_of(source)
        assert text is not None and text[f.start:f.end] == f.quote
        assert f"[{f.id}]" in result.report.markdown


def test_the_baseline_is_graded_like_a_run_and_never_names_a_gap() -> None:
    index = CorpusIndex(PAGES)
    asked = question("How many Dreamliners did Emirates order?", answer_terms=["30"])
    g = grade_run(asked, baseline_result(asked, index), index.text_of, mode=BASELINE, repeat=1)
    assert g.mode == BASELINE and g.split == "test" and g.citation_precision == 1.0 and g.answer_recall == 1.0
    unanswerable = question("Who won the Dubai Air Show's design prize?", kind="unanswerable", expect_gap=True)
    miss = grade_run(unanswerable, baseline_result(unanswerable, index), index.text_of, mode=BASELINE, repeat=1)
    assert not miss.passed  # it always quotes its top sentences: only a mode that rejects can pass this


def test_a_question_of_stop_words_or_an_empty_web_gives_no_findings() -> None:
    assert baseline_result(question("What is it and where?"), CorpusIndex(PAGES)).findings == []
    assert baseline_result(question("How many Dreamliners?"), CorpusIndex([])).findings == []


def test_the_scoreboard_shows_the_baseline_beside_the_modes_with_the_margin_on_each_split() -> None:
    grades = [grade("e1", "q1", "extractive"), grade("e2", "q2", "extractive", answered=False)]
    base = [grade(f"{BASELINE}-q1", "q1", BASELINE, answered=False), grade(f"{BASELINE}-q2", "q2", BASELINE,
                                                                           answered=False)]
    for g, split in zip([*grades, *base], ["dev", "test", "dev", "test"], strict=True):
        g.split = split  # type: ignore[assignment]
    summary = BenchSummary(suite="s", version="1", corpus="news", graded_at="2026-12-01T00:00:00+00:00",
                           code_version="0", questions=QUESTIONS, grades=grades, baseline=base,
                           summary=grade_suite([*grades, *base], 1))
    board = scoreboard("s", summary, [])
    assert board.columns == ["extractive (no model)", "baseline (BM25 top 3)"]
    over = next(r for r in board.metrics if r["metric"] == "answer recall over the baseline")
    assert over["extractive (no model)"] == "+50.0 pts" and over["baseline (BM25 top 3)"] == ""
    [extractive, baseline] = board.splits
    assert extractive["dev: answer recall over the baseline"] == "+100.0 pts"
    assert extractive["test: answer recall over the baseline"] == "+0.0 pts"
    assert baseline["metric"] == "baseline (BM25 top 3)"
