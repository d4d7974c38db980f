"""What every model adapter does the same way with a reply: validate structured output (and ask for one repair),
add up a turn's usage, and report a failure on one scrubbed line."""
from __future__ import annotations

import re

from pydantic import ValidationError

from pipeline.core.event_types import ModelErrorEvent
from pipeline.core.events import EventSink, redact
from pipeline.core.schema import Usage
from pipeline.models.base import LLMError, OutputInvalid, T

REPAIR_INTRO = "Your previous reply did not match the required JSON schema:"
REPAIR_ASK = "Reply again with only the corrected JSON, nothing else."
_OPENING_FENCE = re.compile(r"```(?:json)?\s*+")


def parse_structured(text: str, stop_reason: str | None, output: type[T]) -> tuple[T | None, list[str]]:
    """The reply validated into `output`, or None and the problems to show the model."""
    if stop_reason == "max_tokens":
        return None, ["the reply was cut off at the token limit before the JSON was complete; be more concise"]
    try:
        return output.model_validate_json(_unfenced(text)), []
    except ValidationError as e:
        return None, [f"{'.'.join(str(p) for p in err['loc']) or '(whole reply)'}: {err['msg']}"
                      for err in e.errors()[:10]]


# Plain code, not `\s*```$`: a search for the closing fence started again at each character of a long space run.
def _unfenced(text: str) -> str:
    """The reply without its surrounding whitespace and the ``` fence (```json ... ```) a model may put around JSON."""
    text = text.strip()
    opening = _OPENING_FENCE.match(text)
    body = text[opening.end():] if opening else text
    return body[:-3].rstrip() if body.endswith("```") else body


def repair_request(problems: list[str]) -> str:
    """The user turn asking for a corrected structured reply."""
    return "\n".join([REPAIR_INTRO, *(f"- {p}" for p in problems), REPAIR_ASK])


def add_usage(a: Usage, b: Usage) -> Usage:
    """The usage of two calls together."""
    return Usage(
        input_tokens=a.input_tokens + b.input_tokens, output_tokens=a.output_tokens + b.output_tokens,
        cache_read_input_tokens=a.cache_read_input_tokens + b.cache_read_input_tokens,
        cache_creation_input_tokens=a.cache_creation_input_tokens + b.cache_creation_input_tokens,
        cost_usd=round(a.cost_usd + b.cost_usd, 10), model_calls=a.model_calls + b.model_calls,
    )


def reported(events: EventSink, secret: str | None, purpose: str, err: LLMError) -> LLMError:
    """`err` on one line with secrets scrubbed, reported as a model_error event, for the caller to raise."""
    message = " ".join(redact(err.message).split())
    if secret:
        message = message.replace(secret, "[redacted]")
    events.emit(ModelErrorEvent(purpose=purpose, error_kind=err.kind, message=message, replayed=err.replayed))
    return OutputInvalid(message) if isinstance(err, OutputInvalid) else LLMError(err.kind, message)
