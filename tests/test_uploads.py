"""Uploaded documents (ui/uploads.py): names made safe, limits on count and size named in each refusal, files written
exclusively and never through a link, the gate on Streamlit's own upload manager (a session without the access code
is refused), and staged folders removed with their index."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from pipeline.config import Settings
from pipeline.web.docs_index import DocsIndex, index_file
from tests.fakes.documents import pdf_bytes
from ui.uploads import Refusal, UploadGate, UploadLimits, UploadRefused, discard, safe_name, stage, sweep

LIMITS = UploadLimits(max_files=3, max_file_bytes=1_000, max_total_bytes=1_500)


@pytest.mark.parametrize(("raw", "expected"), [
    ("report.pdf", "report.pdf"),
    ("../../etc/passwd.md", "passwd.md"),
    ("C:\\Users\\me\\notes.txt", "notes.txt"),
    ("/abs/path/to/a.docx", "a.docx"),
    ("bad\x00na\x1bme\u202e.md", "badname.md"),  # control characters and a bidi override removed
    ("Cafe\u0301.html", "Café.html"),  # NFC
    ("x" * 300 + ".pdf", "x" * 116 + ".pdf"),
])
def test_a_name_keeps_only_its_last_part_without_control_characters(raw: str, expected: str) -> None:
    assert safe_name(raw) == expected


@pytest.mark.parametrize(("raw", "why"), [
    ("..", "no usable name"), (".", "no usable name"), ("", "no usable name"), ("dir/", "no usable name"),
    (".hidden.md", "no usable name"), ("program.exe", "only .docx"), ("archive.tar.gz", "only .docx"),
    ("noextension", "only .docx"),
])
def test_a_name_that_cannot_be_used_is_refused_with_the_rule(raw: str, why: str) -> None:
    got = safe_name(raw)
    assert isinstance(got, Refusal) and why in got.reason


def test_staging_keeps_what_fits_and_names_each_limit_it_refuses(tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    staged = stage([("a.md", b"a" * 600), ("big.pdf", b"b" * 1_001), ("c.md", b"c" * 600), ("d.md", b"d" * 600),
                    ("A.md", b"x"), ("e.txt", b"e"), ("f.txt", b"f"), ("evil.sh", b"#!")], tmp_path, LIMITS,
                   progress=lambda done, total: seen.append((done, total)))
    assert staged.files == ["a.md", "c.md", "e.txt"]
    reasons = {r.name: r.reason for r in staged.refused}
    assert reasons["big.pdf"] == "larger than the limit of 0.001 MB a file"
    assert reasons["d.md"] == "over the limit of 0.0015 MB in all"
    assert reasons["A.md"] == "another file of this upload has the same name"
    assert reasons["f.txt"] == "over the limit of 3 files"
    assert "only .docx" in reasons["evil.sh"]
    assert seen[-1] == (8, 8)
    assert sorted(p.name for p in staged.folder.iterdir()) == ["a.md", "c.md", "e.txt"]
    assert staged.folder.parent == tmp_path and (staged.folder.stat().st_mode & 0o777) == 0o700
    assert all((p.stat().st_mode & 0o777) == 0o600 for p in staged.folder.iterdir())
    assert (staged.folder / "a.md").read_bytes() == b"a" * 600


def test_a_file_is_never_written_over_an_existing_one_or_through_a_link(tmp_path: Path) -> None:
    from ui.uploads import _write_new
    target = tmp_path / "outside.md"
    target.write_text("keep")
    (tmp_path / "link.md").symlink_to(target)
    with pytest.raises(FileExistsError):
        _write_new(tmp_path, "link.md", b"overwrite")
    with pytest.raises(FileExistsError):
        _write_new(tmp_path, "outside.md", b"overwrite")
    assert target.read_text() == "keep"


def test_discard_removes_the_folder_and_its_index(tmp_path: Path) -> None:
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    staged = stage([("r.pdf", pdf_bytes(["The output rose to 41 megawatts."]))], tmp_path / "uploads",
                   UploadLimits(max_files=2, max_file_bytes=100_000, max_total_bytes=100_000))
    DocsIndex.open(staged.folder, settings).close()
    index = index_file(settings.cache_dir, staged.folder.resolve())
    assert index.is_file()
    discard(staged.folder, settings.cache_dir)
    assert not staged.folder.exists() and not index.exists()


def test_sweep_removes_only_stale_staged_folders(tmp_path: Path) -> None:
    old = stage([("a.md", b"a")], tmp_path, LIMITS).folder
    new = stage([("b.md", b"b")], tmp_path, LIMITS).folder
    other = tmp_path / "not-an-upload"
    other.mkdir()
    past = time.time() - 2 * 24 * 3600
    os.utime(old, (past, past))
    os.utime(other, (past, past))
    assert sweep(tmp_path, str(tmp_path / "cache")) == 1
    assert not old.exists() and new.exists() and other.exists()


def _file(file_id: str, size: int) -> UploadedFileRec:
    return UploadedFileRec(file_id=file_id, name=f"{file_id}.pdf", type="application/pdf", data=b"x" * size)


def test_the_gate_refuses_a_session_without_the_code_and_holds_each_session_to_twice_the_limits() -> None:
    manager = MemoryUploadedFileManager("/_stcore/upload_file")
    gate = UploadGate(LIMITS)  # a session may hold 6 files, 2,000 bytes a file, 3,000 in all
    gate.install(manager)
    gate.install(manager)  # once only
    assert gate.installed
    with pytest.raises(UploadRefused, match="access code"):
        manager.add_file("stranger", _file("f1", 10))
    assert manager.get_files("stranger", ["f1"]) == []
    gate.grant("visitor")
    manager.add_file("visitor", _file("f1", 1_500))  # over the upload limit: staging names it, the gate holds it
    manager.add_file("visitor", _file("f1", 1_600))  # the same file again replaces it
    with pytest.raises(UploadRefused, match="0.002 MB a file"):
        manager.add_file("visitor", _file("f2", 2_001))
    with pytest.raises(UploadRefused, match="0.003 MB in all"):
        manager.add_file("visitor", _file("f2", 1_500))
    manager.remove_file("visitor", "f1")
    for i in range(6):
        manager.add_file("visitor", _file(f"g{i}", 100))
    with pytest.raises(UploadRefused, match="6 files"):
        manager.add_file("visitor", _file("g6", 100))
    assert len(manager.get_files("visitor", [f"g{i}" for i in range(6)])) == 6
    manager.remove_session_files("visitor")  # the session ended: its grant goes with it
    with pytest.raises(UploadRefused, match="access code"):
        manager.add_file("visitor", _file("h", 1))


def test_a_gate_not_installed_offers_no_upload_and_a_new_gate_replaces_the_old() -> None:
    assert not UploadGate(LIMITS).installed
    manager = MemoryUploadedFileManager("/_stcore/upload_file")
    closed = UploadGate(UploadLimits.closed())
    closed.install(manager)
    closed.grant("visitor")
    with pytest.raises(UploadRefused, match="0 files"):
        manager.add_file("visitor", _file("f", 1))
    opened = UploadGate(LIMITS)
    opened.install(manager)  # the settings were fixed: this gate decides now, not both
    opened.grant("visitor")
    manager.add_file("visitor", _file("f", 1))
    assert len(manager.get_files("visitor", ["f"])) == 1
