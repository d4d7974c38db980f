"""Heading paths ("Results > Table 2") and where headings found in a document's markup begin in its text."""
from __future__ import annotations

from pipeline.core.schema import HeadingMark


class HeadingPath:
    """The headings above the current point: a heading closes every open one of its level or deeper."""

    def __init__(self) -> None:
        self._open: list[tuple[int, str]] = []

    def enter(self, level: int, title: str) -> str:
        """The path once a heading of `level` titled `title` is entered."""
        while self._open and self._open[-1][0] >= level:
            self._open.pop()
        self._open.append((level, title))
        return " > ".join(t for _, t in self._open)


def headings_in(text: str, found: list[tuple[int, str]]) -> list[HeadingMark]:
    """Heading marks for `found` (level, title) in document order, each at the first line of `text` after the
    previous one that starts with the title; a title the text does not hold (dropped by extraction) is skipped."""
    marks, at, path = [], 0, HeadingPath()
    for level, title in found:
        title = " ".join(title.split())
        if not title:
            continue
        where = _line_starting(text, title, at)
        if where is None:
            continue
        marks.append(HeadingMark(start=where, path=path.enter(level, title)))
        at = where + len(title)
    return marks


def _line_starting(text: str, title: str, at: int) -> int | None:
    where = text.find(title, at)
    while where != -1:
        if where == 0 or text[where - 1] == "\n":
            return where
        where = text.find(title, where + 1)
    return None
