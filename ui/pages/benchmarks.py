"""Benchmarks (public, no keys, no network): each graded suite's scoreboard, every saved run in a filterable table,
and the modes compared."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from ui.components import md_text, show_scoreboard
from ui.library import mode_label, report_path
from ui.scoreboard import scoreboard, verdict
from ui.state import config, library

cfg = config()
st.title("Benchmarks")
st.caption("Saved research runs. Every citation in their reports is a verbatim quote that code found in a fetched "
           "page; open a report to check them yourself.")

rows, errors = library(cfg).refresh()
summaries = library(cfg).summaries()
for name, reason in errors:
    st.warning(f"{md_text(name)} was skipped: {md_text(reason)}", icon=":material/warning:")

if summaries:
    st.header("Scoreboard")
    st.caption("Each suite's questions graded in code (docs/BENCHMARK.md): citations re-checked at their offsets, "
               "gold pages fetched, answer terms quoted, and each expectation of the question met.")
    # The suite with the most graded runs opens first: the fullest picture of the program.
    order = sorted(summaries, key=lambda k: (-len(summaries[k].grades), k))
    suite = st.selectbox("Graded suite", order, key="suite", format_func=lambda k: (
        f"{summaries[k].suite} (version {summaries[k].version}, corpus {summaries[k].corpus}, "
        f"{len(summaries[k].questions) or len({g.question_id for g in summaries[k].grades})} questions)"))
    show_scoreboard(scoreboard(suite, summaries[suite], rows))
    ungraded = sorted({r.suite for r in rows} - set(summaries))
    if ungraded:
        st.caption(md_text(f"Not graded (no summary.json), listed with every saved run below: {', '.join(ungraded)}"))
    st.header("All saved runs")

if not rows and summaries:
    st.info("No run files are saved beside these summaries, so their reports cannot be opened.",
            icon=":material/info:")
    st.stop()
if not rows:
    st.info(
        "No saved runs yet. Produce one with\n\n"
        "`python -m pipeline run \"QUESTION\" --mode fixed --json benchmark_runs/SUITE/NAME.json`\n\n"
        "(or `--mode tools`, or `--mode extractive`, which needs no key), then reload this page. Each JSON file "
        "under `benchmark_runs/` is one run; a sub-folder names its suite.", icon=":material/lightbulb:")
    st.stop()

df = pd.DataFrame([r.model_dump() for r in rows])
df["coverage"] = df.apply(lambda r: r.answered / r.planned if r.planned else 0.0, axis=1)
df["covered"] = df.answered.astype(str) + " / " + df.planned.astype(str)
df["report"] = df.run_id.map(report_path)
graded = {(key, g.run_id): verdict(g).text for key, summary in summaries.items() for g in summary.grades}
df["grade"] = [graded.get((r.suite, r.run_id), "") for r in rows]

f1, f2, f3 = st.columns(3)
suites = f1.multiselect("Suite", sorted(df.suite.unique()), placeholder="All suites")
modes = f2.multiselect("Mode", sorted(df["mode"].unique()), placeholder="All modes")
models = f3.multiselect("Models", sorted(df.models.unique()), placeholder="All models")
keep = pd.Series(True, index=df.index)
for column, wanted in (("suite", suites), ("mode", modes), ("models", models)):
    if wanted:
        keep &= df[column].isin(wanted)
shown = df[keep]

st.dataframe(
    shown[["report", "question", "suite", "mode", "models", "date", "status", *(["grade"] if graded else []),
           "findings", "rejected", "covered", "problems", "cost_usd", "seconds"]],
    hide_index=True, width="stretch",
    column_config={
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
    })
st.caption(f"{len(shown)} of {len(df)} runs shown.")

pick, go = st.columns([4, 1], vertical_alignment="bottom")
labels = {r.run_id: f"{r.question[:110]} ({mode_label(str(r.mode))}, {r.run_id})"
          for r in shown.itertuples()}
choice = pick.selectbox("Open a report", list(labels), format_func=labels.__getitem__)
if choice:
    go.page_link("ui/pages/report.py", label="Open the report", icon=":material/article:",
                 query_params={"run": choice})

st.subheader("Modes compared")
by_mode = shown.assign(mode=shown["mode"].map(mode_label)).groupby("mode").agg(
    runs=("run_id", "count"), cost_usd=("cost_usd", "mean"), coverage=("coverage", "mean"),
    seconds=("seconds", "mean")).reset_index()
if by_mode.empty:
    st.write("No runs match the filters.")
else:
    st.caption("Means over the runs shown. Coverage is the share of planned sub-questions answered.")
    c1, c2, c3 = st.columns(3)
    for col, metric, title in ((c1, "cost_usd", "Mean cost ($)"), (c2, "coverage", "Mean coverage"),
                               (c3, "seconds", "Mean time (s)")):
        col.markdown(f"**{title}**")
        col.bar_chart(by_mode, x="mode", y=metric, height=160, x_label="", y_label="", horizontal=True)
    st.dataframe(by_mode, hide_index=True, column_config={
        "cost_usd": st.column_config.NumberColumn("mean cost", format="$%.4f"),
        "coverage": st.column_config.NumberColumn("mean coverage", format="percent"),
        "seconds": st.column_config.NumberColumn("mean time (s)", format="%.1f")})
