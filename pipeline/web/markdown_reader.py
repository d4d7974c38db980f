"""Markdown -> Extracted: the text a reader sees (markup removed, by markdown-it-py), heading paths, front matter.

Runs in an extraction worker (documents.read_document). The text is block by block: a heading, a paragraph, a
table row (cells joined by " | "), a code block; raw HTML blocks are left out. YAML front matter gives the title
and the date (`title:`, `date:`), read as plain `key: value` lines: no YAML loader sees the user's file.
"""
from __future__ import annotations

from datetime import date

from markdown_it import MarkdownIt
from markdown_it.token import Token

from pipeline.web.extract import Extracted, ExtractionError
from pipeline.web.outline import OutlineText

_FENCE = ("---", "...")
_FRONT_MATTER_LINES = 200


def read_markdown(source: str) -> Extracted:
    """Title, text, date and heading marks of a Markdown document; ExtractionError when it has no text."""
    meta, body = front_matter(source)
    out = OutlineText()
    row: list[str] | None = None
    heading = 0
    for token in MarkdownIt("commonmark").enable("table").parse(body):
        if token.type == "heading_open":
            heading = int(token.tag[1:])
        elif token.type == "tr_open":
            row = []
        elif token.type == "tr_close" and row is not None:
            out.block(" | ".join(row))
            row = None
        elif token.type == "inline":
            text = inline_text(token)
            if heading:
                out.heading(heading, text)
            elif row is not None:
                row.append(" ".join(text.split()))
            else:
                out.block(text)
            heading = 0
        elif token.type in ("fence", "code_block"):
            out.block(token.content)
    text = out.text()
    if not text:
        raise ExtractionError("the document is empty")
    return Extracted(title=meta.get("title") or out.first_heading, text=text, published=_date(meta.get("date")),
                     headings=out.headings)


def inline_text(token: Token) -> str:
    """What a reader sees of an inline run: its text and code, an image's alternative text, line breaks."""
    parts = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif child.type == "image":
            parts.append(inline_text(child))
    return "".join(parts)


def front_matter(source: str) -> tuple[dict[str, str], str]:
    """The `key: value` pairs of a leading front-matter block (between "---" lines) and the text after it."""
    lines = source.replace("\r\n", "\n").split("\n")
    if not lines or lines[0].strip() != "---":
        return {}, source
    for end in range(1, min(len(lines), _FRONT_MATTER_LINES)):
        if lines[end].strip() in _FENCE:
            meta = {}
            for line in lines[1:end]:
                key, sep, value = line.partition(":")
                if sep and key.strip() and not key.startswith((" ", "\t", "-")):
                    meta[key.strip().lower()] = value.strip().strip("'\"").strip()
            return meta, "\n".join(lines[end + 1:])
    return {}, source


def _date(value: str | None) -> str | None:
    try:
        return date.fromisoformat((value or "")[:10]).isoformat()
    except ValueError:
        return None
