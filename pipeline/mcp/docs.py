"""The documents folders an MCP server may research (RESEARCH_MCP_DOCS), chosen by name, never by a caller's path.

RESEARCH_MCP_DOCS lists the folders, comma-separated: `name=PATH`, or a bare PATH named by its last part
("papers=/data/papers,/home/me/notes" gives "papers" and "notes"). A caller passes a name; the server alone decides
which folders exist, so no argument can point it at another path. list_documents shows what a folder's index holds.
"""
from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, Field

from pipeline.config import ConfigError, Settings
from pipeline.core.schema import TextLayout
from pipeline.mcp.limits import Refused
from pipeline.web.docs_index import DocsIndex, IndexStats
from pipeline.web.folder import Refused as RefusedFile
from pipeline.web.folder import folder_root

ENV = "RESEARCH_MCP_DOCS"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_LISTED = 1_000  # documents list_documents returns; the count says how many there are


def parse_folders(raw: str) -> dict[str, Path]:
    """The configured folders by name; ConfigError naming RESEARCH_MCP_DOCS and the entry when one is not usable."""
    folders: dict[str, Path] = {}
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        name, sep, path = entry.partition("=")
        if not sep:
            name, path = Path(entry).expanduser().name, entry
        name, path = name.strip(), path.strip()
        if not _NAME.fullmatch(name):
            raise ConfigError(f"{ENV}: {name!r} is not a folder name (letters, digits, '.', '_', '-'); write the "
                              "entry as name=PATH")
        if name in folders:
            raise ConfigError(f"{ENV}: the name {name!r} is given twice; give each folder its own name=PATH")
        try:
            folders[name] = folder_root(path)
        except ConfigError:
            raise ConfigError(f"{ENV}: {path!r} (folder {name!r}) is not a folder; fix or remove the entry") from None
    return folders


def choose(folders: dict[str, Path], name: str) -> Path:
    """The folder configured as `name`; Refused naming the configured names otherwise (a path is never taken)."""
    if name in folders:
        return folders[name]
    known = ", ".join(sorted(folders)) or f"none (the server's {ENV} is empty)"
    raise Refused(f"{name.strip()[:64]!r} is not a documents folder of this server; its folders are: {known}. "
                  "Pass one of these names, not a path")


class ListedDocument(BaseModel):
    """An indexed file: its path in the folder, kind, title, date (and where the date came from), size of its text."""

    path: str
    kind: str
    title: str | None = None
    published: str | None = None
    published_from: str | None = None
    pages: int | None = Field(None, description="Pages, for a PDF.")
    chars: int


class DocumentList(BaseModel):
    """What a documents folder's index holds, and each file that could not be read with its reason."""

    folder: str
    count: int = Field(description="Indexed files; `documents` lists the first of them in path order.")
    documents: list[ListedDocument]
    refused: list[RefusedFile]
    stats: IndexStats


def _pages(layout: TextLayout) -> int | None:
    return max((p.page for p in layout.pages), default=None)


def list_documents(name: str, root: Path, settings: Settings) -> DocumentList:
    """The index of `root` (brought up to date first) as a listing."""
    index = DocsIndex.open(root, settings)
    try:
        docs = index.documents()
        return DocumentList(folder=name, count=len(docs), refused=index.refused(), stats=index.stats, documents=[
            ListedDocument(path=d.path, kind=d.kind, title=d.title, published=d.published,
                           published_from=d.published_from, pages=_pages(d.layout), chars=len(d.text))
            for d in docs[:MAX_LISTED]])
    finally:
        index.close()
