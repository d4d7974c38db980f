"""Remote search providers (Brave, Tavily, SearXNG, Anthropic's server tool) and what they share (base.py)."""
