"""Times QuoteIndex on a ~1 MB page: index build, then 100 look-ups (mangled hits, ellipsis quotes, misses); then the
growth of the text functions on hostile pages.

Run: .venv/bin/python benchmarks/perf/quotes_bench.py [--size-mb 1.0] [--data PATH] [--growth-only]
The page is the extraction benchmark's article bodies, concatenated (synthetic seeded text if absent). Growth: the
quote matcher (index, a near-miss quote found and explained), the instruction filter and the sentence splitter, each
on 100 KB and on 1 MB of that normal text and of each hostile shape (tests/regex_audit.py:page_shapes: ellipses, one
word repeated, mixed whitespace, one letter, one full stop), and the ratio: linear is about 10x.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.core.instructions import instruction_reason, quote_instruction_reason  # noqa: E402
from pipeline.core.quotes import QuoteIndex  # noqa: E402
from pipeline.research.extractive.sentences import split_sentences  # noqa: E402
from tests.regex_audit import near_miss, page_shapes  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "extraction" / "ground-truth.json"
FOREIGN_WORDS = ["zebraquill", "marmaladex", "quantumfig", "violinoke"]


def build_page(data: Path, size: int, rng: random.Random) -> tuple[str, str]:
    """A page of at least `size` characters, and a description of where it came from."""
    if data.exists():
        bodies = [a["articleBody"] for a in json.loads(data.read_text(encoding="utf-8")).values()]
        source = f"{len(bodies)} article bodies from {data.name}, repeated"
    else:
        words = ["the", "council", "said", "a", "plan", "would", "cost", "million", "percent", "people", "“new”",
                 "city’s", "report", "—", "and", "of"]
        bodies = [" ".join(rng.choice(words) for _ in range(400)) + "." for _ in range(200)]
        source = "synthetic seeded text"
    parts, total = [], 0
    while total < size:
        for body in bodies:
            parts.append(body)
            total += len(body) + 2
            if total >= size:
                break
    return "\n\n".join(parts), source


def mangle(rng: random.Random, quote: str) -> str:
    """The quote with the changes models make: case, whitespace, straight quotes."""
    quote = quote.replace("’", "'").replace("“", '"').replace("”", '"')
    words = [rng.choice([w, w.upper(), w.lower()]) for w in quote.split()]
    return "".join(w + rng.choice([" ", "  ", "\n", "\u00a0"]) for w in words).strip()


def passage(rng: random.Random, page: str, tokens: list[re.Match[str]], n_words: int) -> tuple[int, int]:
    """Original [start, end) of n_words whole tokens in a random place."""
    a = rng.randrange(len(tokens) - n_words)
    return tokens[a].start(), tokens[a + n_words - 1].end()


def make_quotes(rng: random.Random, page: str) -> list[tuple[str, str]]:
    """100 (kind, quote): 60 mangled hits, 20 ellipsis quotes, 20 misses (one word replaced)."""
    tokens = list(re.finditer(r"\S+", page))
    quotes = []
    for _ in range(60):
        start, end = passage(rng, page, tokens, rng.randint(6, 25))
        quotes.append(("hit", mangle(rng, page[start:end])))
    for _ in range(20):
        a = rng.randrange(len(tokens) - 40)
        first, second = tokens[a:a + 5], tokens[a + 15:a + 20]
        quotes.append(("ellipsis", page[first[0].start():first[-1].end()] + " ... "
                       + page[second[0].start():second[-1].end()]))
    for _ in range(20):
        start, end = passage(rng, page, tokens, rng.randint(8, 20))
        words = page[start:end].split()
        words[rng.randrange(len(words))] = rng.choice(FOREIGN_WORDS)
        quotes.append(("miss", mangle(rng, " ".join(words))))
    rng.shuffle(quotes)
    return quotes


def match_quote(page: str) -> None:
    index = QuoteIndex(page)
    quote = near_miss(page)
    index.find(quote)
    index.explain_miss(quote)


def filter_instructions(page: str) -> None:
    middle = len(page) // 2
    instruction_reason(page)
    quote_instruction_reason(page, middle, middle + 100)


def split(page: str) -> None:
    split_sentences(page)


GROWTH: dict[str, Callable[[str], None]] = {"quote matcher": match_quote, "instruction filter": filter_instructions,
                                           "sentence splitter": split}


def pages(size: int, data: Path) -> dict[str, str]:
    """The pages timed for growth, of `size` characters: normal text (article bodies), then each hostile shape."""
    return {"normal text": build_page(data, size, random.Random(1234))[0][:size], **page_shapes(size)}


def growth(data: Path = DEFAULT_DATA) -> None:
    """Each text function on 100 KB and on 1 MB of normal text and of each hostile shape, with the ratio (linear:
    about 10x)."""
    small, big = pages(100_000, data), pages(1_000_000, data)
    print("growth on normal and hostile pages, 100 KB -> 1 MB (linear: about 10x):")
    for function, run in GROWTH.items():
        for shape in small:
            seconds = []
            for page in (small[shape], big[shape]):
                t0 = time.perf_counter()
                run(page)
                seconds.append(time.perf_counter() - t0)
            print(f"  {function:<19} {shape:<14} {seconds[0] * 1000:8.1f} ms {seconds[1] * 1000:9.1f} ms "
                  f"{seconds[1] / max(seconds[0], 1e-6):6.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=1.0)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--growth-only", action="store_true", help="only the growth on hostile pages")
    args = parser.parse_args()
    if args.growth_only:
        growth(args.data)
        return
    rng = random.Random(1234)
    page, source = build_page(args.data, int(args.size_mb * 1_000_000), rng)
    quotes = make_quotes(rng, page)

    builds = []
    for _ in range(3):
        t0 = time.perf_counter()
        index = QuoteIndex(page)
        builds.append((time.perf_counter() - t0) * 1000)

    index.find(quotes[0][1])  # warm the per-character fold cache used for quotes
    rounds, results = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        results = [index.find(q) for _, q in quotes]
        rounds.append((time.perf_counter() - t0) * 1000)

    tracemalloc.start()
    index = QuoteIndex(page)
    retained, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    found = {kind: sum(1 for (k, _), r in zip(quotes, results, strict=True) if k == kind and r is not None)
             for kind in ("hit", "ellipsis", "miss")}
    total = {kind: sum(1 for k, _ in quotes if k == kind) for kind in found}
    find_ms = statistics.median(rounds)
    print(f"page: {len(page):,} chars ({source})")
    print(f"index build: {statistics.median(builds):.0f} ms (median of 3; runs "
          f"{', '.join(f'{b:.0f}' for b in builds)})")
    print(f"100 finds: {find_ms:.1f} ms total (median of 5; min {min(rounds):.1f}, max {max(rounds):.1f}), "
          f"{find_ms * 10:.0f} µs per quote")
    print(f"found: hits {found['hit']}/{total['hit']}, ellipsis {found['ellipsis']}/{total['ellipsis']}, "
          f"misses wrongly found {found['miss']}/{total['miss']}")
    for (kind, quote), result in zip(quotes, results, strict=True):
        if kind != "miss" and result is None:
            print(f"  not found ({kind}): {index.explain_miss(quote)}")
    print(f"memory (tracemalloc): index retained {retained / 1e6:.1f} MB, peak during build {peak / 1e6:.1f} MB")
    print(f"target 100 finds < 50 ms: {'met' if find_ms < 50 else 'NOT met'}")
    growth(args.data)


if __name__ == "__main__":
    main()
