"""The tools a research worker calls: web_search, fetch_page, find_in_page, record_finding, calculate."""
