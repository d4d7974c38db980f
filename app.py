"""Streamlit entry: lists the saved benchmark runs (public, no keys). Thin: logic lives in pipeline/."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from pipeline.saved_runs import load_saved_runs

RUNS_DIR = Path(__file__).parent / "benchmark_runs"

st.set_page_config(page_title="Verbatim", layout="wide")
st.title("Verbatim")
st.caption("Research reports in which every citation is a verbatim quote that code found in a fetched page.")

runs, errors = load_saved_runs(RUNS_DIR)
if not runs:
    st.info(
        "No saved runs yet. Produce one with "
        "`python -m pipeline run \"QUESTION\" --json benchmark_runs/NAME.json`, then reload this page."
    )
else:
    st.dataframe([r.model_dump() for r in runs], hide_index=True, use_container_width=True)
for name, reason in errors:
    st.warning(f"{name} was skipped: {reason}")
