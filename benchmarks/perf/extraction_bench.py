"""Extraction quality and speed on the shared extraction set (121 real pages with hand-annotated article bodies).

Usage: python benchmarks/extraction_bench.py [DATA_DIR] [--procs N] [--limit N]
DATA_DIR defaults to ../shared/data/extraction (next to the repository). Prints, for our extract_html and
for raw trafilatura.extract (favor_precision, no comments): shingle precision, recall and F1 of the article
body (lower-cased \\w+ words, 4-word shingles, per page, macro-averaged), pages per second (extraction
only, one process; and with N processes), and the peak resident memory of the process.
"""
from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing
import re
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from statistics import mean
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import trafilatura

from pipeline.web.extract import ExtractionError, extract_html
from pipeline.web.fetch import decode_text

DEFAULT_DATA = Path(__file__).resolve().parents[3] / "shared/data/extraction"
_WORD = re.compile(r"\w+")
TARGET_F1 = 0.95
TARGET_PAGES_PER_S = 10.0


class Page(NamedTuple):
    id: str
    url: str
    html: str
    body: str


class Score(NamedTuple):
    precision: float
    recall: float
    f1: float


def shingles(text: str, n: int = 4) -> set[tuple[str, ...]]:
    """The set of n-word shingles of `text`, words being lower-cased \\w+ runs."""
    words = _WORD.findall(text.lower())
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def score(truth: str, predicted: str) -> Score:
    """Shingle precision, recall and F1 of one page; an empty prediction of a non-empty body scores 0."""
    true, pred = shingles(truth), shingles(predicted)
    hit = len(true & pred)
    precision = hit / len(pred) if pred else float(not true)
    recall = hit / len(true) if true else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Score(precision, recall, f1)


def load_pages(data_dir: Path, limit: int | None = None) -> list[Page]:
    truth = json.loads((data_dir / "ground-truth.json").read_text(encoding="utf-8"))
    pages = []
    for page_id, item in sorted(truth.items())[:limit]:
        raw = gzip.decompress((data_dir / "html" / f"{page_id}.html.gz").read_bytes())
        pages.append(Page(page_id, item["url"], decode_text(raw, None, html=True), item["articleBody"]))
    return pages


def ours(page: Page) -> str:
    try:
        return extract_html(page.html, url=page.url).text
    except ExtractionError:
        return ""


def raw_trafilatura(page: Page) -> str:
    return trafilatura.extract(page.html, url=page.url, favor_precision=True, include_comments=False) or ""


def run(pages: list[Page], fn: Callable[[Page], str]) -> tuple[list[str], float]:
    start = time.perf_counter()
    texts = [fn(p) for p in pages]
    return texts, time.perf_counter() - start


def run_parallel(pages: list[Page], fn: Callable[[Page], str], procs: int) -> float:
    with multiprocessing.get_context("fork").Pool(procs) as pool:
        pool.map(fn, pages[:procs])  # warm the workers (imports, lazy tables) outside the timing
        start = time.perf_counter()
        pool.map(fn, pages, chunksize=4)
        return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", nargs="?", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--procs", type=int, default=2, help="also time with this many processes (0: skip)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N pages")
    args = parser.parse_args(argv)
    if not (args.data_dir / "ground-truth.json").is_file():
        print(f"no ground-truth.json in {args.data_dir}; pass the extraction data directory", file=sys.stderr)
        return 2

    pages = load_pages(args.data_dir, args.limit)
    rss_loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ours(pages[0]), raw_trafilatura(pages[0])  # warm-up: first-call imports and caches are not per-page cost
    rows = []
    worst: list[tuple[float, str, str]] = []
    for name, fn in (("extract_html (ours)", ours), ("trafilatura.extract raw", raw_trafilatura)):
        texts, seconds = run(pages, fn)
        scores = [score(p.body, t) for p, t in zip(pages, texts, strict=True)]
        parallel = run_parallel(pages, fn, args.procs) if args.procs > 1 else None
        rows.append((name, mean(s.precision for s in scores), mean(s.recall for s in scores),
                     mean(s.f1 for s in scores), len(pages) / seconds,
                     len(pages) / parallel if parallel else None))
        if fn is ours:
            worst = sorted((s.f1, p.id[:12], p.url) for p, s in zip(pages, scores, strict=True))[:5]
    rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print(f"Extraction benchmark: {len(pages)} pages from {args.data_dir}")
    print("4-word shingles of lower-cased \\w+ words vs articleBody; P, R, F1 per page, macro-averaged\n")
    par = f"pages/s ({args.procs} procs)" if args.procs > 1 else ""
    print(f"{'extractor':<26}{'P':>8}{'R':>8}{'F1':>8}{'pages/s (1 proc)':>18}{par:>20}")
    for name, p, r, f1, pps, ppps in rows:
        par_cell = f"{ppps:>20.1f}" if ppps else ""
        print(f"{name:<26}{p:>8.4f}{r:>8.4f}{f1:>8.4f}{pps:>18.1f}{par_cell}")
    print(f"\npeak RSS of this process: {rss_peak:.0f} MB (after loading the pages: {rss_loaded:.0f} MB)")
    print("lowest F1 (ours): " + "; ".join(f"{f:.2f} {i} {u}" for f, i, u in worst))
    f1, pps = rows[0][3], rows[0][4]
    verdict = "PASS" if f1 >= TARGET_F1 and pps >= TARGET_PAGES_PER_S else "BELOW TARGET"
    print(f"targets: F1 >= {TARGET_F1}, >= {TARGET_PAGES_PER_S:g} pages/s -> {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
