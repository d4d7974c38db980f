"""The report page's figures and its benchmark grading as inert HTML fragments, each built once per run (or per
graded summary) and kept: one element to send per view instead of a column and a metric apiece, and no table built
per view. Every text from a run or a summary is escaped here."""
from __future__ import annotations

from collections.abc import Sequence

from pipeline.bench.grade import RunGrade
from pipeline.bench.saved import BenchSummary
from pipeline.core.schema import RunResult
from ui.costs import count
from ui.kept import Kept
from ui.library import RunSummary
from ui.render import esc as escape
from ui.scoreboard import grading_metrics, verdict

FACTS_STYLE = """<style>
.vb-facts{display:flex;flex-wrap:wrap;gap:.6rem 2.2rem;margin:.4rem 0 1rem}
.vb-fact{display:flex;flex-direction:column}.vb-fact-label{font-size:.875rem;color:#57606a}
.vb-fact-value{font-size:1.75rem;line-height:1.3}
</style>"""
GRADING_STYLE = """<style>
.vb-grading{border:1px solid #d6d9de;border-radius:.5rem;padding:.9rem 1rem;margin:.6rem 0 1rem;overflow-wrap:anywhere}
.vb-grading h3{font-size:1.25rem;margin:0 0 .3rem}.vb-grading .vb-caption{font-size:.875rem;color:#57606a}
.vb-pass,.vb-fail{border-radius:.5rem;padding:.6rem .9rem;margin:.6rem 0}
.vb-pass{background:#e6f4ea;color:#0d5f2c}.vb-fail{background:#fdecea;color:#8c1d18}
.vb-grading table{border-collapse:collapse;margin:.5rem 0;width:100%}
.vb-grading th,.vb-grading td{border:1px solid #d6d9de;padding:.3rem .6rem;vertical-align:top;text-align:left}
.vb-grading td:nth-child(-n+2),.vb-grading th:nth-child(-n+2){white-space:nowrap}
</style>"""


def _fact(label: str, value: object, explained: str = "") -> str:
    title = f' title="{escape(explained)}"' if explained else ""
    return (f'<div class="vb-fact"{title}><span class="vb-fact-label">{escape(label)}</span>'
            f'<span class="vb-fact-value">{escape(str(value))}</span></div>')


def facts_html(rr: RunResult, row: RunSummary, *, no_model: bool) -> str:
    """The run's five figures in a row: findings verified, quotes rejected, coverage, cost and time."""
    cost = _fact("Cost", "$0", "No model: nothing was paid for") if no_model else _fact(
        "Cost", f"${rr.usage.cost_usd:.4f}")
    return (f'{FACTS_STYLE}<div class="vb-facts">'
            + _fact("Findings verified", row.findings, "Quotes that code located in a fetched page")
            + _fact("Quotes rejected", row.rejected, "Proposed quotes that were not in the page")
            + _fact("Coverage", f"{row.answered} / {row.planned}", "Sub-questions answered / planned")
            + cost + _fact("Time", f"{row.seconds:.1f} s") + "</div>")


def _table(head: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    cells = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return "<table><thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + f"</tr></thead>{cells}</table>"


def _grading_html(summary: BenchSummary, grade: RunGrade) -> str:
    count("grading rendered")
    v = verdict(grade)
    question = summary.questions.get(grade.question_id, "")
    caption = (f"Suite {summary.suite} (version {summary.version}, corpus {summary.corpus}) · question "
               f"{grade.question_id}{': ' + question if question else ''} · repeat {grade.repeat} · "
               f"graded {summary.graded_at[:19].replace('T', ' ')} UTC")
    outcome = ('<div class="vb-pass" role="status">Passed: every expectation of this question was met.</div>'
               if v.passed else f'<div class="vb-fail" role="status">Failed: {escape(", ".join(v.failed))}.</div>')
    expectations = (_table(("expectation", "met", "detail"),
                           [(e.name, "yes" if e.passed else "no", e.detail) for e in grade.expectations])
                    if grade.expectations else
                    '<p class="vb-caption">This question sets no expectation for this run.</p>')
    measures = _table(("Measure", "Value", "How it is measured"), grading_metrics(grade))
    return (f'{GRADING_STYLE}<section class="vb-grading"><h3>Benchmark grading</h3>'
            f'<p class="vb-caption">{escape(caption)}</p>{outcome}{expectations}{measures}</section>')


# Keyed by the summary object itself: the library parses a summary file again only when it changed, so a new object
# is a new grading. The kept pair holds the summary, so its id cannot be reused by another while the entry lives.
_GRADINGS: Kept[tuple[BenchSummary, str]] = Kept(256)


def grading_html(summary: BenchSummary, grade: RunGrade) -> str:
    """How the suite's grader judged the run: passed or not, each expectation with its detail, and the measures;
    kept until the suite's summary is read again."""
    return _GRADINGS.get((id(summary), grade.run_id, grade.repeat), lambda: (summary, _grading_html(summary, grade)))[1]
