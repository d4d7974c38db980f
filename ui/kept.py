"""A process-wide store of what the pages compute once per data change, looked up by a content key."""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class Kept(Generic[T]):
    """The last `max_entries` values built, by key; each key is built once even when sessions ask at once.

    It does what st.cache_resource did here at a dictionary look-up's cost: that cache hashed every argument and
    inspected the function's signature on each call, a tenth of a millisecond per look-up, several per page view.
    """

    def __init__(self, max_entries: int):
        self._max = max_entries
        self._items: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The value kept under `key`, built by `build()` when there is none (the oldest one then makes room)."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            building = self._building.setdefault(key, threading.Lock())
        with building:
            with self._lock:
                if key in self._items:  # another session built it while this one waited
                    return self._items[key]
            try:
                value = build()
                with self._lock:
                    self._items[key] = value
                    while len(self._items) > self._max:
                        self._items.popitem(last=False)
            finally:
                with self._lock:
                    self._building.pop(key, None)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
