"""About: how the agent works, and what its checks prove and do not prove."""
from __future__ import annotations

import streamlit as st

from ui.about_text import ABOUT

st.title("About Verbatim")
st.markdown(ABOUT)
