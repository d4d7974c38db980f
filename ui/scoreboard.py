"""A suite's scoreboard for the Benchmarks page: its summary.json and saved runs as plain display rows, so the page
only renders (and tests need no Streamlit)."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import partial

from pydantic import BaseModel

from pipeline.bench.grade import BASELINE, RunGrade
from pipeline.bench.saved import BenchSummary
from pipeline.bench.summary import ModeSummary
from ui.library import NO_MODEL, RunSummary, mode_label

MODE_ORDER = ("fixed", "tools", "extractive", BASELINE)
NOT_MEASURED = "—"
METRIC = "metric"
RUN_FAILED = "run failed"


def share(value: float | None) -> str:
    """A share as a percentage ("83.3%", "100%"), or a dash when there was nothing to measure it on."""
    if value is None:
        return NOT_MEASURED
    return f"{value:.1%}".replace(".0%", "%")


def dollars(value: float) -> str:
    return "$0" if value == 0 else f"${value:.4f}"


def seconds(value: float | None) -> str:
    """A wall time; runs on a frozen web take well under a second, so small times keep two decimals."""
    if value is None:
        return NOT_MEASURED
    return f"{value:.2f} s" if value < 10 else f"{value:.1f} s"


class Verdict(BaseModel):
    """One graded run of a question: passed or not, and what failed."""

    run_id: str
    repeat: int
    passed: bool
    failed: list[str]

    @property
    def text(self) -> str:
        return "pass" if self.passed else "fail: " + ", ".join(self.failed or ["not passed"])


def verdict(grade: RunGrade) -> Verdict:
    """The verdict of a grade; a run that failed fails even when every expectation it had was met."""
    failed = grade.failed() + ([RUN_FAILED] if grade.status == "failed" else [])
    return Verdict(run_id=grade.run_id, repeat=grade.repeat, passed=grade.passed, failed=failed)


class QuestionRow(BaseModel):
    """One question (and repeat) of the suite, with its verdict per mode."""

    question_id: str
    question: str
    repeat: int
    verdicts: dict[str, Verdict]

    @property
    def failing(self) -> bool:
        return any(not v.passed for v in self.verdicts.values())


class Scoreboard(BaseModel):
    """What the Benchmarks page shows of one graded suite."""

    key: str
    summary: BenchSummary
    modes: list[str]
    metrics: list[dict[str, str]]
    splits: list[dict[str, str]]
    budget: str
    questions: list[QuestionRow]

    @property
    def columns(self) -> list[str]:
        """The comparison's column per mode, side by side in MODE_ORDER."""
        return [mode_label(m) for m in self.modes]

    def question_rows(self, *, failing_only: bool = False) -> list[dict[str, str | int]]:
        """The questions table: per mode, the verdict and the run id of its report."""
        rows: list[dict[str, str | int]] = []
        for q in self.questions:
            if failing_only and not q.failing:
                continue
            row: dict[str, str | int] = {"question": f"{q.question_id}: {q.question}" if q.question else q.question_id}
            if self.summary.summary.repeats > 1:
                row["repeat"] = q.repeat
            for mode, column in zip(self.modes, self.columns, strict=True):
                v = q.verdicts.get(mode)
                row[column] = v.text if v else NOT_MEASURED
                row[f"{column} run"] = v.run_id if v else ""
            rows.append(row)
        return rows

    def question(self, question_id: str) -> list[tuple[str, RunGrade]]:
        """Every grade of one question, (mode, grade), in mode then repeat order."""
        grades = [g for g in self.summary.grades if g.question_id == question_id]
        return [(g.mode, g) for g in sorted(grades, key=lambda g: (_mode_rank(g.mode), g.repeat))]


def _mode_rank(mode: str) -> int:
    return MODE_ORDER.index(mode) if mode in MODE_ORDER else len(MODE_ORDER)


def scoreboard(key: str, summary: BenchSummary, runs: Sequence[RunSummary]) -> Scoreboard:
    """The scoreboard of the suite in folder `key`; its saved `runs` give each mode its models, dates and budget."""
    graded = {g.run_id for g in summary.grades}
    mine = [r for r in runs if r.suite == key and r.run_id in graded]
    modes = sorted(summary.summary.modes, key=lambda m: (_mode_rank(m), m))
    by_mode: dict[str, list[RunSummary]] = defaultdict(list)
    for r in mine:
        by_mode[r.mode].append(r)
    return Scoreboard(key=key, summary=summary, modes=modes, metrics=_metrics(summary, modes, by_mode),
                      splits=split_rows(summary, modes), budget=_budget(modes, by_mode),
                      questions=_questions(summary, modes))


def margin(value: float | None, reference: float | None) -> str:
    """How far `value` is above the baseline's `reference`, in points ("+21.4 pts"); a dash when either is missing."""
    if value is None or reference is None:
        return NOT_MEASURED
    return f"{100 * (value - reference):+.1f} pts"


def split_rows(summary: BenchSummary, modes: list[str]) -> list[dict[str, str]]:
    """One row per mode (the baseline last): pass rate and answer recall on dev and test, and the margins over the
    baseline on each split, so the held-out figures stand beside the tuned ones."""
    rows = []
    for mode in modes:
        row = {METRIC: mode_label(mode)}
        for split, by_mode in summary.summary.splits.items():
            s, base = by_mode.get(mode), by_mode.get(BASELINE)
            row[f"{split}: questions"] = str(s.questions) if s else NOT_MEASURED
            row[f"{split}: pass rate"] = share(s.pass_rate) if s else NOT_MEASURED
            row[f"{split}: answer recall"] = share(s.answer_recall) if s else NOT_MEASURED
            if mode != BASELINE:
                row[f"{split}: answer recall over the baseline"] = (
                    margin(s.answer_recall, base.answer_recall) if s and base else NOT_MEASURED)
            else:
                row[f"{split}: answer recall over the baseline"] = ""
        rows.append(row)
    return rows


def _metrics(summary: BenchSummary, modes: list[str], runs: dict[str, list[RunSummary]]) -> list[dict[str, str]]:
    """Metric rows with one column per mode: the modes side by side."""
    k = summary.summary.repeats
    per = "question" if k == 1 else "run"
    expectations = sorted({n for m in modes for n in summary.summary.modes[m].expectation_rate})
    rows: list[tuple[str, dict[str, str]]] = [
        ("lead model", {m: _models(m, [r.lead_model for r in runs[m]]) for m in modes}),
        ("worker model", {m: _models(m, [r.worker_model for r in runs[m]]) for m in modes}),
        ("dates (UTC)", {m: summary.graded_at[:10] if m == BASELINE else _dates(runs[m]) for m in modes}),
    ]

    def add(name: str, value: Callable[[ModeSummary], str]) -> None:
        rows.append((name, {m: value(summary.summary.modes[m]) for m in modes}))

    add("runs", lambda s: f"{s.runs} ({s.questions} questions × {s.repeats} repeat{'s' if s.repeats != 1 else ''})")
    add("pass rate", lambda s: share(s.pass_rate))
    add(f"pass^{k} (every repeat passes)", lambda s: share(s.pass_k))
    add("citation precision", lambda s: share(s.citation_precision))
    add("gold-page recall", lambda s: share(s.gold_page_recall))
    add("answer recall", lambda s: share(s.answer_recall))
    if (base := summary.summary.modes.get(BASELINE)) is not None:
        rows.append(("pass rate over the baseline", {m: "" if m == BASELINE else margin(
            summary.summary.modes[m].pass_rate, base.pass_rate) for m in modes}))
        rows.append(("answer recall over the baseline", {m: "" if m == BASELINE else margin(
            summary.summary.modes[m].answer_recall, base.answer_recall) for m in modes}))
    for name in expectations:
        add(f"expectation: {name}", partial(_expectation, name=name, k=k))
    add("sentences cited", lambda s: share(s.sentences_cited))
    add("numbers in quotes", lambda s: share(s.numbers_in_quotes))
    add("cost", lambda s: dollars(s.cost_usd))
    add(f"cost per {per}", lambda s: dollars(s.cost_usd / max(s.runs, 1)))
    add("tokens (in / out)", lambda s: f"{s.input_tokens:,} / {s.output_tokens:,}")
    add(f"tokens per {per}", lambda s: f"{(s.input_tokens + s.output_tokens) / max(s.runs, 1):,.0f}")
    add("model calls", lambda s: f"{s.model_calls:,}")
    add(f"model calls per {per}", lambda s: f"{s.model_calls / max(s.runs, 1):.1f}")
    add(f"wall time per {per}", lambda s: seconds(s.wall_seconds_mean))
    return [{METRIC: name, **{mode_label(m): v for m, v in values.items()}} for name, values in rows]


def _expectation(s: ModeSummary, name: str, k: int) -> str:
    if name not in s.expectation_rate:
        return NOT_MEASURED
    rate = share(s.expectation_rate[name])
    return rate if k == 1 else f"{rate} · pass^{k} {share(s.expectation_pass_k.get(name))}"


def _models(mode: str, ids: list[str]) -> str:
    if mode == BASELINE:
        return "none: Okapi BM25 over every page of the frozen web"
    if mode == "extractive":
        return NO_MODEL
    return ", ".join(sorted({i for i in ids if i})) or "unknown"


def _dates(runs: list[RunSummary]) -> str:
    days = sorted({r.date[:10] for r in runs if r.date})
    if not days:
        return NOT_MEASURED
    return days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"


def _budget(modes: list[str], runs: dict[str, list[RunSummary]]) -> str:
    """Whether the modes were compared at equal budget, and which: read from the saved runs, not assumed."""
    budgets = {m: sorted({r.budget for r in runs[m] if r.budget}) for m in modes}
    every = {b for bs in budgets.values() for b in bs}
    if not every:
        return "The budget is not known: no graded run of this suite is saved here."
    if len(every) == 1:
        (only,) = every
        if len(modes) == 1:
            return f"Every run had the same budget: {only}."
        return f"Compared at equal budget: every run of every mode had {only}."
    return "Budgets differ between runs, so the modes are not compared at equal budget: " + "; ".join(
        f"{mode_label(m)}: {' or '.join(bs)}" for m, bs in budgets.items() if bs) + "."


def _questions(summary: BenchSummary, modes: list[str]) -> list[QuestionRow]:
    order = {q: i for i, q in enumerate(summary.questions)}
    cells: dict[tuple[str, int], dict[str, Verdict]] = defaultdict(dict)
    for g in summary.grades:
        cells[(g.question_id, g.repeat)].setdefault(g.mode, verdict(g))
    repeats = sorted({r for _q, r in cells}) or [1]
    for g in summary.baseline:  # computed once, shown beside every repeat; it has no report to open
        for r in repeats:
            if (g.question_id, r) in cells:
                cells[(g.question_id, r)][BASELINE] = verdict(g).model_copy(update={"run_id": ""})
    keys = sorted(cells, key=lambda qr: (order.get(qr[0], len(order)), qr[0], qr[1]))
    return [QuestionRow(question_id=q, question=summary.questions.get(q, ""), repeat=r,
                        verdicts={m: cells[(q, r)][m] for m in modes if m in cells[(q, r)]}) for q, r in keys]


def grading_metrics(grade: RunGrade) -> list[tuple[str, str, str]]:
    """The measures of one graded run, as (label, value, help) for the report page."""
    n = grade.quotes_checked
    return [("Citation precision", share(grade.citation_precision),
             f"Cited quotes found at their offsets in the stored page text ({n} checked)"),
            ("Gold-page recall", share(grade.gold_page_recall), "Share of the question's gold pages fetched"),
            ("Answer recall", share(grade.answer_recall), "Share of the answer terms quoted by a cited finding"),
            ("Sentences cited", share(grade.sentences_cited), "Share of report sentences that cite"),
            ("Numbers in quotes", share(grade.numbers_in_quotes), "Share of stated numbers found in cited quotes"),
            ("Cost", dollars(grade.cost_usd), ""),
            ("Tokens", f"{grade.input_tokens + grade.output_tokens:,}",
             f"{grade.input_tokens:,} in / {grade.output_tokens:,} out"),
            ("Model calls", str(grade.model_calls), ""), ("Wall time", seconds(grade.wall_seconds), "")]
