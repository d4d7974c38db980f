"""Indexing the shipped corpora ahead of time (the container image does it at build time)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.config import SHIPPED_CORPORA
from pipeline.web.corpus import INDEX, Corpus
from pipeline.web.index_corpora import main


def test_every_corpus_under_the_folder_gets_its_index_and_later_opens_reuse_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "corpora"
    shutil.copytree(SHIPPED_CORPORA / "failure-set", root, ignore=shutil.ignore_patterns(".index*"))
    assert main([str(root)]) == 0
    indexes = sorted(root.rglob(INDEX))
    assert len(indexes) == len(list(root.rglob("manifest.jsonl"))) == 9
    assert "conflict: 3 pages indexed" in capsys.readouterr().out
    before = {p: p.stat().st_mtime_ns for p in indexes}
    corpus = Corpus.open(indexes[0].parent)
    corpus.close()
    assert {p: p.stat().st_mtime_ns for p in indexes} == before  # reused, not rebuilt


def test_a_folder_with_no_corpus_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path)]) == 2 and "no corpus" in capsys.readouterr().err
    assert main([str(tmp_path / "missing")]) == 2 and "is not a folder" in capsys.readouterr().err
