"""Model clients built from the settings: the one place that chooses an adapter for a run (RESEARCH_MODEL_PROVIDER).

The adapters are imported when first needed: each SDK takes about a second to import, and extractive runs, `runs`,
`export` and the app's browsing pages never call a model.
"""
from __future__ import annotations

from pipeline.config import Settings
from pipeline.core.budget import Budget
from pipeline.core.events import EventSink
from pipeline.models.base import ModelClient, ModelTransport


def live_transport(settings: Settings, budget: Budget, events: EventSink) -> ModelTransport:
    """The transport that sends requests to the configured model provider (needs its key)."""
    if settings.model_provider == "openai":
        from pipeline.models.openai import OpenAITransport

        return OpenAITransport(settings, budget, events)
    from pipeline.models.anthropic import AnthropicTransport

    return AnthropicTransport(settings, budget, events)


def model_client(settings: Settings, budget: Budget, events: EventSink | None = None, *,
                 transport: ModelTransport | None = None) -> ModelClient:
    """The model client the steps call; requests go through `transport` when given (replay), else the live one."""
    if settings.model_provider == "openai":
        from pipeline.models.openai import OpenAIChat

        return OpenAIChat(settings, budget, events, transport=transport)
    from pipeline.models.anthropic import LLM

    return LLM(settings, budget, events, transport=transport)
