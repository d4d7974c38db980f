"""What the steps call on a model, whatever the provider: the ModelClient protocol and its provider-neutral types.

A model client makes budgeted, recorded calls and never lets a provider's exception out: a failure is an LLMError
whose message says what to do. Below it, a ModelTransport sends one request body and returns the answer; replay
serves recorded answers by wrapping the transport, so the turn logic above it is the same live and replayed.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from pipeline.core.budget import Phase
from pipeline.core.event_types import ModelErrorKind
from pipeline.core.schema import Usage

T = TypeVar("T", bound=BaseModel)
ErrorKind = ModelErrorKind

# The purpose prefix of a cache-warming request (ModelClient.warm_prefix): its reply is never read, so an offline
# replay that lacks one skips it (pipeline/replay/recorded.py) and the run is reproduced as recorded.
WARM_PURPOSE = "warm:"


class LLMError(Exception):
    """A model call failed in a way the caller must handle; str() is one clear line with the fix, never a key.

    `replayed` marks a failure served from a recording rather than met now.
    """

    def __init__(self, kind: ErrorKind, message: str, *, replayed: bool = False):
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.replayed = replayed


class OutputInvalid(LLMError):
    """The model answered twice (a structured reply and its repair) with output that does not match the schema."""

    def __init__(self, message: str, *, replayed: bool = False):
        super().__init__("malformed", message, replayed=replayed)


# The input of a tool call whose arguments were not a JSON object: {UNPARSED_ARGUMENTS: the text as sent}.
UNPARSED_ARGUMENTS = "_unparsed_arguments"


class ToolUse(BaseModel):
    """One tool call the model asked for."""

    id: str
    name: str
    input: dict[str, Any]


class ModelReply(BaseModel):
    """One assistant turn (pause_turn continuations merged); `usage` is this turn's only, with cost.

    `stop_reason` is in the neutral vocabulary: "end_turn", "tool_use", "max_tokens" (else the provider's own word).
    `provider_turn` is the turn as its provider sent it: only the adapter that made it reads it (to send the turn
    back in a conversation exactly as it came); the steps read `text`, `tool_uses` and `stop_reason`.
    """

    model: str
    stop_reason: str | None
    provider_turn: list[dict[str, Any]]
    text: str
    tool_uses: list[ToolUse]
    usage: Usage
    request_id: str | None = None


@dataclass(frozen=True)
class ToolResult:
    """What one tool call returned, for the model."""

    tool_use_id: str
    content: str
    is_error: bool = False


@dataclass(frozen=True)
class ToolResults:
    """The user turn after a tool-calling reply: one result per tool use, in order, then an optional note."""

    results: Sequence[ToolResult]
    note: str | None = None


# One turn of a tool-calling conversation: a user message, an assistant reply, or the results of its tool calls.
Turn = str | ModelReply | ToolResults


@dataclass(frozen=True)
class Exchange:
    """One answered request: the provider's response body, its usage (with cost) and the provider's request id."""

    data: dict[str, Any]
    usage: Usage
    request_id: str | None = None


class ModelTransport(Protocol):
    """Sends one request body: charged to the budget and reported as events; raises LLMError (not yet reported)."""

    def send(self, body: dict[str, Any], phase: Phase, purpose: str) -> Exchange: ...


class ModelClient(Protocol):
    """The model calls the steps make. `purpose` names the call's stream (planner:0, worker:Q1, writer, ...).

    Messages are {"role", "content"} dicts with text content; a tool is {"name", "description", "input_schema"}
    (a JSON schema). Each adapter turns these into its provider's shapes.
    """

    def call(self, *, model: str, system: str, messages: list[dict[str, Any]], max_tokens: int,
             tools: Sequence[dict[str, Any]] | None = None, tool_choice: dict[str, Any] | None = None,
             phase: Phase = Phase.RESEARCH, purpose: str) -> ModelReply:
        """One assistant turn after `messages`."""
        ...

    def structured(self, *, model: str, system: str, messages: list[dict[str, Any]] | str, output: type[T],
                   max_tokens: int, phase: Phase = Phase.RESEARCH, purpose: str, cache: bool = True) -> T:
        """A reply validated into `output`, with one repair retry. With `cache` False the provider is not asked to
        cache the system prompt: no later call of the run reads it back, so a cache write would cost more than it
        saves."""
        ...

    def tool_turn(self, *, model: str, system: str, turns: Sequence[Turn], tools: Sequence[dict[str, Any]],
                  max_tokens: int, phase: Phase = Phase.RESEARCH, purpose: str) -> ModelReply:
        """The next assistant turn of a tool-calling conversation; the conversation so far is cached."""
        ...

    def check_tools(self, *, model: str, tools: Sequence[dict[str, Any]], phase: Phase = Phase.RESEARCH) -> None:
        """Raise LLMError("unsupported") when `model` cannot call tools, before a tools-mode run spends anything."""
        ...

    def warm_prefix(self, *, model: str, system: str, tools: Sequence[dict[str, Any]],
                    phase: Phase = Phase.RESEARCH) -> None:
        """Write the prefix (tools, system) that calls about to start at once will share into the prompt cache, where
        the provider bills cache writes: then one write serves them all. Best effort; never raises."""
        ...

    def server_web_search(self, query: str, max_results: int, recency_days: int | None = None, *,
                          phase: Phase = Phase.RESEARCH) -> list[dict[str, Any]]:
        """The provider's own blocks of one turn using its server-side web search (one search at most)."""
        ...
