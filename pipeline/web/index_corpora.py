"""Build the search index of every corpus under a folder: `python -m pipeline.web.index_corpora [DIR]` (default: the
shipped corpora). The container image runs it at build time, because its corpora are read-only to the app, which
would otherwise rebuild each index in memory in every process (about 14 s for pydocs)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from pipeline.config import SHIPPED_CORPORA
from pipeline.web.corpus import MANIFEST, Corpus


def index_corpora(root: Path) -> list[tuple[Path, int, float]]:
    """Open every corpus under `root`, which writes its index unless a current one is there; (folder, pages, seconds)
    for each."""
    done = []
    for manifest in sorted(root.rglob(MANIFEST)):
        started = time.monotonic()
        corpus = Corpus.open(manifest.parent)
        corpus.close()
        done.append((manifest.parent, len(corpus), time.monotonic() - started))
    return done


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else SHIPPED_CORPORA
    if not root.is_dir():
        print(f"error: {root} is not a folder", file=sys.stderr)
        return 2
    done = index_corpora(root)
    for folder, pages, seconds in done:
        print(f"{folder.relative_to(root)}: {pages} pages indexed in {seconds:.1f} s")
    if not done:
        print(f"error: no corpus ({MANIFEST}) under {root}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
