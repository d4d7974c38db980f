"""Shared pieces of the pages: Markdown-safe text for Streamlit widgets, the report view of one saved run (with its
benchmark grading), and a suite's scoreboard."""
from __future__ import annotations

import re
from typing import Any

import streamlit as st

from pipeline.bench.grade import RunGrade
from pipeline.bench.saved import BenchSummary
from pipeline.config import SHIPPED_CORPORA, Settings
from pipeline.core.schema import RunResult
from pipeline.store.base import RunStore
from ui.library import is_extractive, mode_label, report_path, run_header
from ui.panels import grading_html
from ui.passage import corpus_text, passage, recorded_text
from ui.render import strip_bidi
from ui.scoreboard import verdict
from ui.views import BoardView, ReportView, table

_MD_PUNCT = re.compile(r"([!-/:-@\[-`{-~])")
LABEL = ("Machine-assisted report. Every [F#] citation is a verbatim quote that code found in a page this run "
         "fetched; click a citation to see the quote and open the source at that passage. The quotes are real, "
         "but whether a sentence reads them fairly was checked by a model, so check the sources before relying on it.")
EXTRACTIVE_LABEL = ("Extractive report, no model: code selected every sentence from a page this run fetched and "
                    "quotes it verbatim; no model wrote or judged anything. Click a citation to see the quote and "
                    "open the source at that passage. Code picks sentences by their words, so check that they "
                    "answer the question.")


_AUTOLINK = re.compile(r"(\\:)(?=\\/\\/)|(?<=www)(?=\\\.)|(?=\\@)", re.I)


def md_text(text: object) -> str:
    """Untrusted text for Streamlit's Markdown (titles, captions, alerts): one line, every punctuation escaped, so
    no link, image, HTML, colour directive, emoji code or formula can form. GFM turns bare addresses into links
    after escapes are resolved, so a zero-width space also breaks every "://", "www." and "@". Bidirectional
    controls are removed."""
    escaped = _MD_PUNCT.sub(r"\\\1", " ".join(strip_bidi(str(text)).split()))
    return _AUTOLINK.sub(lambda m: (m.group(1) or "") + "\u200b", escaped)


def share_link(run_id: str) -> str:
    """The absolute shareable link when the browser told us the app's address, else the path."""
    base = (st.context.url or "").rstrip("/")
    base = re.sub(r"/(report|live|about)$", "", base)
    return f"{base}{report_path(run_id)}"


def show_report(view: ReportView, *, key: str = "report",
                grading: tuple[BenchSummary, RunGrade] | None = None) -> None:
    """The report of one run, rendered inert, then its suite's grading, checks, evidence, timeline and downloads."""
    rr, row = view.rr, view.row
    st.title(md_text(view.title))
    no_model = is_extractive(rr.mode, rr.models)
    st.caption(md_text(f"Run {rr.run_id} · {run_header(rr)} · {rr.status}"
                       + (f" · {row.date} UTC" if row.date else "")))
    st.info(EXTRACTIVE_LABEL if no_model else LABEL, icon=":material/info:")
    if rr.status == "failed":
        st.error("This run failed: the report below rests on little or nothing. The problems are listed under it.",
                 icon=":material/error:")
    elif rr.problems:
        n = len(rr.problems)
        st.warning(f"{n} problem{'s' if n != 1 else ''} remain{'s' if n == 1 else ''} in this report after review: "
                   "read the flagged sentences with care (listed under the report).", icon=":material/warning:")
    # The figures and the answer in one element; a reader comes for the answer, so the grading follows it.
    st.html(view.facts + view.html)
    if view.notes:
        st.html(view.notes)
    if grading is not None:
        st.html(grading_html(*grading))

    with st.expander(f"All verified findings ({len(rr.findings)})"):
        if view.findings is not None:
            st.dataframe(view.findings, hide_index=True, width="stretch")
        else:
            st.write("No finding was verified in this run.")
    if view.rejected is not None:
        with st.expander(f"Rejected quotes ({len(rr.rejected)})"):
            st.dataframe(view.rejected, hide_index=True, width="stretch")
    if view.plan is not None:
        with st.expander("Plan"):
            st.dataframe(view.plan, hide_index=True, width="stretch")
    with st.expander("Timeline: searches, fetches and model calls"):
        show_timeline(view)
    c1, c2, c3 = st.columns([1, 1, 3])
    # Both made when clicked: a visitor who only reads costs no serialisation and no stored file, and no copy is held
    # for the session.
    c1.download_button("Report (Markdown)", lambda: rr.report.markdown, file_name=f"report-{rr.run_id}.md",
                       mime="text/markdown", key=f"{key}-md", icon=":material/download:")
    c2.download_button("Run (JSON)", lambda: rr.model_dump_json(indent=2), file_name=f"run-{rr.run_id}.json",
                       mime="application/json", key=f"{key}-json", icon=":material/download:")
    c3.text_input("Shareable link", share_link(rr.run_id), key=f"{key}-link", disabled=True)


def show_passage(rr: RunResult, finding_id: str, runs: RunStore | None) -> None:
    """A finding's quote highlighted in the text the run read of its source, above the report."""
    found = next((f for f in rr.findings if f.id == finding_id), None)
    src = next((s for s in rr.sources if found is not None and s.id == found.source), None)
    text = recorded_text(runs, rr.run_id, src) if src is not None else None
    if src is not None and text is None:
        text = corpus_text(rr, src, SHIPPED_CORPORA, Settings())
    shown = passage(rr, finding_id, text)
    with st.container(border=True):
        if isinstance(shown, str):
            st.warning(md_text(shown), icon=":material/search_off:")
            return
        st.subheader(md_text(f"{shown.finding} in {shown.title}"))
        st.caption(md_text(f"{shown.where} · the text this run read, the quote highlighted"))
        st.html(shown.html)


def expectations_table(grade: RunGrade) -> None:
    st.dataframe(table([{"expectation": e.name, "met": "yes" if e.passed else "no", "detail": e.detail}
                        for e in grade.expectations]), hide_index=True, width="stretch",
                 column_config={"detail": st.column_config.TextColumn("detail", width="large")})


SPLITS_NOTE = ("Dev questions may be used to tune the selector; test questions are held out: written and committed "
               "before any tuning on them, and a change that raises dev but lowers test is rejected "
               "(docs/BENCHMARK.md). The baseline is a plain BM25 top-3 sentence selector over every page of the "
               "same frozen web, computed and graded by the bench the same way: every mode must beat it.")


def titled(title: str, note: str) -> None:
    """A bold title with its note in small grey type under it: one element to send, not two. Both are Markdown
    already escaped."""
    st.markdown(f"**{title}**  \n:small[:gray[{note}]]")


def show_scoreboard(view: BoardView) -> None:
    """One graded suite: the modes side by side, then every question's verdict per mode with a link to its report."""
    board = view.board
    s = board.summary
    graded = s.graded_at[:19].replace("T", " ")
    st.caption(md_text(f"{s.description} " if s.description else "")
               + md_text(f"Suite {s.suite}, version {s.version}, corpus {s.corpus}; graded {graded} UTC by "
                         f"{s.code_version}" + (f" ({s.git_commit[:12]})" if s.git_commit else "")))
    if s.stopped:
        st.warning(f"This bench stopped before every run was made: {md_text(s.stopped)}. The figures cover only "
                   "the runs it made.", icon=":material/block:")
    if not s.grades:
        st.info("No run of this suite has been graded yet.", icon=":material/info:")
        return
    if board.splits:
        titled("Dev and test side by side", SPLITS_NOTE)
        st.dataframe(view.splits, hide_index=True, width="stretch",
                     column_config={"metric": st.column_config.TextColumn("mode", width=200)})
    titled("Modes side by side", md_text(board.budget))
    st.dataframe(view.metrics, hide_index=True, width="stretch", row_height=30,
                 height=35 + 30 * len(board.metrics),
                 column_config={"metric": st.column_config.TextColumn("metric", width=200)})

    failing = sum(q.failing for q in board.questions)
    titled("Questions", f"{failing} of {len(board.questions)} questions fail in at least one mode. A verdict names "
                        "each expectation that failed; open a run's report to see why.")
    failing_only = st.toggle("Only failing questions", key=f"failing-{board.key}")
    config: dict[str, Any] = {"question": st.column_config.TextColumn("question", width="large")}
    for column in board.columns:
        if f"{column} report" in view.questions:
            config[f"{column} report"] = st.column_config.LinkColumn("report", display_text="open", width=50)
    st.dataframe(view.failing if failing_only else view.questions, hide_index=True, width="stretch",
                 column_order=view.order, column_config=config)

    labels = view.labels
    picked = st.selectbox("Open a question", list(labels), index=None, format_func=labels.__getitem__,
                          placeholder="Choose a question to see how each mode was graded",
                          key=f"question-{board.key}")
    if picked is None:
        return
    for mode, grade in board.question(picked):
        v = verdict(grade)
        with st.container(border=True):
            repeat = f", repeat {grade.repeat}" if s.summary.repeats > 1 else ""
            st.markdown(f"**{md_text(mode_label(mode))}**{repeat}: "
                        + (":green[pass]" if v.passed else f":red[fail: {md_text(', '.join(v.failed))}]"))
            st.page_link("ui/pages/report.py", label=f"Open its {mode} report", icon=":material/article:",
                         query_params={"run": grade.run_id})
            if grade.expectations:
                expectations_table(grade)


def show_timeline(view: ReportView) -> None:
    """Per-step totals and every call in order; step wall times only when the run kept no call log."""
    if view.calls is None:
        st.write("No timeline was recorded for this run.")
        return
    if view.steps is None:
        st.caption("This run was saved without its call log, so only the time of each step is known.")
        st.dataframe(view.calls, hide_index=True)
        return
    st.dataframe(view.steps, hide_index=True, column_config={
        "model_calls": st.column_config.NumberColumn("model calls"),
        "cost_usd": st.column_config.NumberColumn("cost", format="$%.4f"),
        "seconds": st.column_config.NumberColumn("time in calls (s)", format="%.2f")})
    st.dataframe(view.calls, hide_index=True, width="stretch",
                 column_config={"cost_usd": st.column_config.NumberColumn("cost", format="$%.5f"),
                                "label": st.column_config.TextColumn("what", width="large")})
