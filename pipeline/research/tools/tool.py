"""A worker tool as one object: name, description, argument model and handler; its input schema is generated.

The schema the model sees comes from the argument model, so each argument is written once. The definitions are
part of every worker request's cache prefix and of each recorded request's digest: they are frozen, built the same
way on every start, and change only when a tool does.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from pipeline.core.schema import Finding

Owner = TypeVar("Owner")  # what a handler runs on: the worker's Toolbox
Args = TypeVar("Args", bound="ToolArgs")
BUDGET_PREFIX = "BUDGET_EXHAUSTED"
_NOT_SHOWN = ("title", "default")  # a title repeats the name; the description says what leaving an argument out means


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call returns to the model."""

    text: str
    is_error: bool = False
    page: str | None = None  # the source id of the page whose text this result shows (fetch_page)
    finding: Finding | None = None  # the finding this call recorded (record_finding), for judging at once

    @property
    def budget_exhausted(self) -> bool:
        return self.text.startswith(BUDGET_PREFIX)


class ToolArgs(BaseModel):
    """The arguments of a tool call, checked before the tool runs: unknown keys ignored, strings stripped."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


def code_only(*keywords: str) -> Callable[[dict[str, Any]], None]:
    """A `json_schema_extra` that leaves these validation keywords out of the schema the model sees.

    For bounds that only guard against garbage (an empty string, an absurd number): they are still checked, and a
    call that breaks one gets BAD_ARGUMENTS, but they would add bytes to every request without guiding the model.
    """
    def drop(schema: dict[str, Any]) -> None:
        branches = schema.get("anyOf")
        for part in [schema, *(branches if isinstance(branches, list) else [])]:
            if isinstance(part, dict):
                for keyword in keywords:
                    part.pop(keyword, None)
    return drop


def input_schema(args: type[ToolArgs]) -> dict[str, Any]:
    """The JSON schema of `args` as the model sees it: an object of its fields, in order, with their descriptions.

    Titles and defaults are left out, and an optional argument (`X | None`) is shown as X: the model omits it
    rather than sending null. Unknown keys are refused in the schema, though validation ignores them.
    """
    schema = args.model_json_schema()
    if "$defs" in schema:
        raise TypeError(f"{args.__name__}: tool arguments must be flat (no nested models)")
    return {"type": "object", "properties": {name: _shown(name, prop) for name, prop in schema["properties"].items()},
            "required": list(schema.get("required", [])), "additionalProperties": False}


def _shown(name: str, prop: dict[str, Any]) -> dict[str, Any]:
    shown = {k: v for k, v in prop.items() if k not in _NOT_SHOWN}
    branches = shown.pop("anyOf", None)
    if branches is not None:
        kept = [b for b in branches if b != {"type": "null"}]
        if len(kept) != 1:
            raise TypeError(f"argument {name}: a union other than `X | None` has no schema the model can use")
        shown = {**kept[0], **shown}
    return dict(sorted(shown.items()))  # the same order whatever order pydantic writes keywords in


@dataclass(frozen=True)
class Tool(Generic[Owner, Args]):
    """One tool: what the model is told, the model its arguments must fit, and the handler that runs a call.

    `usage` spells the arguments for a BAD_ARGUMENTS answer; `gathers` marks a tool that searches or fetches, which
    the worker's last turn refuses.
    """

    name: str
    description: str
    args: type[Args]
    handler: Callable[[Owner, Args], ToolOutcome]
    usage: str
    gathers: bool = False

    def definition(self) -> dict[str, Any]:
        """The tool as the model is given it: name, description on one line, input schema."""
        return {"name": self.name, "description": " ".join(self.description.split()),
                "input_schema": input_schema(self.args)}


class _Frozen(dict[str, Any]):
    """A dict that refuses changes: the tool list must stay byte-identical for prompt caching."""

    def _refuse(self, *_a: Any, **_k: Any) -> None:
        raise TypeError("TOOLS is immutable; build a new definition instead of changing it")

    __setitem__ = __delitem__ = __ior__ = _refuse  # type: ignore[assignment]
    clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]

    def __copy__(self) -> _Frozen:
        return self

    def __deepcopy__(self, _memo: Any) -> _Frozen:
        return self


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return _Frozen({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def definitions(tools: tuple[Tool[Any, Any], ...]) -> tuple[dict[str, Any], ...]:
    """The tools' definitions in the given order, frozen (dicts refuse changes, lists become tuples)."""
    frozen: tuple[dict[str, Any], ...] = _freeze(tuple(tool.definition() for tool in tools))
    return frozen
