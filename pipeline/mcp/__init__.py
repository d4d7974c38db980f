"""The MCP server: Verbatim's tools for an MCP client over stdio (server.py), the budget presets and the server's
caps (limits.py), and run events as progress notifications (progress.py)."""
