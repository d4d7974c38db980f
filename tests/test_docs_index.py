"""The index of a documents folder: refused files listed with reasons, incremental re-indexing, atomic updates, and
never a byte written into the user's folder."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.config import Settings
from pipeline.core.location import locate
from pipeline.web.docs_index import DocsIndex, Progress, index_file
from pipeline.web.workers import WorkerPool
from tests.fakes.documents import encrypted_pdf, pdf_bytes, report_pages, write


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    workers = WorkerPool(size=2)
    yield workers
    workers.close()


def settings(tmp_path: Path, **extra: object) -> Settings:
    return Settings(cache_dir=str(tmp_path / "cache"), **extra)  # type: ignore[arg-type]


def listing(folder: Path) -> list[tuple[str, int, int]]:
    """Every path under `folder` with its size and mtime: what "unchanged" means for the user's folder."""
    return sorted((str(p.relative_to(folder)), p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*"))


def notes(folder: Path, count: int) -> None:
    write(folder, {f"notes/{i // 50}/note-{i:03}.txt": f"Note {i}. The bridge number {i} was painted green."
                   for i in range(count)})


def test_refused_files_are_listed_with_reasons_and_the_rest_indexed(tmp_path: Path, pool: WorkerPool) -> None:
    docs = tmp_path / "docs"
    write(docs, {"report.pdf": pdf_bytes(report_pages(3), title="Review"), "notes.md": "# Notes\n\nThe ferry runs.",
                 "locked.pdf": encrypted_pdf(["Secret."]), "broken.pdf": b"%PDF-1.7\n garbage", "big.txt": "x" * 5000,
                 "photo.jpg": b"\xff\xd8\xff", "empty.txt": "", ".hidden.txt": "never listed"})
    index = DocsIndex.open(docs, settings(tmp_path, docs_max_bytes=4000), pool=pool)
    assert [d.path for d in index.documents()] == ["notes.md", "report.pdf"]
    reasons = {r.path: r.reason for r in index.refused()}
    assert set(reasons) == {"locked.pdf", "broken.pdf", "big.txt", "photo.jpg", "empty.txt"}
    assert "encrypted" in reasons["locked.pdf"] and "malformed" in reasons["broken.pdf"]
    assert "too large" in reasons["big.txt"] and "RESEARCH_DOCS_MAX_BYTES" in reasons["big.txt"]
    assert "unknown type (.jpg)" in reasons["photo.jpg"] and "empty" in reasons["empty.txt"]
    assert [r.url for r in index.search("ferry")] == ["doc:notes.md"]
    index.close()


def test_only_changed_files_are_read_again(tmp_path: Path, pool: WorkerPool) -> None:
    docs, config = tmp_path / "docs", settings(tmp_path)
    notes(docs, 2_000)
    first = DocsIndex.open(docs, config, pool=pool)
    assert (first.stats.read, first.stats.files) == (2_000, 2_000)
    first.close()
    again = DocsIndex.open(docs, config, pool=pool)
    assert (again.stats.read, again.stats.reused) == (0, 2_000)
    again.close()

    changed = docs / "notes/3/note-170.txt"
    changed.write_text("Note 170. The bridge was painted crimson.", encoding="utf-8")
    touched = docs / "notes/0/note-007.txt"
    os.utime(touched, ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 5_000_000_000))
    (docs / "notes/39/note-1999.txt").unlink()
    later = DocsIndex.open(docs, config, pool=pool)
    assert (later.stats.read, later.stats.rehashed, later.stats.removed, later.stats.reused) == (1, 1, 1, 1_997)
    assert [r.url for r in later.search("crimson")] == ["doc:notes/3/note-170.txt"]
    assert later.document("notes/0/note-007.txt").mtime_ns == touched.stat().st_mtime_ns
    later.close()


def test_the_index_is_never_written_into_the_folder(tmp_path: Path, pool: WorkerPool) -> None:
    docs = tmp_path / "docs"
    notes(docs, 5)
    before = listing(docs)
    index = DocsIndex.open(docs, settings(tmp_path), pool=pool)
    index.close()
    assert listing(docs) == before
    assert index_file(tmp_path / "cache", docs.resolve()).is_file()
    inside = DocsIndex.open(docs, Settings(cache_dir=str(docs / "cache")), pool=pool)  # a cache inside the folder
    assert inside.stats.read == 5 and listing(docs) == before  # kept in memory instead
    inside.close()
    not_a_folder = tmp_path / "cache-file"
    not_a_folder.write_text("a file where the cache folder should be", encoding="utf-8")
    unwritable = DocsIndex.open(docs, Settings(cache_dir=str(not_a_folder)), pool=pool)  # cannot be written
    assert unwritable.stats.read == 5 and [r.url for r in unwritable.search("bridge", 1)]  # kept in memory
    unwritable.close()


def test_a_failed_build_leaves_the_previous_index_intact(tmp_path: Path, pool: WorkerPool) -> None:
    docs, config = tmp_path / "docs", settings(tmp_path)
    notes(docs, 4)
    DocsIndex.open(docs, config, pool=pool).close()
    write(docs, {f"more/new-{i}.txt": f"New note {i} about the tunnel." for i in range(6)})

    def fails(progress: Progress) -> None:
        if progress.done == 3:
            raise OSError("disk full")  # what a failing write or a full disk raises midway

    with pytest.raises(OSError, match="disk full"):
        DocsIndex.open(docs, config, progress=fails, pool=pool)
    kept = DocsIndex.open(docs, config, pool=pool)
    assert kept.stats.read == 6 and len(kept.documents()) == 10  # nothing of the failed build was kept
    assert list((tmp_path / "cache" / "docs").glob("*.tmp")) == []
    kept.close()


_BUILD = """
import sys
from pipeline.config import Settings
from pipeline.web.docs_index import DocsIndex
DocsIndex.open(sys.argv[1], Settings(cache_dir=sys.argv[2]), progress=lambda p: print(p.done, flush=True))
"""


def test_a_build_killed_midway_leaves_the_previous_index_intact(tmp_path: Path, pool: WorkerPool) -> None:
    docs, config = tmp_path / "docs", settings(tmp_path)
    notes(docs, 5)
    DocsIndex.open(docs, config, pool=pool).close()
    target = index_file(config.cache_dir, docs.resolve())
    before = target.read_bytes()
    write(docs, {f"more/new-{i:03}.txt": f"New note {i} about the tunnel." for i in range(150)})
    child = subprocess.Popen([sys.executable, "-c", _BUILD, str(docs), config.cache_dir], stdout=subprocess.PIPE,
                             text=True, start_new_session=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "1"  # midway: one file read
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the build and its extraction workers, as a crash would
        child.wait()
    assert target.read_bytes() == before
    with sqlite3.connect(f"file:{target}?mode=ro", uri=True) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT count(*) FROM files").fetchone() == (5,)
    started = time.monotonic()
    resumed = DocsIndex.open(docs, config, pool=pool)
    assert resumed.stats.read == 150 and len(resumed.documents()) == 155 and time.monotonic() - started < 120
    assert list(target.parent.glob("*.tmp")) == []  # the killed build's temporary file is cleared away
    resumed.close()


def test_a_500_page_pdf_is_read_whole_within_its_budget_with_progress(tmp_path: Path, pool: WorkerPool) -> None:
    docs = tmp_path / "docs"
    answer = "The tunnel survey of 1987 found 14 cracked segments."
    write(docs, {"survey.pdf": pdf_bytes(report_pages(500, {437: answer}), title="Tunnel survey"),
                 "note.md": "# Note\n\nA short note."})
    seen: list[Progress] = []
    index = DocsIndex.open(docs, settings(tmp_path), pool=pool, progress=seen.append)
    try:
        doc = index.document("survey.pdf")
        start = doc.text.index(answer)
        place = locate(doc.layout, start, start + len(answer))
    finally:
        index.close()
    assert [(p.done, p.total) for p in seen] == [(1, 2), (2, 2)] and seen[-1].failed == 0
    assert len(doc.layout.pages) == 500 and doc.layout.pages[-1].page == 500
    assert place is not None and place.page == 437
