"""Pinned model prices, US dollars per million tokens of each kind (RESEARCH_PRICES overrides them)."""
from __future__ import annotations

from pipeline.core.schema import ModelPrice

# Pinned per model id. Override with RESEARCH_PRICES='{"model": {"input": ..., ...}}'.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "claude-opus-5-5": ModelPrice(input=5.0, output=25.0, cache_write=6.25, cache_read=0.50),
    "claude-sonnet-5-5": ModelPrice(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30),
    "claude-haiku-5-5": ModelPrice(input=1.0, output=5.0, cache_write=1.25, cache_read=0.10),
    # OpenAI bills no cache writes: a prefix it caches costs the input price, and reads of it the cached price.
    "gpt-4.1": ModelPrice(input=2.0, output=8.0, cache_write=2.0, cache_read=0.50),
    "gpt-4.1-mini": ModelPrice(input=0.40, output=1.60, cache_write=0.40, cache_read=0.10),
}
# A model served locally (vLLM, llama.cpp, Ollama) costs nothing per token, but only an explicit price says so:
# RESEARCH_PRICES='{"llama3.1:8b": {"input": 0, "output": 0, "cache_write": 0, "cache_read": 0}}'.
