"""Everything that opens a connection for pages and searches: the SSRF guard, guarded fetch, extraction, search."""
