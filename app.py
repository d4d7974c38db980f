"""Streamlit entry: the pages and their URL paths. Thin: pages live in ui/pages/, logic in pipeline/ and ui/."""
from __future__ import annotations

import streamlit as st

from ui.state import upload_gate

st.set_page_config(page_title="Verbatim", page_icon="📑", layout="wide")
upload_gate()  # before any page: an upload from a session without the access code is refused from the first run on
page = st.navigation([
    st.Page("ui/pages/benchmarks.py", title="Benchmarks", icon=":material/table_chart:", default=True),
    st.Page("ui/pages/report.py", title="Report", icon=":material/article:", url_path="report"),
    st.Page("ui/pages/live.py", title="Live research", icon=":material/science:", url_path="live"),
    st.Page("ui/pages/about.py", title="About", icon=":material/info:", url_path="about"),
])
page.run()
