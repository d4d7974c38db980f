"""Extraction quality and speed on two shared sets of real pages: news articles and diverse pages.

Usage: python benchmarks/perf/extraction_bench.py [--news DIR] [--diverse DIR] [--procs N] [--limit N]
DIR defaults: ../shared/data/extraction (121 news pages with hand-annotated article bodies) and
../shared/data/extraction-diverse (47 pages of many kinds from Mozilla Readability's tests: blogs, docs, forums,
table layouts); pass an empty DIR to skip a set. For each set, for our extract_html, for trafilatura.extract with
its default settings and for trafilatura.extract with favor_precision (both without comments, on the HTML text),
prints: shingle precision, recall and F1 of the article body (lower-cased \\w+ words, 4-word shingles, per page,
macro-averaged), pages per second (extraction only, one process; and with N processes), and the peak resident
memory of the process.
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

from pipeline.web.charset import decode_text
from pipeline.web.extract import ExtractionError, extract_html

SHARED = Path(__file__).resolve().parents[3] / "shared/data"
DEFAULT_NEWS = SHARED / "extraction"
DEFAULT_DIVERSE = SHARED / "extraction-diverse"
_WORD = re.compile(r"\w+")
_HASH_ID = re.compile(r"[0-9a-f]{64}")
TARGET_NEWS_F1 = 0.96
TARGET_PAGES_PER_S = 10.0


class Page(NamedTuple):
    id: str
    url: str | None
    html: str
    body: str


class Score(NamedTuple):
    precision: float
    recall: float
    f1: float


class Row(NamedTuple):
    name: str
    precision: float
    recall: float
    f1: float
    pages_per_s: float
    pages_per_s_parallel: float | None


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
        url = item.get("url") if item.get("url") not in (None, "None", "") else None
        pages.append(Page(page_id, url, decode_text(raw, None, html=True), item["articleBody"]))
    return pages


def ours(page: Page) -> str:
    try:
        return extract_html(page.html, url=page.url).text
    except ExtractionError:
        return ""


def trafilatura_default(page: Page) -> str:
    return trafilatura.extract(page.html, url=page.url, include_comments=False) or ""


def trafilatura_precision(page: Page) -> str:
    return trafilatura.extract(page.html, url=page.url, favor_precision=True, include_comments=False) or ""


EXTRACTORS: tuple[tuple[str, Callable[[Page], str]], ...] = (
    ("extract_html (ours)", ours),
    ("trafilatura default", trafilatura_default),
    ("trafilatura precision", trafilatura_precision),
)


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


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_set(label: str, data_dir: Path, procs: int, limit: int | None) -> list[Row]:
    """Score and time every extractor on one set, print its table, and return the rows."""
    pages = load_pages(data_dir, limit)
    rss_loaded = rss_mb()
    for _, fn in EXTRACTORS:
        fn(pages[0])  # warm-up: first-call imports and caches are not per-page cost
    rows: list[Row] = []
    worst: list[tuple[float, str]] = []
    for name, fn in EXTRACTORS:
        texts, seconds = run(pages, fn)
        scores = [score(p.body, t) for p, t in zip(pages, texts, strict=True)]
        parallel = run_parallel(pages, fn, procs) if procs > 1 else None
        rows.append(Row(name, mean(s.precision for s in scores), mean(s.recall for s in scores),
                        mean(s.f1 for s in scores), len(pages) / seconds, len(pages) / parallel if parallel else None))
        if fn is ours:
            worst = sorted((s.f1, _name(p)) for p, s in zip(pages, scores, strict=True))[:5]

    print(f"\n{label}: {len(pages)} pages from {data_dir}")
    par = f"pages/s ({procs} procs)" if procs > 1 else ""
    print(f"{'extractor':<24}{'P':>8}{'R':>8}{'F1':>8}{'pages/s (1 proc)':>18}{par:>20}")
    for row in rows:
        par_cell = f"{row.pages_per_s_parallel:>20.1f}" if row.pages_per_s_parallel else ""
        print(f"{row.name:<24}{row.precision:>8.4f}{row.recall:>8.4f}{row.f1:>8.4f}{row.pages_per_s:>18.1f}{par_cell}")
    print(f"peak RSS of this process so far: {rss_mb():.0f} MB (after loading these pages: {rss_loaded:.0f} MB)")
    print("lowest F1 (ours): " + "; ".join(f"{f:.2f} {n}" for f, n in worst))
    return rows


def _name(page: Page) -> str:
    short = page.id[:12] if _HASH_ID.fullmatch(page.id) else page.id
    return f"{short} {page.url}" if page.url else short


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--news", type=str, default=str(DEFAULT_NEWS), help="news set directory ('' to skip)")
    parser.add_argument("--diverse", type=str, default=str(DEFAULT_DIVERSE), help="diverse set directory ('' to skip)")
    parser.add_argument("--procs", type=int, default=2, help="also time with this many processes (0: skip)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N pages of each set")
    args = parser.parse_args(argv)
    sets = [(label, Path(d)) for label, d in (("news", args.news), ("diverse", args.diverse)) if d]
    for label, data_dir in sets:
        if not (data_dir / "ground-truth.json").is_file():
            print(f"no ground-truth.json in {data_dir}; pass the {label} set's directory", file=sys.stderr)
            return 2

    print("Extraction benchmark: 4-word shingles of lower-cased \\w+ words vs articleBody; P, R, F1 per page, "
          "macro-averaged")
    results = {label: bench_set(label, data_dir, args.procs, args.limit) for label, data_dir in sets}

    print()
    if "news" in results:
        f1, pps = results["news"][0].f1, results["news"][0].pages_per_s
        ok = f1 >= TARGET_NEWS_F1 and pps >= TARGET_PAGES_PER_S
        print(f"target news: F1 >= {TARGET_NEWS_F1}, >= {TARGET_PAGES_PER_S:g} pages/s -> "
              f"{'PASS' if ok else 'BELOW TARGET'} ({f1:.4f}, {pps:.1f} pages/s)")
    if "diverse" in results:
        ours_f1, default_f1 = results["diverse"][0].f1, results["diverse"][1].f1
        ok = ours_f1 >= default_f1
        print(f"target diverse: F1 >= trafilatura default's -> {'PASS' if ok else 'BELOW TARGET'} "
              f"({ours_f1:.4f} vs {default_f1:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
