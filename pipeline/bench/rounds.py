"""Sequential model rounds of a run, counted from its recorded events: the longest chain of model calls each sent
after the one before it was answered (the report's wait, in model latencies, whatever the latency is)."""
from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable

from pipeline.core.event_types import Event


def sequential_rounds(events: Iterable[Event]) -> int:
    """The length of the longest chain of model calls in `events` (in recorded order) where each call was sent after
    the previous one in the chain was answered or failed; calls sent before any of them is answered count as one."""
    answered = longest = 0  # the longest chain ending in a call already answered, and in any call
    open_calls: dict[str, deque[int]] = defaultdict(deque)
    for event in events:
        key = getattr(event, "purpose", "")
        if event.kind == "model_request":
            open_calls[key].append(answered + 1)
            longest = max(longest, answered + 1)
        elif event.kind in ("model_response", "model_error") and open_calls[key]:
            # Calls of one purpose are answered in the order sent: a worker or judge has one open at a time.
            answered = max(answered, open_calls[key].popleft())
    return longest
