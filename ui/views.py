"""What the public pages show, computed once per data change and shared by every session: the saved-runs table and
its mode comparison, each suite's scoreboard tables, and each saved report's rendered HTML and tables. Each is kept
in a ui/kept.py store under a content key (the library's generation, a run file's mtime and size), so a page view
whose inputs did not change only renders what is kept; ui/costs.py counts each computation. Kept objects are shared
between sessions: callers read them and never change them."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from pipeline.bench.saved import BenchSummary
from pipeline.core.schema import RunResult
from pipeline.store.base import RunStore
from pipeline.store.files import TIMELINE_SUFFIX
from pipeline.store.timeline import Timeline, load_timeline
from ui.costs import count
from ui.kept import Kept
from ui.library import RunLibrary, RunSummary, Snapshot, is_extractive, mode_label, report_path, summarise
from ui.panels import facts_html
from ui.render import Evidence, notes_html, report_html, report_title
from ui.scoreboard import Scoreboard, scoreboard, verdict

# How old a look at the saved-runs folder may be on the pages: a new run appears within a second, and a crowd costs
# one look a second instead of a stat() of every file per view.
RESCAN_SECONDS = 1.0
CHARTS = (("cost_usd", "Mean cost ($)"), ("coverage", "Mean coverage"), ("seconds", "Mean time (s)"))
_KEPT = 64  # reports kept rendered: the ones a crowd opens; an older one is rendered again when opened


def arrow(df: pd.DataFrame) -> pa.Table:
    """`df` as the Arrow table st.dataframe sends, converted once here rather than by Streamlit on every view."""
    return pa.Table.from_pandas(df, preserve_index=False)


@dataclass(frozen=True)
class RunsTable:
    """Every saved run as the Benchmarks page lists it, with the derived columns, and the modes compared over all."""

    df: pd.DataFrame
    graded: bool
    columns: list[str]  # the columns listed, in order
    listed: pa.Table  # those columns of every run, as sent when no filter is set
    by_mode: pa.Table
    options: dict[str, list[str]]  # column -> its values, for the filters


def runs_by_mode(df: pd.DataFrame) -> pa.Table:
    """Per mode (as labelled): runs, mean cost, mean coverage and mean time of the runs in `df`."""
    return arrow(df.assign(mode=df["mode"].map(mode_label)).groupby("mode").agg(
        runs=("run_id", "count"), cost_usd=("cost_usd", "mean"), coverage=("coverage", "mean"),
        seconds=("seconds", "mean")).reset_index())


def bar_spec(metric: str, title: str) -> dict[str, Any]:
    """A horizontal bar per mode of `metric` under `title`: the Vega-Lite spec itself, so no chart library validates
    it per view."""
    return {"title": {"text": title, "anchor": "start"}, "mark": {"type": "bar"}, "height": 160, "width": 200,
            "encoding": {"y": {"field": "mode", "type": "nominal", "title": None, "sort": None},
                         "x": {"field": metric, "type": "quantitative", "title": None},
                         "tooltip": [{"field": "mode", "type": "nominal"},
                                     {"field": metric, "type": "quantitative"}]}}


# The modes compared, one chart of a panel per measure: one element to send, not three charts in three columns.
MODES_CHART: dict[str, Any] = {"hconcat": [bar_spec(metric, title) for metric, title in CHARTS],
                               "resolve": {"scale": {"x": "independent"}}}


_TABLES: Kept[RunsTable] = Kept(4)
_SUITES: Kept[dict[str, str]] = Kept(4)


def _runs_table(rows: list[RunSummary], summaries: Mapping[str, BenchSummary]) -> RunsTable:
    count("runs table built")
    df = pd.DataFrame([r.model_dump() for r in rows])
    df["coverage"] = [r.answered / r.planned if r.planned else 0.0 for r in rows]
    df["covered"] = df.answered.astype(str) + " / " + df.planned.astype(str)
    df["report"] = df.run_id.map(report_path)
    grades = {(key, g.run_id): verdict(g).text for key, summary in summaries.items() for g in summary.grades}
    df["grade"] = [grades.get((r.suite, r.run_id), "") for r in rows]
    columns = ["report", "question", "suite", "mode", "models", "date", "status", *(["grade"] if grades else []),
               "findings", "rejected", "covered", "problems", "cost_usd", "seconds"]
    return RunsTable(df=df, graded=bool(grades), columns=columns, listed=arrow(df[columns]),
                     by_mode=runs_by_mode(df),
                     options={c: sorted(df[c].unique()) for c in ("suite", "mode", "models")})


def runs_table(lib: RunLibrary, snap: Snapshot) -> RunsTable:
    """The table of the snapshot's rows (there are some), kept until the library changes."""
    return _TABLES.get((str(lib.folder), snap.generation), lambda: _runs_table(snap.rows, snap.summaries))


def suite_choices(lib: RunLibrary, snap: Snapshot) -> dict[str, str]:
    """Each graded suite (the one with the most graded runs first: the fullest picture) -> how the picker names it."""
    def build() -> dict[str, str]:
        summaries = snap.summaries
        return {k: f"{summaries[k].suite} (version {summaries[k].version}, corpus {summaries[k].corpus}, "
                   f"{len(summaries[k].questions) or len({g.question_id for g in summaries[k].grades})} questions)"
                for k in sorted(summaries, key=lambda k: (-len(summaries[k].grades), k))}
    return _SUITES.get((str(lib.folder), snap.generation), build)


@dataclass(frozen=True)
class BoardView:
    """One suite's scoreboard with its tables ready to show: splits, metrics, and the questions (all, failing)."""

    board: Scoreboard
    splits: pa.Table
    metrics: pa.Table
    questions: pa.Table
    failing: pa.Table
    order: list[str]
    labels: dict[str, str]


def _questions_frame(board: Scoreboard, *, failing_only: bool) -> pd.DataFrame:
    df = pd.DataFrame(board.question_rows(failing_only=failing_only))
    for column in board.columns:
        if f"{column} run" in df:
            df[f"{column} report"] = df[f"{column} run"].map(lambda r: report_path(r) if r else None)
    return df


_BOARDS: Kept[BoardView] = Kept(32)


def _board(suite: str, summary: BenchSummary, rows: list[RunSummary]) -> BoardView:
    count("scoreboard built")
    board = scoreboard(suite, summary, rows)
    questions = _questions_frame(board, failing_only=False)
    order = ["question", *(["repeat"] if "repeat" in questions else [])]
    for column in board.columns:
        if f"{column} report" in questions:
            order += [column, f"{column} report"]
    labels = {q.question_id: ("fail · " if q.failing else "pass · ") + f"{q.question_id}: {q.question}"[:140]
              for q in board.questions}
    return BoardView(board=board, splits=arrow(pd.DataFrame(board.splits)), metrics=arrow(pd.DataFrame(board.metrics)),
                     questions=arrow(questions), failing=arrow(_questions_frame(board, failing_only=True)),
                     order=order, labels=labels)


def board_view(lib: RunLibrary, snap: Snapshot, suite: str) -> BoardView:
    """The scoreboard of `suite` (it has a summary), kept until the library changes."""
    return _BOARDS.get((str(lib.folder), snap.generation, suite),
                       lambda: _board(suite, snap.summaries[suite], snap.rows))


@dataclass(frozen=True)
class ReportView:
    """One run's report page content: the run, its table row, title, rendered report and notes, and its tables."""

    rr: RunResult
    row: RunSummary
    title: str
    facts: str  # the five figures above the report (ui/panels.py)
    html: str
    notes: str
    findings: pa.Table | None
    rejected: pa.Table | None
    plan: pa.Table | None
    timeline: Timeline
    calls: pa.Table | None
    steps: pa.Table | None


def table(rows: list[dict[str, Any]]) -> pa.Table | None:
    """Rows as an Arrow table (no pandas on the way), or None when there are none."""
    return pa.Table.from_pylist(rows) if rows else None


def _timeline_frames(timeline: Timeline) -> tuple[pa.Table | None, pa.Table | None]:
    """(every call, per-step totals) of a timeline; per-step is None when only step times were kept."""
    entries = timeline.entries
    if timeline.origin == "timings":
        return table([{"step": e.step, "seconds": e.ms / 1000} for e in entries]), None
    steps: dict[str, dict[str, Any]] = {}
    for e in entries:
        s = steps.setdefault(e.step, {"step": e.step, "searches": 0, "fetches": 0, "model_calls": 0, "tokens": 0,
                                      "cost_usd": 0.0, "seconds": 0.0})
        s["searches"] += e.kind == "search"
        s["fetches"] += e.kind == "fetch"
        s["model_calls"] += e.kind == "model"
        s["tokens"] += e.tokens
        s["cost_usd"] += e.cost_usd
        s["seconds"] += e.ms / 1000
    for s in steps.values():
        s["seconds"] = round(s["seconds"], 2)
    calls = [{**e.model_dump(exclude={"ms"}), "seconds": round(e.ms / 1000, 2)} for e in entries]
    return table(calls), table(list(steps.values()))


def report_view(rr: RunResult, timeline: Timeline) -> ReportView:
    """Everything the report page computes from one run: built anew; kept_report_view keeps saved runs'."""
    count("report rendered")
    titles = {s.id: s.title or "Untitled" for s in rr.sources}
    findings = table([{
        "id": f.id, "sub-question": f.sub_question or "", "claim": f.claim, "quote": f.quote,
        "source": f"{f.source}: {titles.get(f.source, '')}", "support": f.support,
        "confidence": f.confidence} for f in rr.findings])
    rejected = table([{"source": r.source, "quote": r.quote, "reason": r.reason} for r in rr.rejected])
    plan = table([{
        "id": sq.id, "sub-question": sq.question, "success criterion": sq.success_criterion,
        "proxy": sq.proxy or "", "premise check": sq.is_premise_check, "queries": " | ".join(sq.queries)}
        for sq in (rr.plan.sub_questions if rr.plan else [])])
    calls, steps = _timeline_frames(timeline)
    ev = Evidence.of(rr)
    row = summarise(rr, file="", suite="")
    return ReportView(rr=rr, row=row, title=report_title(rr),
                      facts=facts_html(rr, row, no_model=is_extractive(rr.mode, rr.models)),
                      html=report_html(rr, title=False, evidence=ev), notes=notes_html(rr, ev), findings=findings,
                      rejected=rejected,
                      plan=plan, timeline=timeline, calls=calls, steps=steps)


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st_ = path.stat()
    except OSError:
        return None
    return st_.st_mtime_ns, st_.st_size


_REPORTS: Kept[ReportView | None] = Kept(_KEPT)


def _kept(path: Path, lib: RunLibrary, store: RunStore | None, run_id: str) -> ReportView | None:
    rr = lib.load(run_id)
    if rr is None:
        return None
    return report_view(rr, load_timeline(rr, path.parent, store))


def kept_report_view(lib: RunLibrary, run_id: str, store: RunStore | None) -> ReportView | None:
    """The report of a run saved in the library's folder, kept while its file (and timeline file) are unchanged;
    None when no file there holds it."""
    if lib.path_of(run_id) is None:
        lib.refresh()
    found = lib.signature(run_id)
    if found is None:
        return None
    path, mtime, size = found
    timeline = _stat(path.parent / f"{run_id}{TIMELINE_SUFFIX}")
    return _REPORTS.get((str(path), mtime, size, timeline, store is not None, run_id),
                        lambda: _kept(path, lib, store, run_id))

