"""A progress display on stderr: an event sink that prints one short line per search, fetch and model call."""
from __future__ import annotations

import sys
import threading
from typing import Any, TextIO


def _short(text: str, width: int = 70) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


class StderrProgress:
    """Prints events as they happen; thread-safe; quiet=True prints nothing."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False):
        self._stream = stream or sys.stderr
        self._quiet = quiet
        self._lock = threading.Lock()
        self._cost = 0.0

    def emit(self, kind: str, payload: dict[str, Any], *, tokens: int = 0, ms: float = 0.0) -> None:
        line = self._line(kind, payload, tokens, ms)
        if line is None or self._quiet:
            return
        with self._lock:
            print(line, file=self._stream, flush=True)

    def _line(self, kind: str, p: dict[str, Any], tokens: int, ms: float) -> str | None:
        if kind == "search":
            n = len(p.get("results") or [])
            return f"  search  {_short(p.get('query', ''), 50)!r} -> {n} results"
        if kind == "fetch":
            status = "ok" if not p.get("error_kind") else p["error_kind"]
            return f"  fetch   {_short(p.get('url', ''), 60)} [{status}]"
        if kind == "model_response":
            self._cost += float(p.get("cost_usd") or 0.0)
            return (f"  model   {p.get('purpose', '')} {tokens:,} tokens {ms / 1000:.1f}s "
                    f"(run so far ${self._cost:.4f})")
        if kind == "model_error":
            return f"  model   {p.get('purpose', '')} failed: {_short(p.get('message', ''), 80)}"
        if kind == "step":
            return f"[{p.get('name', '')}] {p.get('status', '')}"
        return None
