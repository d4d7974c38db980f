"""`python -m pipeline docs check DIR`: what a documents folder holds, read and refused; and the index's progress.

Exit 0 when every file is readable, 1 when some are refused (each is listed with its reason), 2 on a usage error
(not a folder).
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import TextIO

from pipeline.config import Settings
from pipeline.web.docs_index import DocsIndex, Progress

EXIT_OK, EXIT_REFUSED = 0, 1
_EVERY_SECONDS = 0.5  # at most two progress lines a second


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `docs check DIR`."""
    docs = sub.add_parser("docs", help="a folder of your own files: what is read and what is refused")
    actions = docs.add_subparsers(dest="docs_command", required=True, metavar="ACTION")
    check = actions.add_parser("check", help="index DIR and list each file (kind, pages, characters) and each "
                                             "refused file with its reason")
    check.add_argument("folder", metavar="DIR")
    check.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


class IndexProgress:
    """Index progress on stderr: files done of those to read, files per second, failures; quiet prints nothing."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False) -> None:
        self._stream = stream or sys.stderr
        self._quiet = quiet
        self._last = 0.0

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if self._quiet or (p.done < p.total and now - self._last < _EVERY_SECONDS):
            return
        self._last = now
        rate = p.done / p.seconds if p.seconds > 0 else 0.0
        print(f"  docs    {p.done}/{p.total} new or changed files done, {rate:.1f} files/s, {p.failed} refused",
              file=self._stream, flush=True)


def open_index(folder: str, settings: Settings, quiet: bool) -> DocsIndex:
    """The folder's index brought up to date, with progress on stderr; ConfigError when it is not a folder."""
    index = DocsIndex.open(folder, settings, progress=IndexProgress(quiet=quiet))
    s = index.stats
    if not quiet:
        print(f"  docs    {s.files} files indexed ({s.read} read, {s.rehashed} unchanged by content, {s.reused} "
              f"unchanged) and {s.refused} refused in {s.seconds:.1f} s", file=sys.stderr, flush=True)
    return index


def cmd_docs(args: argparse.Namespace, settings: Settings) -> int:
    index = open_index(args.folder, settings, args.quiet)
    try:
        for doc in index.documents():
            size = f"{len(doc.layout.pages)} pages with text, " if doc.kind == "pdf" else ""
            print(f"ok       {doc.path}  {doc.kind}, {size}{len(doc.text):,} characters, {doc.title!r}")
            for warning in doc.warnings:
                print(f"  note   {warning}")
        refused = index.refused()
        for r in refused:
            print(f"refused  {r.path}  {r.reason}")
        print(f"{len(index.documents())} readable, {len(refused)} refused", file=sys.stderr)
    finally:
        index.close()
    return EXIT_REFUSED if refused else EXIT_OK
