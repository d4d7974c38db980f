"""A document's text built block by block, with the heading path of every heading ("Results > Table 2")."""
from __future__ import annotations

from pipeline.core.schema import HeadingMark
from pipeline.web.extract import _clean
from pipeline.web.headings import HeadingPath


class OutlineText:
    """Blocks of text joined by newlines, each cleaned as extraction cleans text; heading marks at exact offsets."""

    def __init__(self) -> None:
        self._blocks: list[str] = []
        self._at = 0
        self._path = HeadingPath()
        self.headings: list[HeadingMark] = []
        self.first_heading: str | None = None

    def block(self, text: str) -> None:
        """Add a paragraph, a table row or a code block; an empty one adds nothing."""
        text = _clean(text)
        if text:
            self._blocks.append(text)
            self._at += len(text) + 1

    def heading(self, level: int, text: str) -> None:
        """Add a heading of `level` (1 is the highest) and mark where its section begins."""
        title = " ".join(_clean(text).split())
        if not title:
            return
        self.first_heading = self.first_heading or title
        self.headings.append(HeadingMark(start=self._at, path=self._path.enter(level, title)))
        self.block(title)

    def text(self) -> str:
        return "\n".join(self._blocks)
