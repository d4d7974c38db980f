"""The Streamlit app's pages and components; logic lives in pipeline/ (saved_runs, render, access, live)."""
