"""Reading a documents folder into its index: each new or changed file read in an extraction worker, and every
change applied in one transaction (docs_index.py keeps the index and says where it lives)."""
from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal
from urllib.parse import quote, unquote

from pydantic import BaseModel, Field

from pipeline.core.schema import TextLayout
from pipeline.web.documents import Document, Kind
from pipeline.web.extract import Extracted, ExtractionError
from pipeline.web.folder import FolderFile, Refused, Unreadable, read_bytes
from pipeline.web.fts import TABLES, add_text, remove_text
from pipeline.web.pdf_worker import ocr_tool
from pipeline.web.workers import Limits, WorkerPool

INDEX_VERSION = "2"  # bump when what is indexed changes, so existing indexes are rebuilt


def index_version() -> str:
    """The version an index is built at: INDEX_VERSION, and whether OCR reads scanned pages (tesseract installed or
    gone since: the scanned files are read again)."""
    return f"{INDEX_VERSION}+ocr" if ocr_tool() is not None else INDEX_VERSION
# A user's file may be far longer than a web page: a 500-page report is read whole, within a larger CPU budget.
DOCUMENT_LIMITS = Limits(cpu_seconds=20.0, pdf_cpu_seconds=300.0, pdf_page_cpu_seconds=10.0, pdf_max_pages=2000,
                         max_text_chars=5_000_000)
SCHEMA = """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
    CREATE TABLE files (id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL, kind TEXT NOT NULL, size INTEGER,
                        mtime_ns INTEGER, sha256 TEXT, title TEXT, published TEXT, published_from TEXT, text TEXT,
                        layout TEXT, warnings TEXT);
    CREATE TABLE refused (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, sha256 TEXT, reason TEXT);
""" + TABLES
COLUMNS = "path, kind, size, mtime_ns, sha256, title, published, published_from, text, layout, warnings"


class IndexStats(BaseModel):
    """What one opening of the index did: files indexed and refused; files read, re-hashed only, reused, removed."""

    files: int = 0
    refused: int = 0
    read: int = 0
    rehashed: int = 0
    reused: int = 0
    removed: int = 0
    seconds: float = 0.0


class Progress(BaseModel):
    """How far a build is: files done of those to read, refusals so far, seconds since it started."""

    done: int
    total: int
    failed: int
    seconds: float


class StoredDocument(BaseModel):
    """A file as indexed: what its read gave (text, title, date, page starts, headings) and the stat it had."""

    path: str
    kind: Kind
    size: int
    mtime_ns: int
    sha256: str
    title: str | None = None
    published: str | None = None
    published_from: Literal["metadata", "mtime"] | None = None
    text: str
    layout: TextLayout = Field(default_factory=TextLayout)
    warnings: list[str] = Field(default_factory=list)


class _Warnings(BaseModel):
    items: list[str] = Field(default_factory=list)


ProgressSink = Callable[[Progress], None]


def doc_url(path: str) -> str:
    """The stable identifier of a document: doc:<path relative to its folder>, never a file:// URL."""
    return "doc:" + quote(path, safe="/")


def doc_path(url: str) -> str | None:
    """The folder-relative path a doc: identifier names, else None."""
    return unquote(url[4:]) if url.startswith("doc:") else None


def stored(row: tuple[object, ...]) -> StoredDocument:
    path, kind, size, mtime_ns, sha, title, published, published_from, text, layout, warnings = row
    return StoredDocument.model_validate({
        "path": path, "kind": kind, "size": size, "mtime_ns": mtime_ns, "sha256": sha, "title": title,
        "published": published, "published_from": published_from, "text": text,
        "layout": TextLayout.model_validate_json(str(layout)),
        "warnings": _Warnings.model_validate_json(str(warnings)).items})


def read_file(pool: WorkerPool, listed: FolderFile, data: bytes, sha: str) -> StoredDocument:
    """The file read in a worker; Unreadable with the worker's reason when it has no text to quote."""
    doc = Document(kind=listed.kind, body=data, url=doc_url(listed.path), outline=True)
    try:
        got: Extracted = pool.read(doc, limits=DOCUMENT_LIMITS)
    except ExtractionError as e:
        raise Unreadable(str(e)) from None
    modified = datetime.fromtimestamp(listed.mtime_ns / 1e9, UTC).date().isoformat()
    warnings = [*got.warnings, *([got.truncated_reason] if got.truncated and got.truncated_reason else [])]
    return StoredDocument(path=listed.path, kind=listed.kind, size=listed.size, mtime_ns=listed.mtime_ns, sha256=sha,
                          title=got.title or Path(listed.path).name, published=got.published or modified,
                          published_from="metadata" if got.published else "mtime", text=got.text,
                          layout=TextLayout(pages=got.pages, headings=got.headings), warnings=warnings)


class NoCache(Exception):
    """The cache folder cannot be written (read-only, missing permissions); the index is kept in memory instead."""


def update_file(target: Path, root: Path, files: list[FolderFile], pool: WorkerPool,
                 progress: ProgressSink | None, started: float) -> tuple[sqlite3.Connection, IndexStats]:
    """The index file brought up to date: changed in a copy that replaces it, or left alone when nothing changed;
    NoCache when the cache folder cannot be written."""
    current = _open_current(target)
    if current is not None and not _changes(current, files):
        stats = IndexStats(files=len(files), reused=len(files))
        return current, stats
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove_abandoned(target)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.stem}-{os.getpid()}-", suffix=".tmp", dir=target.parent)
    except OSError as e:
        if current is not None:
            current.close()
        raise NoCache(str(e)) from None
    os.close(fd)
    try:
        work = sqlite3.connect(tmp)
        with contextlib.closing(work):
            if current is not None:
                current.backup(work)
                current.close()
            else:
                work.executescript(SCHEMA)
                work.execute("INSERT INTO meta VALUES ('version', ?), ('folder', ?)", (index_version(), str(root)))
            stats = update(work, root, files, pool, progress, started)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return sqlite3.connect(f"file:{target}?mode=ro", uri=True, check_same_thread=False), stats


def _remove_abandoned(target: Path) -> None:
    """Delete the temporary files of builds of this index whose process is gone (killed mid-build)."""
    for leftover in target.parent.glob(f".{target.stem}-*-*.tmp"):
        pid = leftover.name.split("-")[1]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                leftover.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _open_current(target: Path) -> sqlite3.Connection | None:
    """The existing index when it is one of this version, else None (it will be rebuilt)."""
    if not target.is_file():
        return None
    db = sqlite3.connect(f"file:{target}?mode=ro", uri=True, check_same_thread=False)
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
    except sqlite3.DatabaseError:  # not an index of ours, or damaged: rebuilt
        row = None
    if row and row[0] == index_version():
        return db
    db.close()
    return None


def _known(db: sqlite3.Connection) -> dict[str, tuple[int, int, str]]:
    """(size, mtime_ns, sha256) of every file the index holds, read or refused."""
    rows = db.execute("SELECT path, size, mtime_ns, sha256 FROM files UNION ALL "
                      "SELECT path, size, mtime_ns, sha256 FROM refused").fetchall()
    return {str(p): (int(s), int(m), str(h)) for p, s, m, h in rows}


def _changes(db: sqlite3.Connection, files: list[FolderFile]) -> bool:
    known = _known(db)
    return len(known) != len(files) or any(known.get(f.path, (-1, -1, ""))[:2] != (f.size, f.mtime_ns) for f in files)


def update(db: sqlite3.Connection, root: Path, files: list[FolderFile], pool: WorkerPool,
            progress: ProgressSink | None, started: float) -> IndexStats:
    """Apply every change to `db` in one transaction: new and changed files read, vanished ones removed."""
    known = _known(db)
    listed = {f.path for f in files}
    stale = [f for f in files if known.get(f.path, (-1, -1, ""))[:2] != (f.size, f.mtime_ns)]
    stats = IndexStats(files=len(files), reused=len(files) - len(stale))
    with db:  # one transaction: committed whole, or rolled back
        for path in set(known) - listed:
            _forget(db, path)
            stats.removed += 1
        failed = 0
        for done, (item, outcome) in enumerate(_outcomes(root, stale, known, pool), 1):
            if isinstance(outcome, str) and outcome == "same":
                db.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?", (item.size, item.mtime_ns,
                                                                                     item.path))
                db.execute("UPDATE refused SET size = ?, mtime_ns = ? WHERE path = ?", (item.size, item.mtime_ns,
                                                                                       item.path))
                stats.rehashed += 1
            else:
                _forget(db, item.path)
                failed += _put(db, item, outcome)
                stats.read += 1
            if progress is not None:
                progress(Progress(done=done, total=len(stale), failed=failed,
                                  seconds=round(time.monotonic() - started, 3)))
    return stats


def _outcomes(root: Path, stale: list[FolderFile], known: dict[str, tuple[int, int, str]],
              pool: WorkerPool) -> Iterator[tuple[FolderFile, StoredDocument | Refused | str]]:
    """Each stale file's outcome, in order, read in parallel: "same" when only its stat changed, else its read."""
    def one(item: FolderFile) -> StoredDocument | Refused | str:
        try:
            data = read_bytes(root, item)
            sha = hashlib.sha256(data).hexdigest()
            if item.path in known and known[item.path][2] == sha:
                return "same"
            return read_file(pool, item, data, sha)
        except Unreadable as e:
            return Refused(path=item.path, reason=str(e))

    with ThreadPoolExecutor(max_workers=pool.size) as readers:
        yield from zip(stale, readers.map(one, stale), strict=True)


def _forget(db: sqlite3.Connection, path: str) -> None:
    row = db.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
    if row is not None:
        remove_text(db, int(row[0]))
        db.execute("DELETE FROM files WHERE id = ?", (row[0],))
    db.execute("DELETE FROM refused WHERE path = ?", (path,))


def _put(db: sqlite3.Connection, item: FolderFile, outcome: StoredDocument | Refused | str) -> int:
    """Store one read: the document and its text in the index, or the refusal; 1 for a refusal, else 0."""
    if isinstance(outcome, (Refused, str)):
        db.execute("INSERT INTO refused VALUES (?, ?, ?, ?, ?)", (item.path, item.size, item.mtime_ns, "",
                                                                   str(getattr(outcome, "reason", outcome))))
        return 1
    d = outcome
    rowid = db.execute(f"INSERT INTO files ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", (
        d.path, d.kind, d.size, d.mtime_ns, d.sha256, d.title, d.published, d.published_from, d.text,
        d.layout.model_dump_json(), _Warnings(items=d.warnings).model_dump_json())).lastrowid
    assert rowid is not None
    add_text(db, rowid, d.title, d.text)
    return 0
