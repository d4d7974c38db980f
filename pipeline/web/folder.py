"""A folder of the user's own files: which files it holds (recursively), which are refused and why, and their bytes.

Safety: a path with a ".." part or an absolute one is refused; a symbolic link is followed only when it resolves
inside the folder, and symlinked folders are never entered; only regular files are opened (a fifo, a device or a
socket is refused without being opened); a file is read only up to its listed size, and a file whose size or
modification time differs before and after the read (or from the listing) is refused as changed. Hidden files and
folders (a name starting with ".") are skipped. Nothing here parses the bytes: workers.py does, in a worker.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from pydantic import BaseModel

from pipeline.config import ConfigError
from pipeline.web.documents import Kind

KINDS: dict[str, Kind] = {".pdf": "pdf", ".docx": "docx", ".md": "markdown", ".markdown": "markdown",
                          ".txt": "text", ".html": "html", ".htm": "html"}
MEDIA_TYPES: dict[Kind, str] = {
    "pdf": "application/pdf", "html": "text/html", "text": "text/plain", "markdown": "text/markdown",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document"}


class FolderFile(BaseModel):
    """A readable file of the folder, as listed: its path (relative, "/" separators), kind, size and mtime."""

    path: str
    kind: Kind
    size: int
    mtime_ns: int


class Refused(BaseModel):
    """A file of the folder that is not read, and why (one line, naming the fix where there is one)."""

    path: str
    reason: str


class Unreadable(Exception):
    """A file cannot be read safely; str() is the one-line reason."""


def folder_root(directory: str | os.PathLike[str]) -> Path:
    """The folder, resolved; ConfigError naming the fix when it is not a folder."""
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise ConfigError(f"{directory} is not a folder; pass --docs (or set RESEARCH_DOCS_DIR to) a folder of "
                          "PDF, Word, Markdown, HTML or text files")
    return root.resolve()


def scan(root: Path, max_bytes: int) -> tuple[list[FolderFile], list[Refused]]:
    """Every file under `root` in path order: the readable ones and the refused ones with their reasons."""
    found: list[FolderFile] = []
    refused: list[Refused] = []
    for here, folders, names in os.walk(root, followlinks=False):
        folders[:] = sorted(f for f in folders if not f.startswith("."))
        for folder in folders:
            full = Path(here, folder)
            if full.is_symlink() and not full.resolve().is_relative_to(root):
                refused.append(Refused(path=_relative(root, full) + "/",
                                       reason="a symbolic link to a folder outside the documents folder"))
        for name in sorted(names):
            if name.startswith("."):
                continue
            listed = check(root, _relative(root, Path(here, name)), max_bytes)
            (found if isinstance(listed, FolderFile) else refused).append(listed)  # type: ignore[arg-type]
    return found, refused


def _relative(root: Path, full: Path) -> str:
    return full.relative_to(root).as_posix()


def check(root: Path, path: str, max_bytes: int) -> FolderFile | Refused:
    """`path` (relative to `root`) as a readable file, or refused with the reason; the file is not opened."""
    try:
        return _listed(root, path, max_bytes)
    except Unreadable as e:
        return Refused(path=path, reason=str(e))


def _listed(root: Path, path: str, max_bytes: int) -> FolderFile:
    target = _inside(root, path)
    kind = KINDS.get(PurePosixPath(path).suffix.lower())
    if kind is None:
        raise Unreadable(f"an unknown type ({PurePosixPath(path).suffix or 'no extension'}); the types read are "
                         + ", ".join(sorted(KINDS)))
    try:
        info = os.stat(target)
    except OSError as e:
        raise Unreadable(f"it cannot be opened ({e.strerror or e})") from None
    if not stat.S_ISREG(info.st_mode):
        raise Unreadable("not a regular file (a fifo, device or socket is never opened)")
    if info.st_size > max_bytes:
        raise Unreadable(f"too large ({info.st_size:,} bytes; the limit is {max_bytes:,}, RESEARCH_DOCS_MAX_BYTES)")
    return FolderFile(path=path, kind=kind, size=info.st_size, mtime_ns=info.st_mtime_ns)


def _inside(root: Path, path: str) -> Path:
    """The real file `path` names inside `root`; Unreadable when the path or a link in it leads outside."""
    parts = PurePosixPath(path).parts
    if not parts or PurePosixPath(path).is_absolute() or ".." in parts or "\\" in path or "\x00" in path:
        raise Unreadable("the path leaves the documents folder (an absolute path or a '..' part)")
    full = root.joinpath(*parts)
    try:
        target = full.resolve(strict=True)
    except (OSError, RuntimeError):
        raise Unreadable("the file is not in the documents folder (missing, or a broken link)") from None
    if not target.is_relative_to(root):
        raise Unreadable("a symbolic link to a file outside the documents folder")
    return target


def read_bytes(root: Path, listed: FolderFile) -> bytes:
    """The bytes of a listed file; Unreadable when it is no longer safe to read or it changed since listed or
    while it was read."""
    target = _inside(root, listed.path)
    fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            raise Unreadable("not a regular file (a fifo, device or socket is never read)")
        if (before.st_size, before.st_mtime_ns) != (listed.size, listed.mtime_ns):
            raise Unreadable("the file changed after it was listed; run again once it is saved")
        chunks, left = [], listed.size
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) != listed.size or (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        raise Unreadable("the file changed while it was read; run again once it is saved")
    return data
