"""The Benchmarks page (ui/pages/benchmarks.py runs it): each graded suite's scoreboard, every saved run in a
filterable table, and the modes compared. A module's function, so it is compiled once per process, not on each view
(Streamlit drops its compiled page scripts whenever no session is open)."""
from __future__ import annotations

import pandas as pd
import pyarrow as pa
import streamlit as st

from ui.components import md_text, show_scoreboard
from ui.library import RunLibrary, Snapshot
from ui.state import config, library
from ui.views import MODES_CHART, RESCAN_SECONDS, RunsTable, board_view, runs_by_mode, runs_table, suite_choices

# Built once: Streamlit copies a column configuration before it changes it.
RUNS_COLUMNS = {
    "report": st.column_config.LinkColumn("report", display_text="open", width=50,
                                          help="The shareable link of the run's report"),
    "question": st.column_config.TextColumn("question", width="medium"),
    "models": st.column_config.TextColumn("models", width="small",
                                          help="lead / worker model; \"no model\" for extractive runs"),
    "date": st.column_config.TextColumn("date (UTC)", width="small"),
    "grade": st.column_config.TextColumn("grade", width="small", help="The suite's verdict on this run"),
    "findings": st.column_config.NumberColumn("verified", width=60,
                                              help="Findings whose quote code located in a fetched page"),
    "rejected": st.column_config.NumberColumn("rejected", width=60, help="Quotes refused: not in the page"),
    "covered": st.column_config.TextColumn("coverage", width=70,
                                           help="Sub-questions answered / planned (cut ones count as planned)"),
    "problems": st.column_config.NumberColumn("problems", width=65, help="Problems left after review"),
    "cost_usd": st.column_config.NumberColumn("cost", format="$%.4f", width=70),
    "seconds": st.column_config.NumberColumn("time (s)", format="%.1f", width=65),
}
MODE_COLUMNS = {
    "cost_usd": st.column_config.NumberColumn("mean cost", format="$%.4f"),
    "coverage": st.column_config.NumberColumn("mean coverage", format="percent"),
    "seconds": st.column_config.NumberColumn("mean time (s)", format="%.1f"),
}
NO_RUNS = ("No saved runs yet. Produce one with\n\n"
           "`python -m pipeline run \"QUESTION\" --mode fixed --json benchmark_runs/SUITE/NAME.json`\n\n"
           "(or `--mode tools`, or `--mode extractive`, which needs no key), then reload this page. Each JSON file "
           "under `benchmark_runs/` is one run; a sub-folder names its suite.")


def show() -> None:
    """The page, for the visitor of this script run."""
    cfg = config()
    st.title("Benchmarks")
    st.caption("Saved research runs. Every citation in their reports is a verbatim quote that code found in a fetched "
               "page; open a report to check them yourself.")
    lib = library(cfg)
    snap = lib.snapshot(RESCAN_SECONDS)
    for name, reason in snap.errors:
        st.warning(f"{md_text(name)} was skipped: {md_text(reason)}", icon=":material/warning:")
    if snap.summaries:
        scoreboards(lib, snap)
    if not snap.rows and snap.summaries:
        st.info("No run files are saved beside these summaries, so their reports cannot be opened.",
                icon=":material/info:")
    elif not snap.rows:
        st.info(NO_RUNS, icon=":material/lightbulb:")
    else:
        modes_compared(saved_runs(runs_table(lib, snap)))


def scoreboards(lib: RunLibrary, snap: Snapshot) -> None:
    """The scoreboard of the graded suite picked, then the heading of the saved runs."""
    st.header("Scoreboard")
    st.caption("Each suite's questions graded in code (docs/BENCHMARK.md): citations re-checked at their offsets, "
               "gold pages fetched, answer terms quoted, and each expectation of the question met.")
    choices = suite_choices(lib, snap)
    suite = st.selectbox("Graded suite", list(choices), key="suite", format_func=choices.__getitem__)
    show_scoreboard(board_view(lib, snap, suite))
    ungraded = sorted({r.suite for r in snap.rows} - set(snap.summaries))
    if ungraded:
        st.caption(md_text(f"Not graded (no summary.json), listed with every saved run below: {', '.join(ungraded)}"))
    st.header("All saved runs")


def saved_runs(table: RunsTable) -> pa.Table:
    """The filters and the runs they keep, each with a link to its report; returns those runs compared by mode.
    The table's "open" column links each report; for keyboards and screen readers, which cannot reach links drawn
    in the table's canvas, a link leads to the Report page's list of runs (a picker here, with its hundreds of
    labels, was a fifth of this page's bytes and a tenth of its CPU)."""
    df = table.df
    f1, f2, f3 = st.columns(3)
    suites = f1.multiselect("Suite", table.options["suite"], placeholder="All suites")
    modes = f2.multiselect("Mode", table.options["mode"], placeholder="All modes")
    models = f3.multiselect("Models", table.options["models"], placeholder="All models")
    shown = df
    if suites or modes or models:
        keep = pd.Series(True, index=df.index)
        for column, wanted in (("suite", suites), ("mode", modes), ("models", models)):
            if wanted:
                keep &= df[column].isin(wanted)
        shown = df[keep]
    st.dataframe(table.listed if shown is df else shown[table.columns], hide_index=True, width="stretch",
                 column_config=RUNS_COLUMNS)
    st.caption(f"{len(shown)} of {len(df)} runs shown.")
    st.page_link("ui/pages/report.py", label="Open a report from a list of every saved run",
                 icon=":material/article:")

    return table.by_mode if shown is df else runs_by_mode(shown)


def modes_compared(by_mode: pa.Table) -> None:
    """A bar chart per measure and a table of the means, over the runs shown."""
    st.subheader("Modes compared")
    if not by_mode.num_rows:
        st.write("No runs match the filters.")
        return
    st.caption("Means over the runs shown. Coverage is the share of planned sub-questions answered.")
    st.vega_lite_chart(by_mode, MODES_CHART, width="content")
    st.dataframe(by_mode, hide_index=True, column_config=MODE_COLUMNS)
