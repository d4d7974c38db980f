"""ui/kept.py: what the pages keep per content key is built once per key, even when sessions ask at once."""
from __future__ import annotations

import threading
import time

from ui.kept import Kept


def test_a_key_is_built_once_and_the_oldest_makes_room() -> None:
    kept: Kept[int] = Kept(2)
    built: list[str] = []

    def build(key: str) -> int:
        built.append(key)
        return len(built)

    assert [kept.get(k, lambda k=k: build(k)) for k in ("a", "a", "b", "a", "c", "a", "b")] == [1, 1, 2, 1, 3, 1, 4]
    assert built == ["a", "b", "c", "b"]  # "b" was the oldest when "c" came


def test_sessions_asking_at_once_wait_for_one_build() -> None:
    kept: Kept[int] = Kept(4)
    calls: list[int] = []

    def slow() -> int:
        calls.append(1)
        time.sleep(0.05)
        return 7

    got: list[int] = []
    threads = [threading.Thread(target=lambda: got.append(kept.get("k", slow))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [7] * 8 and len(calls) == 1


def test_a_failed_build_is_not_kept() -> None:
    kept: Kept[int] = Kept(4)

    def fail() -> int:
        raise ValueError("no")

    for _ in range(2):
        try:
            kept.get("k", fail)
        except ValueError:
            pass
    assert kept.get("k", lambda: 3) == 3
