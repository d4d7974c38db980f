"""Persistence: the run store (protocols in base.py, SQLite in sqlite.py) and saved run files with timelines."""
