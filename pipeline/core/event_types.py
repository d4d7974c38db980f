"""The events of a run: one pydantic model per kind, a union discriminated on `kind`.

Each event is stored as its kind and a JSON payload (`BaseEvent.payload()`); `parse_event` reads a stored payload
back into its model. A payload holds the fields its writer set, in field order: a default the writer did not pass
is not written, and a `flags` field is written only when true. So the stored JSON is the same, key for key, as the
dicts the events were before they had types, and stores written then read back unchanged.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Self, cast, get_args

from pydantic import BaseModel, ConfigDict, Field

from pipeline.core.budget import Phase
from pipeline.core.schema import (
    BudgetState,
    Calculation,
    FetchResult,
    Finding,
    Plan,
    Problem,
    RejectedFinding,
    RunStats,
    SearchResult,
    Source,
)

if TYPE_CHECKING:
    from pipeline.core.notebook import NotebookState

ModelErrorKind = Literal["budget", "rate_limited", "overloaded", "server", "timeout", "connection", "auth",
                         "bad_request", "malformed", "refusal", "context_window", "not_recorded", "no_model",
                         "unsupported", "schema_unsupported"]


class BaseEvent(BaseModel):
    """Fields common to every event: its kind, which is the store's `kind` column rather than part of the payload."""

    model_config = ConfigDict(extra="forbid")
    flags: ClassVar[frozenset[str]] = frozenset()

    kind: str

    def payload(self) -> dict[str, Any]:
        """The JSON form as stored: the fields set, without `kind`, flags only when true."""
        keep = {name for name in self.model_fields_set if name != "kind"
                and not (name in self.flags and not getattr(self, name))}
        return self.model_dump(mode="json", include=keep)

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> Self:
        """The event a stored payload describes; ValidationError when it does not fit this kind."""
        return cls.model_validate(payload)


class StepEvent(BaseEvent):
    """A step or worker started or finished, with the step's own counts."""

    kind: Literal["step"] = "step"
    name: str
    sub_question: str | None = None
    status: str = ""
    mode: str | None = None
    part: str | None = None
    round: int | None = None
    candidates: int | None = None
    pairs: int | None = None
    fallback: bool | None = None
    no_evidence: bool | None = None
    failed: bool | None = None
    sub_questions: int | None = None
    not_researched: int | None = None
    drafts: int | None = None
    scores: list[int | None] | None = None
    errors: list[str] | None = None
    sources: dict[str, list[str]] | None = None
    budget_stopped: bool | None = None
    steps: int | None = None
    ended: str | None = None
    findings: int | None = None
    problems: int | None = None
    gaps: int | None = None
    conflicts: int | None = None
    off_topic: list[str] | None = None  # findings the support judge found not to answer their sub-question


class SearchEvent(BaseEvent):
    """One search as the model saw it; `charged` is missing from stores older than that field."""

    kind: Literal["search"] = "search"
    flags: ClassVar[frozenset[str]] = frozenset({"replayed", "not_recorded"})
    query: str = ""
    provider: str = ""
    n: int = 10
    recency_days: int | None = None
    phase: Phase = Phase.RESEARCH
    count: int = 0
    message: str | None = None
    results: list[SearchResult] = Field(default_factory=list)
    charged: bool | None = None
    replayed: bool = False
    not_recorded: bool = False


class FetchEvent(FetchResult, BaseEvent):
    """One fetch: the FetchResult's fields, whether the Fetcher's cache answered it and whether it was charged."""

    kind: Literal["fetch"] = "fetch"
    flags: ClassVar[frozenset[str]] = frozenset({"replayed", "not_recorded"})
    cached: bool = False
    charged: bool | None = None
    replayed: bool = False
    not_recorded: bool = False

    def result(self) -> FetchResult:
        """The fetch outcome without the event's own fields."""
        return FetchResult.model_validate(self.model_dump(include=set(FetchResult.model_fields)))


class ModelRequestEvent(BaseEvent):
    """A model request exactly as sent (or, `replayed`, as it would have been)."""

    kind: Literal["model_request"] = "model_request"
    flags: ClassVar[frozenset[str]] = frozenset({"replayed"})
    purpose: str
    model: str = ""
    phase: Phase = Phase.RESEARCH
    body: dict[str, Any] = Field(default_factory=dict)
    replayed: bool = False


class ModelResponseEvent(BaseEvent):
    """A model response exactly as received, its usage and cost."""

    kind: Literal["model_response"] = "model_response"
    flags: ClassVar[frozenset[str]] = frozenset({"replayed"})
    purpose: str
    model: str = ""
    response: dict[str, Any]
    stop_reason: str | None = None
    usage: dict[str, int] = Field(default_factory=dict)
    cost_usd: float = 0.0
    ms: float = 0.0
    request_id: str | None = None
    replayed: bool = False


class ModelErrorEvent(BaseEvent):
    """A model call that failed; `error_kind` is stored under the payload key "kind"."""

    kind: Literal["model_error"] = "model_error"
    flags: ClassVar[frozenset[str]] = frozenset({"replayed"})
    purpose: str
    error_kind: ModelErrorKind
    message: str = ""
    replayed: bool = False

    def payload(self) -> dict[str, Any]:
        return {("kind" if k == "error_kind" else k): v for k, v in super().payload().items()}

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> Self:
        return cls.model_validate({("error_kind" if k == "kind" else k): v for k, v in payload.items()})


class ToolCallEvent(BaseEvent):
    """One tool call of a worker: its input, and the text the model got back."""

    kind: Literal["tool_call"] = "tool_call"
    sub_question: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)
    is_error: bool = False
    outcome: str = ""
    result: str = ""


class FindingEvent(BaseEvent):
    """A finding was kept."""

    kind: Literal["finding"] = "finding"
    id: str
    source: str
    sub_question: str | None = None


class RejectedEvent(BaseEvent):
    """A proposed finding was rejected, and why."""

    kind: Literal["rejected"] = "rejected"
    source: str
    reason: str
    sub_question: str | None = None


class AssignedEvent(BaseEvent):
    """An id given to a source (with its URLs), a finding (with its span) or a calculation (with its expression)."""

    kind: Literal["assigned"] = "assigned"
    what: Literal["source", "finding", "calculation"]
    id: str
    urls: list[str] | None = None
    fetched_at: str | None = None
    source: str | None = None
    start: int | None = None
    end: int | None = None
    expression: str | None = None
    sub_question: str | None = None
    replayed: bool = False


class CheckpointEvent(BaseEvent):
    """The state a run needs to continue, after a step or a worker (source texts are in the fetch events)."""

    kind: Literal["checkpoint"] = "checkpoint"
    after: str
    plan: Plan | None = None
    sources: list[Source] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    rejected: list[RejectedFinding] = Field(default_factory=list)
    calculations: list[Calculation] = Field(default_factory=list)
    budget: BudgetState = Field(default_factory=BudgetState)
    stats: RunStats = Field(default_factory=RunStats)
    problems: list[Problem] = Field(default_factory=list)
    output: Any = None

    def notebook_state(self, fetched_texts: Iterable[str]) -> NotebookState:
        """The notebook as it was, each source's text found by sha256 among `fetched_texts` (KeyError if absent)."""
        from pipeline.core.notebook import NotebookState, StoredSource  # the notebook reports events: not at the top

        by_hash = {hashlib.sha256(t.encode("utf-8")).hexdigest(): t for t in fetched_texts}
        return NotebookState(sources=[StoredSource(source=s, text=by_hash[s.sha256]) for s in self.sources],
                             findings=self.findings, rejected=self.rejected)


class SessionEvent(BaseEvent):
    """A replay or resume began, serving calls recorded by `from_run`."""

    kind: Literal["session"] = "session"
    tape: str
    from_run: str | None = None


class TapeEvent(BaseEvent):
    """How a replay or resume was served: calls served, missed, and requests that differ from the recording."""

    kind: Literal["tape"] = "tape"
    mode: str
    from_run: str | None = None
    served: int = 0
    missed: int = 0
    diverged: list[str] = Field(default_factory=list)


class InternalErrorEvent(BaseEvent):
    """A bug stopped the run."""

    kind: Literal["internal_error"] = "internal_error"
    error: str
    traceback: str = ""


Event = Annotated[
    StepEvent | SearchEvent | FetchEvent | ModelRequestEvent | ModelResponseEvent | ModelErrorEvent | ToolCallEvent
    | FindingEvent | RejectedEvent | AssignedEvent | CheckpointEvent | SessionEvent | TapeEvent | InternalErrorEvent,
    Field(discriminator="kind"),
]
EVENT_TYPES: dict[str, type[BaseEvent]] = {
    cls.model_fields["kind"].default: cls for cls in get_args(get_args(Event)[0])}


def parse_event(kind: str, payload: dict[str, Any]) -> Event:
    """The typed event of a stored row; ValueError for an unknown kind, ValidationError for a payload that does not
    fit its kind."""
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        raise ValueError(f"unknown event kind {kind!r}")
    return cast("Event", cls.from_payload(payload))


def is_replayed(event: Event) -> bool:
    """True for an event that reports a call served from a recording rather than made."""
    replayable = (SearchEvent, FetchEvent, ModelRequestEvent, ModelResponseEvent, ModelErrorEvent, AssignedEvent)
    return isinstance(event, replayable) and event.replayed
