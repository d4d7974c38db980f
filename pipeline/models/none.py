"""The model client of extractive runs: there is no model, so every call is refused before anything is sent."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

from pipeline.core.budget import Phase
from pipeline.models.base import LLMError, ModelReply, T, Turn

REFUSAL = "this run uses no model (extractive mode), so no model call may be made"


class NoModel:
    """A ModelClient whose every call raises LLMError: an extractive run cannot reach a model, even by mistake."""

    def _refuse(self) -> NoReturn:
        raise LLMError("no_model", REFUSAL)

    def call(self, *, model: str, system: str, messages: list[dict[str, Any]], max_tokens: int,
             tools: Sequence[dict[str, Any]] | None = None, tool_choice: dict[str, Any] | None = None,
             phase: Phase = Phase.RESEARCH, purpose: str) -> ModelReply:
        self._refuse()

    def structured(self, *, model: str, system: str, messages: list[dict[str, Any]] | str, output: type[T],
                   max_tokens: int, phase: Phase = Phase.RESEARCH, purpose: str, cache: bool = True) -> T:
        self._refuse()

    def tool_turn(self, *, model: str, system: str, turns: Sequence[Turn], tools: Sequence[dict[str, Any]],
                  max_tokens: int, phase: Phase = Phase.RESEARCH, purpose: str) -> ModelReply:
        self._refuse()

    def check_tools(self, *, model: str, tools: Sequence[dict[str, Any]], phase: Phase = Phase.RESEARCH) -> None:
        self._refuse()

    def warm_prefix(self, *, model: str, system: str, tools: Sequence[dict[str, Any]],
                    phase: Phase = Phase.RESEARCH) -> None:
        """Nothing to warm without a model."""

    def server_web_search(self, query: str, max_results: int, recency_days: int | None = None, *,
                          phase: Phase = Phase.RESEARCH) -> list[dict[str, Any]]:
        self._refuse()
