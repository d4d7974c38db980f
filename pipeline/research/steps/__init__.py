"""The steps of a run: plan, research (fixed and tools), analyse, write, review, and their checks in code."""
