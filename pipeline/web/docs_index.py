"""The index of a documents folder: each file read once in the extraction workers, searched by SQLite FTS5 (fts.py).

Where: RESEARCH_CACHE_DIR/docs/<sha256 of the folder's resolved path>.sqlite, never inside the folder (with a cache
folder inside it, the index is kept in memory instead).
Incremental: a file listed with the size and mtime it had when indexed is not read again; one whose size or mtime
changed is hashed, and read again only when its sha256 changed. A refused file is not retried until it changes.
Atomic: a build that changes anything copies the index into a temporary file beside it, applies every change in one
transaction there, and renames it over the old one, so a build interrupted at any point (an error, a kill) leaves
the previous index as it was.
"""
from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from pathlib import Path

from pipeline.config import Settings
from pipeline.core.schema import SearchResult
from pipeline.web.docs_build import (
    COLUMNS,
    SCHEMA,
    IndexStats,
    NoCache,
    Progress,
    ProgressSink,
    StoredDocument,
    doc_url,
    read_file,
    stored,
    update,
    update_file,
)
from pipeline.web.folder import Refused, Unreadable, check, folder_root, read_bytes, scan
from pipeline.web.fts import hits
from pipeline.web.workers import WorkerPool, default_pool

__all__ = ["DocsIndex", "IndexStats", "Progress", "StoredDocument", "index_file"]


def index_file(cache_dir: str | os.PathLike[str], root: Path) -> Path:
    """Where the index of the folder `root` is kept."""
    return Path(cache_dir).expanduser() / "docs" / f"{hashlib.sha256(str(root).encode()).hexdigest()[:32]}.sqlite"


class DocsIndex:
    """A documents folder, indexed: search(query, n), document(path) with its text and layout, what was refused."""

    def __init__(self, root: Path, db: sqlite3.Connection, stats: IndexStats, refused: list[Refused],
                 max_bytes: int, pool: WorkerPool) -> None:
        self.root, self.stats, self._max_bytes, self._pool = root, stats, max_bytes, pool
        self._db, self._refused = db, refused
        self._lock = threading.Lock()

    @classmethod
    def open(cls, directory: str | os.PathLike[str], settings: Settings, *, progress: ProgressSink | None = None,
             pool: WorkerPool | None = None) -> DocsIndex:
        """The folder's index, brought up to date (reading only new and changed files); ConfigError when `directory`
        is not a folder."""
        started = time.monotonic()
        root = folder_root(directory)
        pool = pool or default_pool()
        files, refused = scan(root, settings.docs_max_bytes)
        target = index_file(settings.cache_dir, root)
        try:
            if target.resolve().is_relative_to(root):  # never write into the user's folder
                raise NoCache(f"the cache folder {settings.cache_dir} is inside the documents folder")
            db, stats = update_file(target, root, files, pool, progress, started)
        except NoCache:  # this process's index is then kept in memory
            db = sqlite3.connect(":memory:", check_same_thread=False)
            db.executescript(SCHEMA)
            stats = update(db, root, files, pool, progress, started)
        stats.seconds = round(time.monotonic() - started, 3)
        rows = db.execute("SELECT path, reason FROM refused ORDER BY path").fetchall()
        refused = sorted([*refused, *(Refused(path=p, reason=r) for p, r in rows)], key=lambda r: r.path)
        stats.refused = len(refused)
        stats.files = int(db.execute("SELECT count(*) FROM files").fetchone()[0])
        return cls(root, db, stats, refused, settings.docs_max_bytes, pool)

    def refused(self) -> list[Refused]:
        """Every file of the folder that is not indexed, with its reason, in path order."""
        return list(self._refused)

    def documents(self) -> list[StoredDocument]:
        """Every indexed file, in path order."""
        with self._lock:
            rows = self._db.execute(f"SELECT {COLUMNS} FROM files ORDER BY path").fetchall()
        return [stored(row) for row in rows]

    def search(self, query: str, n: int = 10) -> list[SearchResult]:
        """Up to `n` files best matching the words of `query` (BM25, title weighted); [] when nothing matches."""
        with self._lock:
            found = hits(self._db, "files", "path", query, n)
        return [SearchResult(title=h.title or Path(h.key).name, url=doc_url(h.key), snippet=h.snippet,
                             published=h.published) for h in found]

    def document(self, path: str) -> StoredDocument:
        """The file at `path` as indexed, or read again when it changed since; Unreadable with the reason."""
        listed = check(self.root, path, self._max_bytes)
        if isinstance(listed, Refused):
            raise Unreadable(listed.reason)
        with self._lock:
            row = self._db.execute(f"SELECT {COLUMNS} FROM files WHERE path = ?", (path,)).fetchone()
        if row is not None and (row[2], row[3]) == (listed.size, listed.mtime_ns):
            return stored(row)
        data = read_bytes(self.root, listed)
        return read_file(self._pool, listed, data, hashlib.sha256(data).hexdigest())

    def close(self) -> None:
        with self._lock:
            self._db.close()


