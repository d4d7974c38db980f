"""One research run: its shared context, the orchestrator, the four steps, the worker tools and the prompts."""
