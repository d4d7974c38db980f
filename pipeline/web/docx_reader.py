"""Word (.docx) -> Extracted with python-docx: paragraphs and tables in document order, heading paths, footnotes.

Runs in an extraction worker (documents.read_document). Headings are the paragraphs styled "Title" or
"Heading N"; a table row is its cells joined by " | " (a merged cell once); footnotes follow the body under a
"Footnotes" heading, each as "[n] text". Title and date come from the file's core properties, else the first heading.
"""
from __future__ import annotations

import io
import zipfile

from lxml import etree

from pipeline.web.extract import Extracted, ExtractionError
from pipeline.web.outline import OutlineText

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_FOOTNOTES = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/footnotes"


def read_docx(data: bytes) -> Extracted:
    """Title, text, date and heading marks of a Word document; ExtractionError when it cannot be read or is empty."""
    import docx
    from docx.opc.exceptions import PackageNotFoundError
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, etree.XMLSyntaxError) as e:
        raise ExtractionError(f"the Word file is damaged or not a .docx ({type(e).__name__}: {e})"[:200]) from None
    out = OutlineText()
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            for row in block.rows:
                cells = [c.text for c in row.cells]
                out.block(" | ".join(" ".join(c.split()) for i, c in enumerate(cells) if i == 0 or c != cells[i - 1]))
            continue
        level = _heading_level(block.style.name if block.style is not None else "")
        if level:
            out.heading(level, block.text)
        else:
            out.block(block.text)
    notes = _footnotes(document)
    if notes:
        out.heading(1, "Footnotes")
        for number, note in notes:
            out.block(f"[{number}] {note}")
    text = out.text()
    if not text:
        raise ExtractionError("the document is empty")
    core = document.core_properties
    when = core.created or core.modified
    return Extracted(title=(core.title or "").strip() or out.first_heading, text=text,
                     published=when.date().isoformat() if when else None, headings=out.headings)


def _heading_level(style: str) -> int:
    if style == "Title":
        return 1
    name, _, number = style.partition(" ")
    return int(number) if name == "Heading" and number.isdigit() and 0 < int(number) < 10 else 0


def _footnotes(document: object) -> list[tuple[str, str]]:
    """(number, text) of each footnote, separators left out; [] when the file has none."""
    for rel in document.part.rels.values():  # type: ignore[attr-defined]
        if rel.reltype == _FOOTNOTES and not rel.is_external:
            parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
            root = etree.fromstring(rel.target_part.blob, parser)
            notes = []
            for note in root.iter(f"{_W}footnote"):
                number = note.get(f"{_W}id") or ""
                if number.isdigit() and int(number) > 0:  # -1 and 0 are the separator lines
                    text = " ".join("".join(str(t) for t in note.itertext()).split())
                    if text:
                        notes.append((number, text))
            return notes
    return []
