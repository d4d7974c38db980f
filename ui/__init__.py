"""The Streamlit app: pages, components, session state, safe rendering, saved-run library, live jobs, access."""
