"""Path safety of a documents folder: links out of it, '..', fifos and devices, and files that change under a read."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.config import Settings
from pipeline.core.budget import Budget, Phase
from pipeline.core.schema import BudgetLimits
from pipeline.web.docs_index import DocsIndex
from pipeline.web.docs_pages import DocumentPages
from pipeline.web.folder import FolderFile, Refused, Unreadable, check, read_bytes, scan
from pipeline.web.workers import WorkerPool
from tests.fakes.documents import write


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    workers = WorkerPool(size=1)
    yield workers
    workers.close()


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    docs, outside = tmp_path / "docs", tmp_path / "outside"
    write(docs, {"inside.txt": "The lighthouse was built in 1874.", "sub/deep.md": "# Deep\n\nA deep note."})
    write(outside, {"secret.txt": "The outside secret.", "more/other.txt": "Another outside file."})
    return docs.resolve(), outside.resolve()


def test_links_out_of_the_folder_are_refused_and_links_inside_it_are_read(folders: tuple[Path, Path]) -> None:
    docs, outside = folders
    (docs / "escape.txt").symlink_to(outside / "secret.txt")
    (docs / "alias.txt").symlink_to(docs / "inside.txt")
    (docs / "elsewhere").symlink_to(outside / "more", target_is_directory=True)
    found, refused = scan(docs, 10_000)
    assert [f.path for f in found] == ["alias.txt", "inside.txt", "sub/deep.md"]
    assert {r.path: r.reason for r in refused} == {
        "elsewhere/": "a symbolic link to a folder outside the documents folder",
        "escape.txt": "a symbolic link to a file outside the documents folder"}


def test_paths_with_dot_dot_or_absolute_are_refused(folders: tuple[Path, Path], pool: WorkerPool,
                                                   tmp_path: Path) -> None:
    docs, outside = folders
    for path in ("../outside/secret.txt", "sub/../../outside/secret.txt", str(outside / "secret.txt")):
        listed = check(docs, path, 10_000)
        assert isinstance(listed, Refused) and "leaves the documents folder" in listed.reason
    index = DocsIndex.open(docs, Settings(cache_dir=str(tmp_path / "cache")), pool=pool)  # type: ignore[call-arg]
    pages = DocumentPages(index, Budget(BudgetLimits(), Settings().price))
    for url in ("doc:../outside/secret.txt", "doc:%2E%2E/outside/secret.txt",
                "doc:sub/%2e%2e/%2e%2e/outside/secret.txt"):
        loaded = pages.load(url, Phase.RESEARCH)
        assert not loaded.result.ok and "leaves the documents folder" in (loaded.result.error or "")
    assert pages.load("doc:inside.txt", Phase.RESEARCH).result.text == "The lighthouse was built in 1874."
    assert not pages.load("https://example.org/", Phase.RESEARCH).result.ok  # documents alone: no web
    index.close()


def test_fifos_and_devices_are_refused_without_being_opened(folders: tuple[Path, Path]) -> None:
    docs, _ = folders
    os.mkfifo(docs / "pipe.txt")  # opening it for reading would wait for a writer forever
    (docs / "null.txt").symlink_to("/dev/null")
    found, refused = scan(docs, 10_000)
    assert "pipe.txt" not in [f.path for f in found]
    reasons = {r.path: r.reason for r in refused}
    assert reasons["pipe.txt"] == "not a regular file (a fifo, device or socket is never opened)"
    assert reasons["null.txt"] == "a symbolic link to a file outside the documents folder"


def test_a_file_that_changes_after_it_is_listed_or_while_it_is_read_is_refused(folders: tuple[Path, Path]) -> None:
    docs, _ = folders
    found, _ = scan(docs, 10_000)
    listed = next(f for f in found if f.path == "inside.txt")
    assert read_bytes(docs, listed) == b"The lighthouse was built in 1874."
    with (docs / "inside.txt").open("a", encoding="utf-8") as growing:
        growing.write(" It still stands.")
    with pytest.raises(Unreadable, match="changed after it was listed"):
        read_bytes(docs, listed)
    stale = FolderFile(path="inside.txt", kind="text", size=listed.size + 17, mtime_ns=listed.mtime_ns)
    with pytest.raises(Unreadable, match="changed"):  # listed larger than it is: never read past what was listed
        read_bytes(docs, stale)


def test_a_file_written_to_during_the_read_is_refused(folders: tuple[Path, Path],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    docs, _ = folders
    found, _ = scan(docs, 10_000)
    listed = next(f for f in found if f.path == "inside.txt")
    real_read = os.read

    def read_while_another_writes(fd: int, n: int) -> bytes:
        chunk = real_read(fd, n)
        with (docs / "inside.txt").open("a", encoding="utf-8") as writer:  # another program saves the file now
            writer.write(" Rebuilt later.")
        return chunk

    monkeypatch.setattr(os, "read", read_while_another_writes)
    with pytest.raises(Unreadable, match="changed while it was read"):
        read_bytes(docs, listed)


def test_a_file_changed_since_it_was_indexed_is_read_again_not_served_stale(folders: tuple[Path, Path],
                                                                            pool: WorkerPool, tmp_path: Path) -> None:
    docs, _ = folders
    index = DocsIndex.open(docs, Settings(cache_dir=str(tmp_path / "cache")), pool=pool)  # type: ignore[call-arg]
    (docs / "inside.txt").write_text("The lighthouse was rebuilt in 1902.", encoding="utf-8")
    assert index.document("inside.txt").text == "The lighthouse was rebuilt in 1902."
    (docs / "inside.txt").unlink()
    with pytest.raises(Unreadable, match="not in the documents folder"):
        index.document("inside.txt")
    index.close()
