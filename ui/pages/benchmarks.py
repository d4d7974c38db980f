"""Benchmarks (public, no keys, no network): each graded suite's scoreboard, every saved run in a filterable table,
and the modes compared."""
from ui.page_benchmarks import show

show()
