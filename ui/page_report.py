"""The Report page (ui/pages/report.py runs it): one saved run, opened by its shareable link /report?run=<run_id>. A
module's function, so it is compiled once per process, not on each view."""
from __future__ import annotations

import streamlit as st

from ui.components import md_text, show_passage, show_report
from ui.config import AppConfig
from ui.library import mode_label
from ui.state import config, find_report, library, run_status, store, store_problem
from ui.views import RESCAN_SECONDS


def show() -> None:
    """The page, for the visitor of this script run."""
    cfg = config()
    run_id = st.query_params.get("run", "").strip()
    found = find_report(cfg, run_id) if run_id else None
    if found is None and run_id and run_status(cfg, run_id) in ("running", "interrupted"):
        st.title("Report")
        wait_for(cfg, run_id)
    elif found is None:
        pick_run(cfg, run_id)
    else:
        if finding := st.query_params.get("passage", "").strip():  # a document's quote, opened from its citation
            show_passage(found.rr, finding, store(cfg))
        show_report(found, grading=library(cfg).grading(found.rr.run_id))


@st.fragment(run_every=2.0)
def wait_for(cfg: AppConfig, run: str) -> None:
    """A run without its result yet: say so, and show the report once it is finished (by any instance)."""
    status = run_status(cfg, run)
    if status == "running":
        st.info("This run is still in progress; its report appears here when it finishes.",
                icon=":material/hourglass_top:")
    elif status == "interrupted":
        st.warning("This run stopped before it finished (its server instance went away). A visitor with the access "
                   "code can resume it from the Live research page.", icon=":material/pause_circle:")
    else:
        st.rerun()


def pick_run(cfg: AppConfig, run_id: str) -> None:
    """No report under `run_id` (or none asked for): say why, and offer the saved runs."""
    st.title("Report")
    if run_id and (problem := store_problem()):
        st.error(md_text(f"The run store cannot be read, so runs made here cannot be shown now: {problem}"),
                 icon=":material/error:")
    elif run_id:
        st.error(f"No saved run has the id {md_text(run_id[:80])}. Pick one below, or check the link.",
                 icon=":material/search_off:")
    rows, _ = library(cfg).refresh(RESCAN_SECONDS)
    if not rows:
        st.info("No saved runs yet: see the Benchmarks page for how to produce one.")
        return
    labels = {r.run_id: f"{r.question[:110]} ({mode_label(r.mode)}, {r.date or r.run_id})" for r in rows}
    choice = st.selectbox("Saved runs", list(labels), index=None, format_func=labels.__getitem__,
                          placeholder="Choose a run to open")
    if choice:
        st.query_params["run"] = choice
        st.rerun()
