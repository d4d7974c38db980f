"""The metering every live model transport shares: a request is authorised by the budget before it is sent, settled
with its real usage after, and reported as model_request and model_response events; a provider adapter only posts
one body and reads its usage."""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from pipeline.core.budget import Budget, Phase, Refusal
from pipeline.core.event_types import ModelRequestEvent, ModelResponseEvent
from pipeline.core.events import EventSink, NullSink
from pipeline.core.schema import Usage
from pipeline.models.base import Exchange, LLMError

USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
MAX_RETRY_WAIT = 30.0  # seconds between two SDK retries, whatever retry-after asks


class CappedRetryWait:
    """Mixed into a vendor SDK client (both are Stainless-built): each wait between its retries is capped, where the
    SDK obeys any retry-after however long. So one call takes at most (max_retries + 1) * timeout + max_retries *
    max_retry_wait seconds."""

    max_retry_wait = MAX_RETRY_WAIT

    def _calculate_retry_timeout(self, *args: Any, **kwargs: Any) -> float:
        return min(super()._calculate_retry_timeout(*args, **kwargs), self.max_retry_wait)  # type: ignore[misc]


class MeteredTransport:
    """A ModelTransport for one provider: subclasses implement `_post` (send, raise LLMError) and `_usage`."""

    # The request field holding the output-token limit, lowered to what the budget grants.
    max_tokens_key = "max_tokens"

    def __init__(self, budget: Budget, events: EventSink | None = None, *,
                 clock: Callable[[], float] = time.monotonic):
        self._budget = budget
        self._events = events or NullSink()
        self._clock = clock

    def send(self, body: dict[str, Any], phase: Phase, purpose: str) -> Exchange:
        model = body["model"]
        estimate = len(json.dumps(body)) // 3 + 1
        grant = self._budget.authorize_call(model, input_tokens=estimate, max_tokens=body[self.max_tokens_key],
                                            phase=phase)
        if isinstance(grant, Refusal):
            raise LLMError("budget", grant.message)
        body = {**body, self.max_tokens_key: grant.max_tokens}
        self._events.emit(ModelRequestEvent(purpose=purpose, model=model, phase=phase, body=body))
        start = self._clock()
        try:
            data, request_id = self._post(body)
        except LLMError:
            self._budget.release(grant)  # a failed request is not billed
            raise
        ms = (self._clock() - start) * 1000
        used = self._usage(data, body)
        used.cost_usd = self._budget.settle(grant, used)
        self._events.emit(ModelResponseEvent(
            purpose=purpose, model=model, response=data, stop_reason=self._stop_reason(data),
            usage=used.model_dump(include=set(USAGE_FIELDS)), cost_usd=used.cost_usd, ms=ms, request_id=request_id,
        ), tokens=used.input_tokens + used.output_tokens, ms=ms)
        return Exchange(data, used, request_id)

    def _post(self, body: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """The provider's answer to `body` (checked to have its documented shape) and its request id."""
        raise NotImplementedError

    def _usage(self, data: dict[str, Any], body: dict[str, Any]) -> Usage:
        """The tokens `data` was billed for, as one model call."""
        raise NotImplementedError

    def _stop_reason(self, data: dict[str, Any]) -> str | None:
        """Why the answer stopped, in the provider's own word."""
        return data.get("stop_reason")
