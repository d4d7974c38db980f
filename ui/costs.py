"""Counts of the app's heavy computations (parsing a run file or a summary, building a page's tables, a scoreboard,
a rendered report), process-wide, so a test can hold the work one page view does to a budget."""
from __future__ import annotations

import threading
from collections import Counter

_lock = threading.Lock()
_counts: Counter[str] = Counter()


def count(name: str) -> None:
    """Record one heavy computation of kind `name`."""
    with _lock:
        _counts[name] += 1


def snapshot() -> Counter[str]:
    """The counts so far, by kind (a copy)."""
    with _lock:
        return Counter(_counts)
