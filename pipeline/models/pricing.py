"""Pinned model prices, US dollars per million tokens of each kind (RESEARCH_PRICES overrides them)."""
from __future__ import annotations

from pipeline.core.schema import ModelPrice

# Pinned per model id. Override with RESEARCH_PRICES='{"model": {"input": ..., ...}}'.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "claude-opus-5-5": ModelPrice(input=5.0, output=25.0, cache_write=6.25, cache_read=0.50),
    "claude-sonnet-5-5": ModelPrice(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30),
    "claude-haiku-5-5": ModelPrice(input=1.0, output=5.0, cache_write=1.25, cache_read=0.10),
}
