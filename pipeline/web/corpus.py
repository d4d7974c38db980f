"""The frozen web: a folder of saved pages, searchable offline (SQLite FTS5, BM25) and served by URL to the fetcher.

Folder format:
    DIR/manifest.jsonl   one JSON object per line:
        {"url": "https://...", "path": "pages/x.html.gz", "content_type": "text/html",
         "title": "...", "published": "YYYY-MM-DD"}
        `path` is relative to DIR and may end in .gz (gzip); `content_type` defaults to text/html
        (text/plain and application/pdf work too); `title` and `published` are optional overrides of what
        extraction finds. An optional `"status": 403` (any status from 400) saves a failure: a fetch gets that
        HTTP status and no page, while search still lists the page (a paywall, a server error); `path` may then
        be left out, and `title` and a `snippet` give what search shows.
    DIR/corpus.json      optional settings of the whole frozen web: {"search_fails": "..."} makes every search
                         fail with that message (a search outage).
    DIR/<path>           the saved bytes, exactly as the server sent them (gzip-compressed when .gz).
    DIR/.index.sqlite    the search index, built on first open and reused while the manifest, the files
                         (size, mtime) and the extractor are unchanged; kept in memory when DIR is read-only.

Indexed text is made by the fetcher's own decoding and extraction (workers.read_in_worker, in a worker process),
so what search matches is what a fetch of the same URL returns. get() finds a page by normalise_url (tracking
parameters, fragment, trailing slash and host case do not matter) and falls back to the other of http/https.
Search ignores recency: the frozen web has no "now".
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import sqlite3
import tempfile
import threading
import zlib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import trafilatura
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pipeline.config import ConfigError
from pipeline.core.schema import SearchResult
from pipeline.core.urls import url_key
from pipeline.web.documents import Document
from pipeline.web.extract import ExtractionError
from pipeline.web.fetch import SavedPage
from pipeline.web.fts import TABLES, add_text, hits
from pipeline.web.search.base import SearchFailed
from pipeline.web.workers import default_pool

MANIFEST = "manifest.jsonl"
_FIX = "RESEARCH_CORPUS_DIR to another folder of saved pages"
SETTINGS = "corpus.json"
INDEX = ".index.sqlite"
INDEX_VERSION = "4"  # bump when what is indexed changes, so existing indexes are rebuilt


class ManifestEntry(BaseModel):
    """One saved page as listed in manifest.jsonl; with a `status` from 400, a saved failure instead of a page."""

    url: str
    path: str | None = None
    content_type: str = "text/html"
    title: str | None = None
    published: str | None = None
    status: int | None = Field(None, ge=400, le=599)
    snippet: str | None = None

    @model_validator(mode="after")
    def _page_or_failure(self) -> ManifestEntry:
        if self.path is None and self.status is None:
            raise ValueError("an entry needs a path (the saved page) or a status (a saved failure)")
        return self


class CorpusSettings(BaseModel):
    """DIR/corpus.json: settings of the whole frozen web."""

    model_config = ConfigDict(extra="forbid")

    search_fails: str | None = None  # every search fails with this message (a search outage)


class CorpusPage(NamedTuple):
    """A page to save with build_corpus: its URL and the bytes the server sent."""

    url: str
    body: bytes
    content_type: str = "text/html"
    title: str | None = None
    published: str | None = None


def _kind(content_type: str) -> str:
    media = content_type.partition(";")[0].strip().lower()
    return {"application/pdf": "pdf", "text/plain": "text"}.get(media, "html")


def _read_manifest(root: Path) -> tuple[bytes, list[ManifestEntry]]:
    path = root / MANIFEST
    try:
        raw = path.read_bytes()
    except OSError:
        raise ConfigError(f"No corpus at {root}: {MANIFEST} is missing. Set RESEARCH_CORPUS_DIR to a folder of "
                          "saved pages (see pipeline/web/corpus.py), or choose another RESEARCH_SEARCH_PROVIDER."
                          ) from None
    try:
        lines = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path} is not UTF-8 text ({e.reason} at byte {e.start}); fix it, or set "
                          f"{_FIX}") from None
    entries = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = ManifestEntry.model_validate_json(line)
        except ValidationError as e:
            raise ConfigError(f"{path} line {number} is not a valid entry: {e.errors()[0]['msg']}; fix it, or set "
                              f"{_FIX}") from None
        file = (root / entry.path).resolve() if entry.path is not None else None
        if file is not None and (not file.is_relative_to(root.resolve()) or not file.is_file()):
            raise ConfigError(f"{path} line {number}: {entry.path!r} is not a file inside {root}; fix it, or set "
                              f"{_FIX}")
        entries.append(entry)
    return raw, entries


def _fingerprint(root: Path, manifest: bytes, entries: list[ManifestEntry]) -> str:
    digest = hashlib.sha256(manifest)
    digest.update(f"{INDEX_VERSION}|{trafilatura.__version__}".encode())
    for entry in entries:
        if entry.path is None:
            continue
        stat = (root / entry.path).stat()
        digest.update(f"|{entry.path}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


class Corpus:
    """Saved pages: get(url) serves the saved bytes, search(query, n) ranks them by BM25 (title weighted)."""

    def __init__(self, root: Path, entries: list[ManifestEntry], db: sqlite3.Connection,
                 settings: CorpusSettings | None = None, *, searchable: bool = True):
        self.root = root
        self.searchable = searchable
        self.settings = settings or CorpusSettings()
        self._entries = entries
        self._by_key = {url_key(e.url): e for e in entries}
        self._db = db
        self._lock = threading.Lock()

    @classmethod
    def open(cls, directory: str | os.PathLike[str], *, searchable: bool = True) -> Corpus:
        """The corpus in `directory`, its index reused or (re)built; ConfigError when the folder is not a corpus.

        With `searchable=False` no index is built (it means extracting every page): only get() is served, for a
        reader that needs pages by URL, such as grading saved runs.
        """
        root = Path(directory)
        manifest, entries = _read_manifest(root)
        db = sqlite3.connect(":memory:", check_same_thread=False)
        if searchable:
            fingerprint = _fingerprint(root, manifest, entries)
            index = root / INDEX
            db = _open_existing(index, fingerprint) or _build_index(root, entries, fingerprint, index)
        return cls(root, entries, db, _read_settings(root), searchable=searchable)

    def __len__(self) -> int:
        return len(self._entries)

    def urls(self) -> list[str]:
        return [e.url for e in self._entries]

    def get(self, url: str) -> SavedPage | None:
        """The saved page for `url` (any spelling normalise_url equates, http or https), else None."""
        key = url_key(url)
        entry = self._by_key.get(key)
        if entry is None and key.startswith(("http://", "https://")):
            other = "https://" + key[7:] if key.startswith("http://") else "http://" + key[8:]
            entry = self._by_key.get(other)
        if entry is None:
            return None
        if entry.status is not None:
            return SavedPage(url=entry.url, content_type=entry.content_type, body=b"", final_url=entry.url,
                             title=entry.title, published=entry.published, status=entry.status)
        return SavedPage(url=entry.url, content_type=entry.content_type, body=_load(self.root, entry),
                         final_url=entry.url, title=entry.title, published=entry.published)

    def search(self, query: str, n: int = 10) -> list[SearchResult]:
        """Up to `n` pages best matching the words of `query` (BM25, title weighted); [] when nothing matches."""
        if not self.searchable:
            raise ValueError("this corpus was opened without its search index (searchable=False)")
        with self._lock:
            found = hits(self._db, "pages", "url", query, n)
        return [SearchResult(title=h.title or h.key, url=h.key, snippet=h.snippet, published=h.published)
                for h in found]

    def close(self) -> None:
        with self._lock:
            self._db.close()


class CorpusSearch:
    """The corpus behind the SearchProvider interface (recency is ignored: the frozen web has no "now")."""

    name = "corpus"

    def __init__(self, corpus: Corpus):
        self.corpus = corpus

    def search(self, query: str, n: int = 10, recency_days: int | None = None) -> list[SearchResult]:
        if self.corpus.settings.search_fails:
            raise SearchFailed(f"SEARCH_FAILED: {self.corpus.settings.search_fails}")
        return self.corpus.search(query, n)


def _load(root: Path, entry: ManifestEntry) -> bytes:
    """The saved bytes of a page; ConfigError naming the file and the setting when they cannot be read."""
    assert entry.path is not None  # entries with no path are saved failures, never loaded
    try:
        data = (root / entry.path).read_bytes()
        return gzip.decompress(data) if entry.path.endswith(".gz") else data
    except (OSError, EOFError, zlib.error) as e:
        raise ConfigError(f"The corpus at {root} is damaged: {entry.path} cannot be read ({e}). Rebuild it, or set "
                          "RESEARCH_CORPUS_DIR to another folder of saved pages.") from None


def _read_settings(root: Path) -> CorpusSettings:
    """DIR/corpus.json, or the defaults when there is none; ConfigError naming the file when it is invalid."""
    path = root / SETTINGS
    try:
        return CorpusSettings.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return CorpusSettings()
    except (OSError, ValidationError) as e:
        raise ConfigError(f"{path} is not valid corpus settings ({str(e).splitlines()[0]}); fix it or remove it, "
                          "or set RESEARCH_CORPUS_DIR to another folder of saved pages.") from None


def _open_existing(index: Path, fingerprint: str) -> sqlite3.Connection | None:
    if not index.is_file():
        return None
    db = sqlite3.connect(f"file:{index}?mode=ro", uri=True, check_same_thread=False)
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
    except sqlite3.DatabaseError:  # not an index of ours (or damaged): rebuild it
        row = None
    if row and row[0] == fingerprint:
        return db
    db.close()
    return None


def _extracted(root: Path, entry: ManifestEntry) -> tuple[str, str | None, str | None]:
    if entry.path is None:  # a saved failure: search shows its title and snippet, as a real engine would
        return entry.snippet or "", entry.title, entry.published
    charset = re.search(r"charset\s*=\s*[\"']?([^\"';\s]+)", entry.content_type, re.I)
    doc = Document(kind=_kind(entry.content_type), body=_load(root, entry), url=entry.url,  # type: ignore[arg-type]
                   charset=charset.group(1) if charset else None)
    try:
        got = default_pool().read(doc)
    except ExtractionError:
        return "", entry.title, entry.published
    return got.text, entry.title or got.title, entry.published or got.published


def _fill(db: sqlite3.Connection, root: Path, entries: list[ManifestEntry], fingerprint: str) -> None:
    db.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
        CREATE TABLE pages (id INTEGER PRIMARY KEY, url TEXT NOT NULL, title TEXT, published TEXT);
    """ + TABLES)
    seen: set[str] = set()
    firsts: list[ManifestEntry] = []
    for entry in entries:
        if url_key(entry.url) not in seen:  # the first line for a URL wins, as in get()
            seen.add(url_key(entry.url))
            firsts.append(entry)
    with ThreadPoolExecutor(max_workers=default_pool().size) as readers:  # pages are read in parallel workers
        for entry, (text, title, published) in zip(firsts, readers.map(lambda e: _extracted(root, e), firsts),
                                                       strict=True):
            page_id = db.execute("INSERT INTO pages (url, title, published) VALUES (?, ?, ?)",
                                 (entry.url, title, published)).lastrowid
            assert page_id is not None
            add_text(db, page_id, title, text)
    db.execute("INSERT INTO meta VALUES ('fingerprint', ?)", (fingerprint,))
    db.commit()


def _build_index(root: Path, entries: list[ManifestEntry], fingerprint: str, index: Path) -> sqlite3.Connection:
    try:
        # Built under a temporary name and renamed, so a concurrent opener never sees half an index.
        fd, tmp = tempfile.mkstemp(prefix=".index-", suffix=".tmp", dir=root)
        os.close(fd)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; other users of the corpus must be able to read it
    except OSError:  # read-only folder: index in memory for this process
        db = sqlite3.connect(":memory:", check_same_thread=False)
        _fill(db, root, entries, fingerprint)
        return db
    try:
        db = sqlite3.connect(tmp)  # SQLite takes the empty file as an empty database
        _fill(db, root, entries, fingerprint)
        db.close()
        os.replace(tmp, index)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return sqlite3.connect(f"file:{index}?mode=ro", uri=True, check_same_thread=False)


def build_corpus(pages: Iterable[CorpusPage], directory: str | os.PathLike[str]) -> Corpus:
    """Save `pages` (gzip-compressed) with a manifest into `directory` and open the corpus."""
    root = Path(directory)
    (root / "pages").mkdir(parents=True, exist_ok=True)
    lines = []
    for page in pages:
        name = f"pages/{hashlib.sha256(page.url.encode()).hexdigest()[:20]}.gz"
        (root / name).write_bytes(gzip.compress(page.body, mtime=0))
        entry = ManifestEntry(url=page.url, path=name, content_type=page.content_type, title=page.title,
                              published=page.published)
        lines.append(entry.model_dump_json(exclude_none=True))
    (root / MANIFEST).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return Corpus.open(root)


def corpus_from_extraction_set(src_dir: str | os.PathLike[str], dest_dir: str | os.PathLike[str],
                               limit: int | None = None) -> Corpus:
    """A corpus of the shared extraction set (ground-truth.json + html/<id>.html.gz), files copied as they are."""
    src, dest = Path(src_dir), Path(dest_dir)
    truth = json.loads((src / "ground-truth.json").read_text(encoding="utf-8"))
    (dest / "pages").mkdir(parents=True, exist_ok=True)
    lines = []
    for page_id, item in sorted(truth.items())[:limit]:
        name = f"pages/{page_id}.html.gz"
        (dest / name).write_bytes((src / "html" / f"{page_id}.html.gz").read_bytes())
        lines.append(ManifestEntry(url=item["url"], path=name).model_dump_json(exclude_none=True))
    (dest / MANIFEST).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return Corpus.open(dest)
