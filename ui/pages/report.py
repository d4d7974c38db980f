"""Report (public): one saved run, opened directly by its shareable link /report?run=<run_id>."""
from ui.page_report import show

show()
