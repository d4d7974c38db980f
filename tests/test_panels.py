"""The report page's figures and grading panel (ui/panels.py): every outside text escaped, and each grading built
once per graded summary."""
from __future__ import annotations

from pathlib import Path

import lxml.html

from pipeline.bench.saved import SUMMARY, BenchSummary
from tests.test_scoreboard import bench_run, saved_suite
from ui import costs
from ui.library import summarise
from ui.panels import facts_html, grading_html

HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
BIDI = "\u202eevil\u202c"  # a right-to-left override: shown as stored, without the control


def summary_of(folder: Path, question: str | None = None, detail: str = "missing") -> BenchSummary:
    where = saved_suite(folder, question=question, detail=detail)
    return BenchSummary.model_validate_json((where / SUMMARY).read_text())


def test_a_hostile_question_and_detail_are_shown_as_text(tmp_path: Path) -> None:
    summary = summary_of(tmp_path, question=HOSTILE + BIDI, detail=HOSTILE)
    grade = next(g for g in summary.grades if g.run_id == "smoke-q2-extractive")
    html = grading_html(summary, grade)
    tree = lxml.html.fromstring(html)
    assert not tree.findall(".//img") and not tree.findall(".//script")
    caption = tree.find(".//p[@class='vb-caption']").text_content()
    assert HOSTILE + "evil" in caption and "\u202e" not in caption
    assert HOSTILE in tree.findall(".//table")[0].text_content()


def test_a_grading_is_built_once_until_the_suite_is_graded_again(tmp_path: Path) -> None:
    summary = summary_of(tmp_path)
    grade = summary.grades[0]
    before = costs.snapshot()
    first = grading_html(summary, grade)
    assert grading_html(summary, grade) is first
    regraded = summary.model_copy(update={"graded_at": "2026-01-02T00:00:00+00:00"})
    assert "2026-01-02 00:00:00 UTC" in grading_html(regraded, grade)
    assert (costs.snapshot() - before)["grading rendered"] == 2


def test_the_figures_name_each_value_and_escape_nothing_into_markup() -> None:
    rr = bench_run("r1", "q1", "fixed")
    html = facts_html(rr, summarise(rr, file="", suite=""), no_model=False)
    cells = [(f.findtext("span[@class='vb-fact-label']"), f.findtext("span[@class='vb-fact-value']"))
             for f in lxml.html.fromstring(html).findall(".//div[@class='vb-fact']")]
    assert [label for label, _ in cells] == ["Findings verified", "Quotes rejected", "Coverage", "Cost", "Time"]
    assert dict(cells)["Cost"] == f"${rr.usage.cost_usd:.4f}"
    assert dict(cells)["Coverage"].count(" / ") == 1
    no_model = facts_html(rr, summarise(rr, file="", suite=""), no_model=True)
    assert "<span class=\"vb-fact-value\">$0</span>" in no_model
