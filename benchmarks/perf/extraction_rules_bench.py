"""Each remaining rule of extract_html, judged on a split: left out of the current extractor, one at a time.

Usage: nice python benchmarks/perf/extraction_rules_bench.py [--news DIR] [--diverse DIR] [--procs N]

The 47 diverse pages are split in two halves by the parity of sha256(page id) (even: `tune`, odd: `held-out`;
the ids of each half are printed). The 121 news pages are scored whole: nothing is tuned on them, they are the
check that a rule does not cost the kind of page the agent reads most. The score is extraction_bench's: 4-word
shingle F1 against the ground truth, per page, macro-averaged (its helpers are imported, not copied).

The rules, switched off by patching pipeline.web.extract inside this process (the module is not edited):
  R1 hidden      hidden elements dropped              off: _is_hidden -> False
  R2 comments    reader-comment sections dropped      off: _is_comment_section -> False
  R4 baseline5x  baseline replaces when 5x longer     off: _MUCH_LONGER = inf (the empty-text fallback R0 stays)
  R0 empty       baseline when the reading is empty   off: _baseline -> "" after an empty reading
  L  loader      trafilatura's load_html              off: lxml.html.document_fromstring
  T  tables      include_tables=True                  off: include_tables=False
L and T are what trafilatura.extract does by itself; for them the question is whether to depart from it.

A  leave one out of the current extractor: on = all rules, off = all but this one.
B  configurations: trafilatura default and precision (extraction_bench's), and the current extract_html.
Verdict: a rule is kept if F1 is higher with it on the held-out half AND not lower on news; a rule that changes
no held-out or news page is reported as having no effect here (the tests hold its purpose). L and T stay
trafilatura's unless their alternative passes that test. With 23 held-out pages, one page moves the mean by up
to 0.04.

The figures of the rules since dropped (R3 layout tables, R5 default mode when 4x longer, R6 precision as the
first reading), and the selection and ratio sweep that decided them, were measured by this script's earlier
version at commit c135550 (git history); they are recorded in docs/EXTRACTION_RULES.md.
"""
from __future__ import annotations

import argparse
import hashlib
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from statistics import mean
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import lxml.html
import trafilatura
from extraction_bench import (
    DEFAULT_DIVERSE,
    DEFAULT_NEWS,
    Page,
    load_pages,
    ours,
    score,
    trafilatura_default,
    trafilatura_precision,
)

import pipeline.web.extract as extract

RULES = ("R1", "R2", "R4", "R0", "L", "T")
NAMES = {"R1": "hidden elements", "R2": "comment sections", "R4": "baseline 5x", "R0": "baseline if empty",
         "L": "load_html loader", "T": "include_tables"}
TRAFILATURA = frozenset({"L", "T"})  # trafilatura's own choices: its loader, tables included
FULL = frozenset(RULES)
GROUPS = ("tune", "held-out", "news")
_ORIGINAL = {name: getattr(extract, name) for name in (
    "_is_hidden", "_is_comment_section", "_MUCH_LONGER", "_baseline", "_trafilatura", "trafilatura", "load_html")}

Config = frozenset[str]  # the rules switched on
Job = tuple[str, int]  # a page: (set, index)


class _Trafilatura:
    """trafilatura as extract.py sees it, with some keyword arguments of extract() forced."""

    def __init__(self, **forced: Any) -> None:
        self.forced = forced

    def __getattr__(self, name: str) -> Any:
        return getattr(trafilatura, name)

    def extract(self, *args: Any, **kwargs: Any) -> Any:
        return trafilatura.extract(*args, **{**kwargs, **self.forced})


def _lxml_loader(html: str, *args: Any) -> Any:
    try:
        return lxml.html.document_fromstring(html)
    except Exception:
        return None


def apply(on: Config) -> None:
    """Patch pipeline.web.extract so that exactly the rules in `on` are in force."""
    patch: dict[str, Any] = dict(_ORIGINAL)
    if "R1" not in on:
        patch["_is_hidden"] = lambda element: False
    if "R2" not in on:
        patch["_is_comment_section"] = lambda element: False
    if "R4" not in on:
        patch["_MUCH_LONGER"] = math.inf
    if "R0" not in on:
        empty: dict[str, bool] = {}
        reading, baseline = _ORIGINAL["_trafilatura"], _ORIGINAL["_baseline"]

        def _trafilatura(tree: Any, url: str | None) -> dict[str, object]:
            doc: dict[str, object] = reading(tree, url)
            empty["reading"] = not extract._clean(str(doc.get("text") or ""))
            return doc

        patch["_trafilatura"] = _trafilatura
        patch["_baseline"] = lambda tree: "" if empty.get("reading") else baseline(tree)
    if "T" not in on:
        patch["trafilatura"] = _Trafilatura(include_tables=False)
    if "L" not in on:
        patch["load_html"] = _lxml_loader
    for name, value in patch.items():
        setattr(extract, name, value)


# Pages live in the parent before the pool forks; a task names a page by (set, index).
_PAGES: dict[str, list[Page]] = {}
_REFERENCES: dict[str, Callable[[Page], str]] = {
    "trafilatura default": trafilatura_default, "trafilatura precision": trafilatura_precision}


def _task(job: tuple[Config | str, str, int]) -> float:
    config, label, index = job
    page = _PAGES[label][index]
    if isinstance(config, str):
        apply(FULL)  # unpatched
        text = _REFERENCES[config](page)
    else:
        apply(config)
        text = ours(page)
    return score(page.body, text).f1


def half(page_id: str) -> str:
    return "tune" if int(hashlib.sha256(page_id.encode()).hexdigest(), 16) % 2 == 0 else "held-out"


class Runner:
    """Per-page F1 of configurations (rule sets, or a reference's name), computed in a pool."""

    def __init__(self, procs: int, groups: dict[str, list[Job]]):
        self.procs, self.groups = procs, groups
        self.scores: dict[Config | str, dict[Job, float]] = {}
        self.jobs = [(label, i) for label, pages in _PAGES.items() for i in range(len(pages))]

    def compute(self, configs: Iterable[Config | str]) -> None:
        todo = list(dict.fromkeys(c for c in configs if c not in self.scores))
        work = [(c, label, i) for c in todo for label, i in self.jobs]
        if self.procs > 1:
            with multiprocessing.get_context("fork").Pool(self.procs) as pool:
                scores = pool.map(_task, work, chunksize=8)
        else:
            scores = [_task(job) for job in work]
        n = len(self.jobs)
        for j, config in enumerate(todo):
            self.scores[config] = dict(zip(self.jobs, scores[j * n:(j + 1) * n], strict=True))

    def f1(self, config: Config | str, group: str) -> float:
        return mean(self.scores[config][job] for job in self.groups[group])

    def delta(self, on: Config, off: Config) -> dict[str, float]:
        return {g: self.f1(on, g) - self.f1(off, g) for g in GROUPS}

    def moved(self, on: Config, off: Config, group: str, by: float = 0.001) -> list[Job]:
        """Pages of the group whose F1 the change moves by more than `by`."""
        a, b = self.scores[on], self.scores[off]
        return [j for j in self.groups[group] if abs(a[j] - b[j]) > by]

    def unchanged(self, on: Config, off: Config, groups: Iterable[str]) -> bool:
        """No page of these groups scores differently, by any amount."""
        a, b = self.scores[on], self.scores[off]
        return all(a[j] == b[j] for g in groups for j in self.groups[g])


def passes(d: dict[str, float]) -> bool:
    """The test for a change: higher F1 on the held-out half, not lower on news."""
    return d["held-out"] > 0 and d["news"] >= 0


def _verdict(rule: str, d: dict[str, float], no_effect: bool) -> str:
    """d: F1 with the rule (or trafilatura's choice, for L and T) minus without."""
    if rule in TRAFILATURA:
        alternative = {g: -v for g, v in d.items()}
        if passes(alternative):
            return "DROP (the alternative wins held-out and news)"
        return "KEEP (trafilatura's own choice; the alternative " + (
            "loses on news)" if alternative["held-out"] > 0 else "does not win held-out)")
    if no_effect:
        return "NO EFFECT here (kept for its tested purpose)"
    if passes(d):
        return "KEEP"
    if d["held-out"] > 0:
        return "DROP (loses on news)"
    if d["tune"] > 0:
        return "DROP (overfitted: wins on tune only)"
    return "DROP (no win on held-out)"


def _pairs() -> list[tuple[str, Config, Config]]:
    """(rule, on, off) for each rule left out of the current extractor."""
    return [(rule, FULL, FULL - {rule}) for rule in RULES]


def _cells(runner: Runner, on: Config, off: Config) -> str:
    cells = ""
    for g in GROUPS:
        a, b = runner.f1(on, g), runner.f1(off, g)
        pages = runner.moved(on, off, g)
        up = sum(1 for j in pages if runner.scores[on][j] > runner.scores[off][j])
        cells += f"{a:>12.4f}{b:>8.4f}{a - b:>+8.4f}{f'{up}/{len(pages) - up}':>7}"
    return cells


def _print_pairs(runner: Runner) -> None:
    print("\nA. leave one out of the current extractor (on = the current extractor, off = without the rule)")
    print(f"{'rule':<23}" + "".join(f"{g + ' on':>12}{'off':>8}{'delta':>8}{'+/-':>7}" for g in GROUPS)
          + "  verdict")
    for rule, on, off in _pairs():
        verdict = _verdict(rule, runner.delta(on, off), runner.unchanged(on, off, ("held-out", "news")))
        print(f"{rule + ' ' + NAMES[rule]:<23}{_cells(runner, on, off)}  {verdict}")


def _moved_pages(runner: Runner) -> None:
    print("\nDiverse pages each rule of A moves by more than 0.01 F1 (on - off; T = tune, H = held-out)")
    for rule, on, off in _pairs():
        a, b = runner.scores[on], runner.scores[off]
        pages = [j for g in ("tune", "held-out") for j in runner.moved(on, off, g, 0.01)]
        listed = ", ".join(f"{_PAGES['diverse'][i].id.removeprefix('readability-')} "
                           f"{'T' if half(_PAGES['diverse'][i].id) == 'tune' else 'H'} {a[(s, i)] - b[(s, i)]:+.3f}"
                           for s, i in pages)
        print(f"  {rule:<3} {listed or '-'}")


def _row(runner: Runner, name: str, config: Config | str) -> None:
    print(f"{name:<42}" + "".join(f"{runner.f1(config, g):>10.4f}" for g in (*GROUPS, "diverse")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--news", type=str, default=str(DEFAULT_NEWS))
    parser.add_argument("--diverse", type=str, default=str(DEFAULT_DIVERSE))
    parser.add_argument("--procs", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args(argv)
    start = time.perf_counter()
    _PAGES["news"], _PAGES["diverse"] = load_pages(Path(args.news)), load_pages(Path(args.diverse))
    groups: dict[str, list[Job]] = {"tune": [], "held-out": [], "diverse": [],
                                    "news": [("news", i) for i in range(len(_PAGES["news"]))]}
    for i, page in enumerate(_PAGES["diverse"]):
        groups[half(page.id)].append(("diverse", i))
        groups["diverse"].append(("diverse", i))
    print("Extraction rules on a split: 4-word shingle F1 per page, macro-averaged (extraction_bench's score)")
    for g in ("tune", "held-out"):
        ids = [_PAGES["diverse"][i].id.removeprefix("readability-") for _, i in groups[g]]
        print(f"{g} ({len(ids)} diverse pages, sha256(id) {'even' if g == 'tune' else 'odd'}): {' '.join(ids)}")
    print(f"news: all {len(groups['news'])} pages (not tuned on)")
    source = Path(extract.__file__).read_bytes()
    print(f"rules of {extract.__file__} (sha256 {hashlib.sha256(source).hexdigest()[:12]})")

    runner = Runner(args.procs, groups)
    runner.compute([*_REFERENCES, *(c for _, on, off in _pairs() for c in (on, off))])
    print("\nF1 per group; delta = on - off; +/- = pages the change raises / lowers by more than 0.001 F1")
    _print_pairs(runner)
    _moved_pages(runner)

    print(f"\nB. configurations\n{'configuration':<42}" + "".join(f"{g:>10}" for g in (*GROUPS, "diverse")))
    _row(runner, "trafilatura default (extraction_bench)", "trafilatura default")
    _row(runner, "trafilatura precision (extraction_bench)", "trafilatura precision")
    _row(runner, "current extract_html", FULL)
    print(f"\n{time.perf_counter() - start:.0f} s, {args.procs} processes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
