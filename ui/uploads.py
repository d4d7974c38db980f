"""Documents a visitor uploads for a live run: the gate on Streamlit's upload endpoint (only a session that entered
the access code may upload, within limits on count, size per file and in all), and the staging of a session's files
into a private folder for the run (names made safe, each file written exclusively and never through a link), removed
with the index built from it once the run has ended."""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from pipeline.web.docs_index import index_file
from pipeline.web.folder import KINDS

log = logging.getLogger(__name__)
ACCEPTED = tuple(sorted(KINDS))  # the extensions a documents folder reads (".pdf", ".docx", ...)
MAX_NAME_CHARS = 120
STAGED_PREFIX = "upload-"
STALE_SECONDS = 24 * 3600  # a staged folder left by a process that died is removed by the next one after this


class UploadLimits(BaseModel):
    """How much one session may upload: files, bytes per file, bytes in all."""

    @classmethod
    def closed(cls) -> UploadLimits:
        """No upload at all: the gate while the app's settings are invalid."""
        return cls(max_files=0, max_file_bytes=0, max_total_bytes=0)

    max_files: int
    max_file_bytes: int
    max_total_bytes: int

    def describe(self) -> str:
        return (f"at most {self.max_files} files, {_mb(self.max_file_bytes)} each and {_mb(self.max_total_bytes)} "
                "in all")


def _mb(n: int) -> str:
    return f"{n / 1_000_000:g} MB"


class Refusal(BaseModel):
    """A file that was not taken, and why (naming the limit or the rule)."""

    name: str
    reason: str


class Staged(BaseModel):
    """A session's files written for one run: the folder, the names kept, and each file refused with its reason."""

    folder: Path
    files: list[str]
    refused: list[Refusal]


def safe_name(raw: str) -> str | Refusal:
    """The name a file is written under: its last path part, NFC, without control characters; or why it is refused
    (empty, a dot name, or a type a documents folder does not read)."""
    last = raw.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in unicodedata.normalize("NFC", last) if unicodedata.category(c)[0] != "C").strip()
    shown = name or raw[:60]
    if not name or name.startswith("."):
        return Refusal(name=shown, reason="the file has no usable name")
    stem, dot, ext = name.rpartition(".")
    if not dot or f".{ext.lower()}" not in KINDS:
        return Refusal(name=shown, reason=f"only {', '.join(ACCEPTED)} files are read")
    if len(name) > MAX_NAME_CHARS:
        name = f"{stem[:MAX_NAME_CHARS - len(ext) - 1]}.{ext}"
    return name


def _write_new(folder: Path, name: str, data: bytes) -> None:
    """`data` into a new file `name` of `folder`: never over an existing file, never through a link."""
    fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def stage(files: Sequence[tuple[str, bytes]], parent: Path, limits: UploadLimits,
          progress: Callable[[int, int], None] | None = None) -> Staged:
    """The files written into a new private folder under `parent`, in order, within `limits`; a file past a limit
    or with a refused name is named with its reason, the others are kept."""
    parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=STAGED_PREFIX, dir=parent))  # mode 0700, a name no one can guess
    kept: list[str] = []
    refused: list[Refusal] = []
    total = 0
    for i, (raw, data) in enumerate(files, 1):
        name = safe_name(raw)
        if isinstance(name, Refusal):
            refused.append(name)
        elif len(kept) >= limits.max_files:
            refused.append(Refusal(name=name, reason=f"over the limit of {limits.max_files} files"))
        elif len(data) > limits.max_file_bytes:
            refused.append(Refusal(name=name, reason=f"larger than the limit of {_mb(limits.max_file_bytes)} a file"))
        elif total + len(data) > limits.max_total_bytes:
            refused.append(Refusal(name=name, reason=f"over the limit of {_mb(limits.max_total_bytes)} in all"))
        elif name.casefold() in {k.casefold() for k in kept}:
            refused.append(Refusal(name=name, reason="another file of this upload has the same name"))
        else:
            _write_new(folder, name, data)
            kept.append(name)
            total += len(data)
        if progress is not None:
            progress(i, len(files))
    return Staged(folder=folder, files=kept, refused=refused)


def discard(folder: Path, cache_dir: str) -> None:
    """Remove a staged folder and the index built from it (the run store keeps what the run read)."""
    root = folder.resolve()
    shutil.rmtree(root, ignore_errors=True)
    try:
        index_file(cache_dir, root).unlink(missing_ok=True)
    except OSError as e:
        log.warning("the index of %s was not removed: %s", root, e)


def sweep(parent: Path, cache_dir: str, older_than: float = STALE_SECONDS, now: float | None = None) -> int:
    """Remove staged folders under `parent` last changed over `older_than` seconds ago; how many were removed."""
    now = time.time() if now is None else now
    gone = 0
    for folder in parent.glob(f"{STAGED_PREFIX}*") if parent.is_dir() else []:
        try:
            stale = folder.is_dir() and not folder.is_symlink() and now - folder.stat().st_mtime > older_than
        except OSError:
            continue
        if stale:
            discard(folder, cache_dir)
            gone += 1
    return gone


class UploadManager(Protocol):
    """What the gate wraps of Streamlit's uploaded-file manager (runtime.uploaded_file_mgr)."""

    def add_file(self, session_id: str, file: Any) -> None: ...
    def remove_file(self, session_id: str, file_id: str) -> None: ...
    def remove_session_files(self, session_id: str) -> None: ...


class UploadRefused(PermissionError):
    """An upload the gate did not let in; the message names the rule or the limit."""


class UploadGate:
    """Server-wide: the sessions that may upload (those that entered the access code) and what each holds; wraps the
    upload manager so an upload from any other session, or past what a session may hold, is refused before it is
    kept. A session may hold twice the upload limits: the exact limits are applied when the files are staged, where
    the page can name them (a refusal here reaches the visitor only as a failed upload)."""

    def __init__(self, limits: UploadLimits) -> None:
        self.limits = UploadLimits(max_files=2 * limits.max_files, max_file_bytes=2 * limits.max_file_bytes,
                                   max_total_bytes=2 * limits.max_total_bytes)
        self._lock = threading.Lock()
        self._granted: set[str] = set()
        self._held: dict[str, dict[str, int]] = {}  # session -> file id -> bytes
        self._wrapped: set[int] = set()

    @property
    def installed(self) -> bool:
        """Whether the gate guards an upload endpoint: uploads are offered only then."""
        with self._lock:
            return bool(self._wrapped)

    def grant(self, session_id: str) -> None:
        with self._lock:
            self._granted.add(session_id)

    def check(self, session_id: str, file_id: str, size: int) -> None:
        """Take note of a file about to be kept for `session_id`; UploadRefused when it may not be."""
        with self._lock:
            if session_id not in self._granted:
                raise UploadRefused("uploads need the access code: unlock live research first")
            held = {k: v for k, v in self._held.get(session_id, {}).items() if k != file_id}
            if len(held) >= self.limits.max_files:
                raise UploadRefused(f"over the limit of {self.limits.max_files} files")
            if size > self.limits.max_file_bytes:
                raise UploadRefused(f"larger than the limit of {_mb(self.limits.max_file_bytes)} a file")
            if sum(held.values()) + size > self.limits.max_total_bytes:
                raise UploadRefused(f"over the limit of {_mb(self.limits.max_total_bytes)} in all")
            self._held[session_id] = {**held, file_id: size}

    def released(self, session_id: str, file_id: str | None = None) -> None:
        """A file (or, with no id, the whole session: it ended) no longer held."""
        with self._lock:
            if file_id is None:
                self._held.pop(session_id, None)
                self._granted.discard(session_id)
            else:
                self._held.get(session_id, {}).pop(file_id, None)

    def install(self, manager: UploadManager) -> None:
        """Wrap `manager` so every upload passes check() and every removal is noted; this gate's wrapper replaces any
        other gate's (the class's own methods are the ones wrapped)."""
        with self._lock:
            if id(manager) in self._wrapped:
                return
            self._wrapped.add(id(manager))
        cls = type(manager)
        add = cls.add_file.__get__(manager)
        remove = cls.remove_file.__get__(manager)
        remove_all = cls.remove_session_files.__get__(manager)

        def add_file(session_id: str, file: Any) -> None:
            self.check(session_id, file.file_id, len(file.data))
            add(session_id, file)

        def remove_file(session_id: str, file_id: str) -> None:
            remove(session_id, file_id)
            self.released(session_id, file_id)

        def remove_session_files(session_id: str) -> None:
            remove_all(session_id)
            self.released(session_id)

        # Instance attributes shadow the class's methods: the upload route calls these on the same object.
        vars(manager).update(add_file=add_file, remove_file=remove_file, remove_session_files=remove_session_files)
